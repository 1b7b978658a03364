package flowfile

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
	"github.com/onceflow/onceflow/triggers/webhook"
)

// TriggerOptions say how the triggers of workflow files are built.
type TriggerOptions struct {
	// Env looks up webhook secrets and broker URLs (default: nothing is set).
	Env func(string) (string, bool)
	// Consume says the queue consumers will run: a broker URL that is not set is then
	// an error. Without it a consumer is built for its companion workflow alone.
	Consume bool
	// MaxDepth caps how deeply a queue message's JSON may nest (queue.Config.MaxDepth).
	MaxDepth int
	// Logger and Metrics receive what the queue consumers log and measure.
	Logger  *slog.Logger
	Metrics queue.Metrics
}

// Triggers builds the triggers of checked definitions, in their order: a queue consumer
// (natsqueue, amqpqueue) for each queue: block, a webhook receiver for each webhook:
// block. Schedules are built by BuildSchedules. The error lists every broker URL that is
// not set (with o.Consume) and every block that cannot be built.
func Triggers(defs []*Definition, o TriggerOptions) ([]triggers.Trigger, error) {
	if o.Env == nil {
		o.Env = func(string) (string, bool) { return "", false }
	}
	var out []triggers.Trigger
	var errs []error
	for _, d := range defs {
		if d.Queue != nil {
			t, err := d.queueConsumer(o)
			if err != nil {
				errs = append(errs, err)
			} else {
				out = append(out, t)
			}
		}
		if h := d.Webhook; h != nil {
			r, err := webhook.New(d.Name, h.config(), o.Env)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.file, err))
			} else {
				out = append(out, r)
			}
		}
	}
	return out, errors.Join(errs...)
}

// config is the webhook block as the receiver takes it.
func (h *Webhook) config() webhook.Config {
	return webhook.Config{Name: h.Name, Scheme: h.Scheme, SecretEnv: h.SecretEnv, Tolerance: time.Duration(h.Tolerance), EventID: h.EventID,
		EventTypes: h.EventTypes, EventTypeField: h.EventTypeField, Header: h.Header, Encoding: h.Encoding, Prefix: h.Prefix, TimestampHeader: h.TimestampHeader}
}

// QueueURLEnv is the environment variable d's queue reads its broker's URL from: its
// url_env, else ONCEFLOW_NATS_URL or ONCEFLOW_AMQP_URL; "" without a queue.
func (d *Definition) QueueURLEnv() string {
	q := d.Queue
	switch {
	case q == nil:
		return ""
	case q.URLEnv != "":
		return q.URLEnv
	case q.NATS != nil:
		return natsqueue.EnvURL
	}
	return amqpqueue.EnvURL
}

// queueConsumer builds the consumer of d's queue.
func (d *Definition) queueConsumer(o TriggerOptions) (triggers.Consumer, error) {
	q := d.Queue
	name := d.QueueURLEnv()
	url, _ := o.Env(name)
	if o.Consume && strings.TrimSpace(url) == "" {
		return nil, fmt.Errorf("%s: workflow %s consumes a queue: set %s to the broker's URL", d.file, d.Name, name)
	}
	cfg := queue.Config{Workflow: d.Name, URLEnv: name, RunKey: q.RunKey, MaxBacklog: q.MaxBacklog, MaxDepth: o.MaxDepth,
		MaxMessageBytes: q.MaxMessageBytes, Logger: o.Logger, Metrics: o.Metrics}
	var t triggers.Consumer
	var err error
	switch {
	case q.NATS != nil:
		t, err = natsqueue.New(cfg, natsqueue.Config{URL: url, Stream: q.NATS.Stream, Consumer: q.NATS.Consumer,
			Subject: q.NATS.Subject, AckWait: time.Duration(q.NATS.AckWait)})
	default:
		t, err = amqpqueue.New(cfg, amqpqueue.Config{URL: url, Queue: q.AMQP.Queue, Prefetch: q.AMQP.Prefetch})
	}
	if err != nil {
		return nil, fmt.Errorf("%s: queue: %w", d.file, err)
	}
	return t, nil
}
