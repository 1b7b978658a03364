package onceflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// rejectBundle registers a workflow fed by a queue and its companion, whose one step
// parks every kept item in review.
func rejectBundle(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "orders", Steps: []onceflow.Step{{ID: "a", Do: noop}}, Access: onceflow.Access{Trigger: onceflow.TriggerQueue}})
	b.register(t, onceflow.Workflow{Name: "orders" + onceflow.RejectedSuffix, Access: onceflow.Access{Internal: true}, Steps: []onceflow.Step{{ID: "input", Do: noop}}})
	return b
}

// A rejected item is kept once per identity, a second item of the same identity with
// other content under a key that adds its digest, and the audit trail names the caller
// it came from ("api" for the program's own triggers, as Start).
func TestRejectKeepsOneItemPerIdentity(t *testing.T) {
	b := rejectBundle(t)
	var by onceflow.Caller
	keep := func(id string, in map[string]any) *onceflow.Run {
		t.Helper()
		r, err := b.client.Reject(b.ctx, onceflow.Rejection{Workflow: "orders", By: by, Source: "amqp:orders", Identity: id, Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := keep("m-1", map[string]any{"payload": "not json", "reason": "input_not_json"})
	if first.Workflow != "orders.rejected" || first.RunKey != "amqp:orders|m-1" || first.Duplicate {
		t.Fatalf("kept as %s/%s (duplicate %v), want orders.rejected/amqp:orders|m-1", first.Workflow, first.RunKey, first.Duplicate)
	}
	if again := keep("m-1", map[string]any{"payload": "not json", "reason": "input_not_json"}); again.ID != first.ID || !again.Duplicate {
		t.Fatalf("a redelivery kept run %d (duplicate %v), want run %d again", again.ID, again.Duplicate, first.ID)
	}
	other := keep("m-1", map[string]any{"payload": "other, not json either", "reason": "input_not_json"})
	if other.ID == first.ID || !strings.HasPrefix(other.RunKey, "amqp:orders|m-1|sha256:") {
		t.Fatalf("other content of the same identity kept as run %d key %q, want a second run under a digest key", other.ID, other.RunKey)
	}
	if again := keep("m-1", map[string]any{"payload": "other, not json either", "reason": "input_not_json"}); again.ID != other.ID {
		t.Fatalf("a redelivery of the second item kept run %d, want %d", again.ID, other.ID)
	}
	if err := b.client.Flush(b.ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.events(t, store.EventListParams{RunID: first.ID}) {
		if e.Type == store.EventRunCreated && e.Actor != "api" {
			t.Fatalf("run.created by %q, want api", e.Actor)
		}
	}
	by = onceflow.Caller{Webhook: "stripe"}
	hooked := keep("evt-9", map[string]any{"payload": "{", "reason": "input_not_json"})
	if err := b.client.Flush(b.ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.events(t, store.EventListParams{RunID: hooked.ID}) {
		if e.Type == store.EventRunCreated && e.Actor != "webhook:stripe" {
			t.Fatalf("run.created by %q, want webhook:stripe", e.Actor)
		}
	}
}

// A key that would break the key rules becomes a digest; a companion that is not
// registered is an error that says what to register, and nothing is kept.
func TestRejectKeysAndMissingCompanion(t *testing.T) {
	b := rejectBundle(t)
	r, err := b.client.Reject(b.ctx, onceflow.Rejection{Workflow: "orders", Source: "nats:ORDERS/c", Identity: "id\x1bwith escape", Input: map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.RunKey, "nats:ORDERS/c|sha256:") || onceflow.ValidateKey("run key", r.RunKey) != nil {
		t.Fatalf("run key %q, want nats:ORDERS/c|sha256:…", r.RunKey)
	}
	_, err = b.client.Reject(b.ctx, onceflow.Rejection{Workflow: "payments", Source: "amqp:payments", Identity: "m-1", Input: map[string]any{"x": 1}})
	if !errors.Is(err, onceflow.ErrWorkflowNotFound) || !strings.Contains(err.Error(), "payments.rejected") || !strings.Contains(err.Error(), "register the companion") {
		t.Fatalf("Reject without a companion = %v", err)
	}
}

// DeriveRunKey renders the workflow's RunKey over the input, says which field is missing,
// and refuses a workflow without one with ErrNoRunKey; Register refuses a RunKey that
// reads anything but the input.
func TestDeriveRunKey(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "lead", RunKey: "lead:{input.submission_id}", Description: "a form", Steps: []onceflow.Step{{ID: "a", Do: noop}}})
	b.register(t, onceflow.Workflow{Name: "plain", Steps: []onceflow.Step{{ID: "a", Do: noop}}})
	if k, err := b.client.DeriveRunKey("lead", []byte(`{"submission_id": 8812}`)); err != nil || k != "lead:8812" {
		t.Fatalf("DeriveRunKey = %q, %v", k, err)
	}
	if _, err := b.client.DeriveRunKey("lead", []byte(`{"other": 1}`)); err == nil || !strings.Contains(err.Error(), "submission_id") {
		t.Fatalf("DeriveRunKey without the field = %v", err)
	}
	if _, err := b.client.DeriveRunKey("lead", []byte(`{`)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("DeriveRunKey of a broken body = %v", err)
	}
	if _, err := b.client.DeriveRunKey("plain", []byte(`{}`)); !errors.Is(err, onceflow.ErrNoRunKey) {
		t.Fatalf("DeriveRunKey without a template = %v", err)
	}
	if _, err := b.client.DeriveRunKey("nope", []byte(`{}`)); !errors.Is(err, onceflow.ErrWorkflowNotFound) {
		t.Fatalf("DeriveRunKey of an unknown workflow = %v", err)
	}
	if w, ok := b.client.Workflow("lead"); !ok || w.Description != "a form" || w.RunKey != "lead:{input.submission_id}" {
		t.Fatalf("Workflow(lead) = %+v, %v", w, ok)
	}
	err := b.client.Register(onceflow.Workflow{Name: "bad", RunKey: "{run.id}", Steps: []onceflow.Step{{ID: "a", Do: noop}}})
	var de *onceflow.DefinitionError
	if !errors.As(err, &de) || de.Field != "run_key" || !strings.Contains(err.Error(), "only {input.…}") {
		t.Fatalf("Register with a run key reading {run.id} = %v", err)
	}
}

// Due counts the steps due by the engine's clock and not yet claimed: a step that waits
// for another counts once that one completed, a retrying one once its retry time has come
// by the engine's clock.
func TestDue(t *testing.T) {
	b := setup(t)
	var calls atomic.Int64
	flaky := func(context.Context, *onceflow.StepContext) (any, error) {
		if calls.Add(1) <= 3 {
			return nil, errors.New("not yet")
		}
		return map[string]any{}, nil
	}
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "first", Do: flaky}, {ID: "then", Needs: []string{"first"}, Do: noop}}})
	count := func() int64 {
		t.Helper()
		n, err := b.client.Due(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 3 {
		b.start(t, "w", fmt.Sprint("k", i), map[string]any{})
	}
	if n := count(); n != 3 {
		t.Fatalf("Due = %d, want 3 (the steps that wait for another are not due)", n)
	}
	b.work(t)
	if n := count(); n != 0 {
		t.Fatalf("Due while the failed steps wait for their retry = %d, want 0", n)
	}
	b.clock.Advance(time.Hour)
	if n := count(); n != 3 {
		t.Fatalf("Due once the retry time has come = %d, want 3", n)
	}
	for b.work(t) > 0 {
	}
	if n := count(); n != 0 {
		t.Fatalf("Due once every step completed = %d, want 0", n)
	}
}
