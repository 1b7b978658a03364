package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// ReplaceWorkflows swaps every definition at once, after validating all of them: a bad set
// changes nothing; a running step finishes under the definition it started with; steps
// claimed afterwards run under the new one; a removed workflow is no longer claimed.
func TestReplaceWorkflows(t *testing.T) {
	b := setup(t)
	version := func(v string, started, release chan struct{}) onceflow.StepFunc {
		return func(context.Context, *onceflow.StepContext) (any, error) {
			if started != nil {
				close(started)
				<-release
			}
			return map[string]string{"version": v}, nil
		}
	}
	started, release := make(chan struct{}), make(chan struct{})
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", EffectKey: "s:{input.id}", Do: version("v1", started, release)}}})
	b.register(t, onceflow.Workflow{Name: "old", Steps: []onceflow.Step{{ID: "s", EffectKey: "old:{input.id}", Do: version("old", nil, nil)}}})
	r1 := b.start(t, "w", "k1", map[string]any{"id": 1})

	worked := make(chan error, 1)
	go func() { _, err := b.client.Work(b.ctx); worked <- err }()
	waitStarted(t, "s", started, worked) // r1's step runs under v1

	// A bad set: one problem per definition, nothing replaced.
	_, err := b.client.ReplaceWorkflows([]onceflow.Workflow{
		{Name: "w", Steps: []onceflow.Step{{ID: "s", EffectKey: "s:{input.id", Do: version("bad", nil, nil)}}},
		{Name: "x", Steps: []onceflow.Step{{ID: "s", EffectKey: "x"}}},
	})
	var de *onceflow.DefinitionError
	if !errors.As(err, &de) || !errors.Is(err, onceflow.ErrInvalidWorkflow) {
		t.Fatalf("bad set: %v", err)
	}
	if got := b.client.Workflows(); !slices.Equal(got, []string{"old", "w"}) {
		t.Fatalf("after a refused replace: %v", got)
	}

	ch, err := b.client.ReplaceWorkflows([]onceflow.Workflow{
		{Name: "w", Steps: []onceflow.Step{{ID: "s", EffectKey: "s:{input.id}", Do: version("v2", nil, nil)}}},
		{Name: "new", Steps: []onceflow.Step{{ID: "s", EffectKey: "new:{input.id}", Do: version("new", nil, nil)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Added, []string{"new"}) || !slices.Equal(ch.Removed, []string{"old"}) || !slices.Equal(ch.Replaced, []string{"w"}) {
		t.Errorf("changes = %+v", ch)
	}
	close(release)
	if err := <-worked; err != nil {
		t.Fatal(err)
	}
	output := func(runID int64) string {
		t.Helper()
		var out struct{ Version string }
		_ = json.Unmarshal(b.steps(t, runID)["s"].Output, &out)
		return out.Version
	}
	if got := output(r1.ID); got != "v1" {
		t.Errorf("the step running during the replace finished as %q, want v1", got)
	}
	r2 := b.start(t, "w", "k2", map[string]any{"id": 2})
	if _, err := b.client.Start(b.ctx, "old", "k3", map[string]any{"id": 3}); !errors.Is(err, onceflow.ErrWorkflowNotFound) {
		t.Errorf("start of a removed workflow: %v", err)
	}
	b.work(t)
	if got := output(r2.ID); got != "v2" {
		t.Errorf("a step claimed after the replace ran as %q, want v2", got)
	}

	// A run of the removed workflow stays due for a client that has it.
	b2 := setup(t)
	b2.register(t, onceflow.Workflow{Name: "old", Steps: []onceflow.Step{{ID: "s", EffectKey: "old:{input.id}", Do: version("old", nil, nil)}}})
	r3 := b2.start(t, "old", "k3", map[string]any{"id": 3})
	if _, err := b2.client.ReplaceWorkflows(nil); err != nil {
		t.Fatal(err)
	}
	if n := b2.work(t); n != 0 {
		t.Errorf("a removed workflow's step was executed (%d)", n)
	}
	if st := b2.steps(t, r3.ID)["s"].State; st != store.StatePending {
		t.Errorf("removed workflow's step: %s", st)
	}
}

// The workflows of the notification channels are the client's own: replacing the
// definitions keeps them, and a definition may not take a channel's name.
func TestReplaceKeepsNotifyChannels(t *testing.T) {
	send := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	b := setup(t, func(c *onceflow.Config) {
		c.Notify = onceflow.NotifyConfig{Channels: []onceflow.NotifyChannel{{Name: "onceflow.notify-slack.ops", Send: send}},
			Policies: []onceflow.NotifyPolicy{{Name: "all", Channels: []string{"onceflow.notify-slack.ops"}}}}
	})
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: noop}}})
	ch, err := b.client.ReplaceWorkflows([]onceflow.Workflow{{Name: "v", Steps: []onceflow.Step{{ID: "s", Do: noop}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.client.Workflows(); !slices.Equal(got, []string{"onceflow.notify-slack.ops", "v"}) {
		t.Fatalf("workflows after a replace: %v", got)
	}
	if !slices.Equal(ch.Removed, []string{"w"}) || !slices.Equal(ch.Added, []string{"v"}) {
		t.Errorf("changes = %+v", ch)
	}
	// An alert can still be started and sent.
	r := b.start(t, "onceflow.notify-slack.ops", "incident:1:alert", map[string]any{"kind": "alert", "incident": 1})
	b.work(t)
	if got := b.run(t, r.ID).State; got != store.StateCompleted {
		t.Fatalf("alert run %s", got)
	}
	_, err = b.client.ReplaceWorkflows([]onceflow.Workflow{{Name: "onceflow.notify-slack.ops", Steps: []onceflow.Step{{ID: "s", Do: noop}}}})
	var de *onceflow.DefinitionError
	if !errors.As(err, &de) || de.Workflow != "onceflow.notify-slack.ops" {
		t.Fatalf("a workflow named as a channel: %v", err)
	}
}
