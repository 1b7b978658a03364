package flowfile

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/triggers"
)

// TriggerOptions say how the triggers of workflow files are built (triggers.Build).
type TriggerOptions struct {
	// Env looks up webhook secrets, broker URLs and the {env.NAME} of requests (default:
	// nothing is set).
	Env func(string) (string, bool)
	// HTTPClient makes the requests of the triggers that make any (a schedule's for_each
	// list), enforcing the egress policy; nil builds them as outlines whose requests
	// fail.
	HTTPClient *http.Client
	// Consume says the queue consumers will run: a broker URL that is not set is then
	// an error. Without it a consumer is built for its companion workflow alone.
	Consume bool
	// MaxDepth caps how deeply a queue message's JSON may nest (queue.Config.MaxDepth).
	MaxDepth int
	// Logger and Metrics receive what the triggers log and measure; leave Metrics nil
	// (not a nil pointer of a type that implements it) for none.
	Logger  *slog.Logger
	Metrics triggers.Metrics
}

// Triggers builds the triggers of checked definitions, in their order, each by its kind:
// the queue consumers, the webhook receivers and the schedules of the standard kinds. The
// error lists, file by file, every trigger that cannot be built (with o.Consume, a broker
// URL that is not set).
func Triggers(defs []*Definition, o TriggerOptions) ([]triggers.Trigger, error) {
	if o.Env == nil {
		o.Env = func(string) (string, bool) { return "", false }
	}
	var out []triggers.Trigger
	var errs []error
	for _, d := range defs {
		for _, td := range d.Triggers {
			t, err := td.Config.Build(&triggers.Build{Workflow: d.Name, File: d.file, Env: o.Env, HTTPClient: o.HTTPClient,
				Consume: o.Consume, MaxDepth: o.MaxDepth, Logger: o.Logger, Metrics: o.Metrics})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.file, err))
				continue
			}
			out = append(out, t)
		}
	}
	return out, errors.Join(errs...)
}

// Schedules returns the schedules of the definitions' triggers (their schedule: blocks),
// ready to register after their workflows, with for_each lists fetched through the
// builder's HTTPClient.
func (b *Builder) Schedules(defs []*Definition) ([]onceflow.Schedule, error) {
	ts, err := Triggers(defs, TriggerOptions{Env: b.env, HTTPClient: b.client})
	if err != nil {
		return nil, err
	}
	return schedulesOf(ts), nil
}

func schedulesOf(ts []triggers.Trigger) []onceflow.Schedule {
	var out []onceflow.Schedule
	for _, t := range ts {
		if s, ok := t.(triggers.Scheduler); ok {
			out = append(out, s.Schedules()...)
		}
	}
	return out
}

// OutlineSchedules is Builder.Schedules for programs that list or trigger schedules without
// fetching lists: a for_each fetch fails if it is ever called.
func OutlineSchedules(defs []*Definition) []onceflow.Schedule {
	var out []onceflow.Schedule
	for _, d := range defs {
		for _, td := range d.Triggers {
			t, err := td.Config.Build(&triggers.Build{Workflow: d.Name, File: d.file, Env: func(string) (string, bool) { return "", false }})
			if err != nil {
				continue
			}
			if s, ok := t.(triggers.Scheduler); ok {
				out = append(out, s.Schedules()...)
			}
		}
	}
	return out
}

// RegisterSchedules builds the schedules of defs and registers them on c, whose workflows
// are registered already.
func RegisterSchedules(c *onceflow.Client, defs []*Definition, b *Builder) error {
	ss, err := b.Schedules(defs)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if err := c.RegisterSchedule(s); err != nil {
			return err
		}
	}
	return nil
}
