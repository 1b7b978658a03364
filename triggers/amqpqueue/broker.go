package amqpqueue

import (
	"encoding/json"

	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/queue"
)

// Settings is the amqp: block of a workflow file's queue: block.
type Settings struct {
	// Queue names the RabbitMQ queue, which must exist.
	Queue string `yaml:"queue"`
	// Prefetch is how many unacknowledged messages the broker hands out at once (default 50).
	Prefetch int `yaml:"prefetch"`
}

// Walk checks the block.
func (s *Settings) Walk(w block.Walker) {
	if s.Queue == "" {
		w.Problem("", "amqp.queue is required: the RabbitMQ queue to consume")
	}
	if s.Prefetch < 0 {
		w.Problem("prefetch", "prefetch must be positive")
	}
}

// NewConsumer builds the RabbitMQ consumer of the block.
func (s *Settings) NewConsumer(cfg queue.Config, url string) (triggers.Consumer, error) {
	return New(cfg, Config{URL: url, Queue: s.Queue, Prefetch: s.Prefetch})
}

var _ queue.BrokerSettings = (*Settings)(nil)

type broker struct{}

// Broker is the RabbitMQ broker of a workflow file's queue: block (amqp:), which package
// stdtriggers gives the queue kind.
func Broker() queue.Broker { return broker{} }

func (broker) Name() string                      { return "amqp" }
func (broker) Needs() string                     { return "(queue)" }
func (broker) DefaultURLEnv() string             { return EnvURL }
func (broker) Schema() json.RawMessage           { return json.RawMessage(settingsSchema) }
func (broker) NewSettings() queue.BrokerSettings { return &Settings{} }
