package server

import (
	"errors"
	"fmt"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/triggers"
)

// triggerSet is the triggers of the workflow files, by capability.
type triggerSet struct {
	all       []triggers.Trigger
	consumers []triggers.Consumer
	receivers []triggers.Receiver
}

// companions are the workflows the triggers need registered wherever steps run (the
// NAME.rejected workflows of the queues), starting runs through s.
func (t triggerSet) companions(s triggers.Starter) []onceflow.Workflow {
	var out []onceflow.Workflow
	for _, tr := range t.all {
		if c, ok := tr.(triggers.Companions); ok {
			out = append(out, c.Companions(s)...)
		}
	}
	return out
}

// triggers builds the triggers of defs: the queue consumers, which every server runs (a
// broker URL that is not set is an error), and the webhook receivers, which the API
// serves.
func (s *Server) triggers(defs []*flowfile.Definition) (triggerSet, error) {
	o := flowfile.TriggerOptions{Env: s.cfg.Env, Consume: true, MaxDepth: s.cfg.MaxDepth, Logger: s.log}
	if s.metrics != nil {
		o.Metrics = s.metrics
	}
	ts, err := flowfile.Triggers(defs, o)
	if err != nil {
		return triggerSet{}, err
	}
	return triggerSet{all: ts, consumers: triggers.Consumers(ts), receivers: triggers.Receivers(ts)}, nil
}

// checkReceivers refuses webhook receivers that cannot verify deliveries (their secrets
// are missing or malformed), naming each one's file: serving them would answer every
// delivery with a 500.
func (s *Server) checkReceivers(rs []triggers.Receiver) error {
	var errs []error
	for _, r := range rs {
		if err := r.Err(); err != nil {
			w, _ := s.client.Workflow(r.Workflow())
			errs = append(errs, fmt.Errorf("%s: %w", w.File, err))
		}
	}
	return errors.Join(errs...)
}
