package natsqueue

import (
	"encoding/json"
	"time"

	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/queue"
)

// Settings is the nats: block of a workflow file's queue: block.
type Settings struct {
	Stream string `yaml:"stream"`
	// Consumer is the durable consumer's name (default onceflow-WORKFLOW); it is created
	// with explicit acknowledgements if it does not exist.
	Consumer string `yaml:"consumer"`
	// Subject filters the stream's subjects (default: all).
	Subject string `yaml:"subject"`
	// AckWait is how long a message may stay unacknowledged before redelivery (default 30s).
	AckWait block.Duration `yaml:"ack_wait"`
}

// Walk checks the block.
func (s *Settings) Walk(w block.Walker) {
	if s.Stream == "" {
		w.Problem("", "nats.stream is required: the JetStream stream to consume")
	}
}

// NewConsumer builds the JetStream consumer of the block.
func (s *Settings) NewConsumer(cfg queue.Config, url string) (triggers.Consumer, error) {
	return New(cfg, Config{URL: url, Stream: s.Stream, Consumer: s.Consumer, Subject: s.Subject, AckWait: time.Duration(s.AckWait)})
}

var _ queue.BrokerSettings = (*Settings)(nil)

type broker struct{}

// Broker is the JetStream broker of a workflow file's queue: block (nats:), which package
// stdtriggers gives the queue kind.
func Broker() queue.Broker { return broker{} }

func (broker) Name() string                      { return "nats" }
func (broker) Needs() string                     { return "(stream, consumer)" }
func (broker) DefaultURLEnv() string             { return EnvURL }
func (broker) Schema() json.RawMessage           { return json.RawMessage(settingsSchema) }
func (broker) NewSettings() queue.BrokerSettings { return &Settings{} }
