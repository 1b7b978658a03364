package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/queuetrigger"
	"github.com/onceflow/onceflow/steps/amqpstep"
	"github.com/onceflow/onceflow/steps/natsstep"
)

// queueTrigger is a workflow's queue consumer.
type queueTrigger interface {
	Run(ctx context.Context) error
	Err() error
}

// registerRejects registers, for every workflow fed by a queue, the companion workflow
// that keeps its rejected messages for review: every process that executes steps needs it.
func (a *app) registerRejects() error {
	ws, err := rejectWorkflows(a.client, a.defs)
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
func rejectWorkflows(c *onceflow.Client, defs []*flowfile.Definition) ([]onceflow.Workflow, error) {
	var out []onceflow.Workflow
	for _, d := range defs {
		if d.Queue == nil {
			continue
		}
		key, err := queueRunKey(d)
		if err != nil {
			return nil, err
		}
		out = append(out, queuetrigger.RejectWorkflow(c, d.Name, key))
	}
	return out, nil
}

// queueRunKey is the run key template of d's queue; nil when the message id is the key.
func queueRunKey(d *flowfile.Definition) (*keytmpl.Template, error) {
	if d.Queue.RunKey == "" {
		return nil, nil
	}
	t, err := keytmpl.Parse(d.Queue.RunKey)
	if err != nil {
		return nil, fmt.Errorf("%s: queue.run_key: %w", d.File(), err)
	}
	return t, nil
}

// newTriggers builds the queue consumers of the workflow files; connection URLs come from
// the environment.
func (a *app) newTriggers() ([]queueTrigger, error) {
	var out []queueTrigger
	var errs []error
	for _, d := range a.defs {
		q := d.Queue
		if q == nil {
			continue
		}
		cfg := queuetrigger.Config{Workflow: d.Name, Client: a.client, Stats: a.store, MaxBacklog: q.MaxBacklog, MaxDepth: a.maxDepth,
			MaxMessageBytes: q.MaxMessageBytes, Logger: a.log}
		if a.metrics != nil {
			cfg.Metrics = a.metrics
		}
		key, err := queueRunKey(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.RunKey = key
		env := q.URLEnv
		if env == "" {
			env = amqpstep.EnvURL
			if q.NATS != nil {
				env = natsstep.EnvURL
			}
		}
		cfg.URLEnv = env
		url, _ := a.env(env)
		if strings.TrimSpace(url) == "" {
			errs = append(errs, fmt.Errorf("%s: workflow %s consumes a queue: set %s to the broker's URL", d.File(), d.Name, env))
			continue
		}
		switch {
		case q.NATS != nil:
			out = append(out, queuetrigger.NewNATS(cfg, queuetrigger.NATSConfig{URL: url, Stream: q.NATS.Stream, Consumer: q.NATS.Consumer,
				Subject: q.NATS.Subject, AckWait: time.Duration(q.NATS.AckWait)}))
		case q.AMQP != nil:
			out = append(out, queuetrigger.NewAMQP(cfg, queuetrigger.AMQPConfig{URL: url, Queue: q.AMQP.Queue, Prefetch: q.AMQP.Prefetch}))
		}
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
