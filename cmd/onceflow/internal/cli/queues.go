package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
)

// queueTrigger is a workflow's queue consumer.
type queueTrigger interface {
	triggers.Consumer
	triggers.Companions
}

// registerRejects registers, for every workflow fed by a queue, the companion workflow
// that keeps its rejected messages for review: every process that executes steps needs it.
func (a *app) registerRejects() error {
	ws, err := rejectWorkflows(a.client, a.defs, a.env)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if err := a.client.Register(w); err != nil {
			return err
		}
	}
	return nil
}

// rejectWorkflows are the companion workflows of the definitions fed by a queue.
func rejectWorkflows(c *onceflow.Client, defs []*flowfile.Definition, env func(string) (string, bool)) ([]onceflow.Workflow, error) {
	var out []onceflow.Workflow
	for _, d := range defs {
		if d.Queue == nil {
			continue
		}
		t, _, err := queueConsumer(d, queue.Config{}, env)
		if err != nil {
			return nil, err
		}
		out = append(out, t.Companions(c)...)
	}
	return out, nil
}

// queueConsumer builds the consumer of d's queue with cfg's limits, its broker's URL read
// from env, and returns the variable it is read from; the URL may be missing (the
// consumer then serves only for its companion workflow).
func queueConsumer(d *flowfile.Definition, cfg queue.Config, env func(string) (string, bool)) (queueTrigger, string, error) {
	q := d.Queue
	cfg.Workflow, cfg.RunKey, cfg.MaxBacklog, cfg.MaxMessageBytes = d.Name, q.RunKey, q.MaxBacklog, q.MaxMessageBytes
	name := q.URLEnv
	if name == "" {
		name = amqpqueue.EnvURL
		if q.NATS != nil {
			name = natsqueue.EnvURL
		}
	}
	cfg.URLEnv = name
	url, _ := env(name)
	var t queueTrigger
	var err error
	switch {
	case q.NATS != nil:
		t, err = natsqueue.New(cfg, natsqueue.Config{URL: url, Stream: q.NATS.Stream, Consumer: q.NATS.Consumer,
			Subject: q.NATS.Subject, AckWait: time.Duration(q.NATS.AckWait)})
	default:
		t, err = amqpqueue.New(cfg, amqpqueue.Config{URL: url, Queue: q.AMQP.Queue, Prefetch: q.AMQP.Prefetch})
	}
	if err != nil {
		return nil, name, fmt.Errorf("%s: queue: %w", d.File(), err)
	}
	return t, name, nil
}

// newTriggers builds the queue consumers of the workflow files; connection URLs come from
// the environment.
func (a *app) newTriggers() ([]queueTrigger, error) {
	var out []queueTrigger
	var errs []error
	for _, d := range a.defs {
		if d.Queue == nil {
			continue
		}
		cfg := queue.Config{MaxDepth: a.maxDepth, Logger: a.log}
		if a.metrics != nil {
			cfg.Metrics = a.metrics
		}
		t, env, err := queueConsumer(d, cfg, a.env)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if url, _ := a.env(env); strings.TrimSpace(url) == "" {
			errs = append(errs, fmt.Errorf("%s: workflow %s consumes a queue: set %s to the broker's URL", d.File(), d.Name, env))
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// queuesReady is the /readyz check of the queue consumers.
func (a *app) queuesReady(context.Context) error {
	var errs []error
	for _, t := range a.triggers {
		if err := t.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
