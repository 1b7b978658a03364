package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/triggers"
)

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

// rejectWorkflows are the companion workflows of the definitions' triggers.
func rejectWorkflows(c *onceflow.Client, defs []*flowfile.Definition, env func(string) (string, bool)) ([]onceflow.Workflow, error) {
	ts, err := flowfile.Triggers(defs, flowfile.TriggerOptions{Env: env})
	if err != nil {
		return nil, err
	}
	var out []onceflow.Workflow
	for _, t := range ts {
		if cs, ok := t.(triggers.Companions); ok {
			out = append(out, cs.Companions(c)...)
		}
	}
	return out, nil
}

// newTriggers builds the queue consumers of the workflow files; connection URLs come from
// the environment.
func (a *app) newTriggers() ([]triggers.Trigger, error) {
	o := flowfile.TriggerOptions{Env: a.env, Consume: true, MaxDepth: a.maxDepth, Logger: a.log}
	if a.metrics != nil {
		o.Metrics = a.metrics
	}
	ts, err := flowfile.Triggers(a.defs, o)
	if err != nil {
		return nil, err
	}
	var out []triggers.Trigger
	for _, c := range triggers.Consumers(ts) {
		out = append(out, c)
	}
	return out, nil
}

// newReceivers builds the webhook receivers of defs, their secrets read from env.
func newReceivers(defs []*flowfile.Definition, env func(string) (string, bool)) ([]triggers.Receiver, error) {
	ts, err := flowfile.Triggers(defs, flowfile.TriggerOptions{Env: env})
	if err != nil {
		return nil, err
	}
	return triggers.Receivers(ts), nil
}

// checkReceivers refuses webhook receivers that cannot verify deliveries (their secrets
// are missing or malformed), naming each one's file: serving them would answer every
// delivery with a 500.
func (a *app) checkReceivers() error {
	var errs []error
	for _, r := range a.receivers {
		if err := r.Err(); err != nil {
			w, _ := a.client.Workflow(r.Workflow())
			errs = append(errs, fmt.Errorf("%s: %w", w.File, err))
		}
	}
	return errors.Join(errs...)
}

// queuesReady is the /readyz check of the queue consumers.
func (a *app) queuesReady(context.Context) error {
	var errs []error
	for _, t := range triggers.Consumers(a.triggers) {
		if err := t.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
