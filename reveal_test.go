package onceflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// A correction of a masked field is in the revision's changed fields although its masked
// values look alike; Reveal shows one value after auditing who, which field and why, never
// the value, and refuses what it must not show.
func TestRevealAndMaskedCorrection(t *testing.T) {
	b := setup(t, func(c *onceflow.Config) { c.Redact = onceflow.Redaction{Secrets: []string{"sk_live_canary_42"}} })
	b.register(t, onceflow.Workflow{Name: "signup", Redact: []string{"email"}, Steps: []onceflow.Step{{ID: "mail", EffectKey: "mail:{input.id}",
		Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(errors.New("bounced"))
		}}}})
	run := b.start(t, "signup", "r1", map[string]any{"id": "1", "email": "old@example.com", "note": "key sk_live_canary_42"})
	b.work(t)
	if _, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Step: "mail", Actor: "cli:ana",
		MergePatch: []byte(`{"email": "new@example.com"}`)}); err != nil {
		t.Fatal(err)
	}
	d, err := b.client.RunGet(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Revisions) != 1 || strings.Join(d.Revisions[0].Changed, ",") != "email" ||
		strings.Contains(string(d.Revisions[0].InputAfter), "new@example.com") {
		t.Fatalf("revision %+v: want the masked e-mail listed as changed, its value masked", d.Revisions[0])
	}

	rv, err := b.client.Reveal(b.ctx, onceflow.RevealRequest{RunID: run.ID, Field: "revisions.1.before.email", Reason: "which address was wrong", Actor: "cli:ana"})
	if err != nil || string(rv.Value) != `"old@example.com"` {
		t.Fatalf("reveal: %+v, %v", rv, err)
	}
	evs := b.events(t, store.EventListParams{RunID: run.ID, Types: []store.EventType{onceflow.EventDataRevealed}})
	if len(evs) != 1 || evs[0].Actor != "cli:ana" || !strings.Contains(string(evs[0].Detail), "which address was wrong") ||
		!strings.Contains(string(evs[0].Detail), "revisions.1.before.email") || strings.Contains(string(evs[0].Detail), "old@example.com") {
		t.Fatalf("the reveal's events %+v", evs)
	}
	if rv, err := b.client.Reveal(b.ctx, onceflow.RevealRequest{RunID: run.ID, Field: "input.note", Reason: "x", Actor: "cli:ana"}); err != nil ||
		strings.Contains(string(rv.Value), "sk_live") {
		t.Fatalf("a reveal shows a configured secret: %+v %v", rv, err)
	}
	for _, tc := range []struct {
		r    onceflow.RevealRequest
		want string
	}{
		{onceflow.RevealRequest{RunID: run.ID, Field: "input.password", Reason: "x", Actor: "a"}, "never revealed"},
		{onceflow.RevealRequest{RunID: run.ID, Field: "input.phone", Reason: "x", Actor: "a"}, "there is no field phone"},
		{onceflow.RevealRequest{RunID: run.ID, Field: "steps.nope.output.x", Reason: "x", Actor: "a"}, "no step nope"},
		{onceflow.RevealRequest{RunID: run.ID, Field: "input.email", Actor: "a"}, "reason is required"},
		{onceflow.RevealRequest{RunID: run.ID, Field: "input.email", Reason: "x"}, "actor is required"},
		{onceflow.RevealRequest{RunID: 99, Field: "input.email", Reason: "x", Actor: "a"}, "not found"},
	} {
		if _, err := b.client.Reveal(b.ctx, tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Reveal(%+v) = %v, want an error saying %q", tc.r, err, tc.want)
		}
	}
	if n := len(b.events(t, store.EventListParams{RunID: run.ID, Types: []store.EventType{onceflow.EventDataRevealed}})); n != 2 {
		t.Errorf("%d reveals audited, want 2: a refused reveal records nothing", n)
	}
}
