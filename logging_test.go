package onceflow_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// What an operator must notice is logged at info or warn, not hidden at debug: a step that
// enters review, an attempt whose outcome is unknown, a retry, a reaped lease. Durations in
// those lines are text such as "2s", whatever handler the program configured.
func TestLifecycleIsLoggedAtInfoAndWarn(t *testing.T) {
	var logs syncBuffer
	b := setup(t, func(c *onceflow.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "refused", EffectKey: "refused:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(errors.New("422 invalid phone"))
		}},
		{ID: "unsure", EffectKey: "unsure:{input.id}", Retry: onceflow.RetryPolicy{Initial: 4 * time.Second, MaxAttempts: 5},
			Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return nil, onceflow.UnknownOutcomeError(errors.New("connection reset after sending"))
			}},
	}})
	b.start(t, "w", "k1", map[string]any{"id": 1})
	b.work(t)

	// A worker that vanished after claiming: its lease expires and is reaped.
	b.start(t, "w", "k2", map[string]any{"id": 2})
	res, err := b.store.StepClaim(b.ctx, store.StepClaimParams{Owner: "gone", Now: b.clock.Now(), LeaseFor: time.Second, Limit: 1, Workflows: []string{"w"},
		Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "refused:2"}, nil }})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("claim by the vanished worker: %v %v", res, err)
	}
	b.clock.Advance(2 * time.Second)
	if n, err := b.client.Reap(b.ctx); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}

	// A person's decision is information.
	if _, err := b.client.ReviewAbandon(b.ctx, onceflow.ReviewAction{RunID: 1, Step: "refused", Actor: "ops:ada", Note: "spam"}); err != nil {
		t.Fatal(err)
	}

	found := map[string]map[string]any{}
	for _, l := range records(t, &logs) {
		msg, _ := l["msg"].(string)
		switch {
		case msg == "step waits for review" && l["step"] == "refused":
			found["review"] = l
		case msg == "attempt outcome unknown; the step will be retried with the same effect key" && l["step"] == "unsure":
			found["unknown"] = l
		case msg == "lease expired without a result; the step's outcome is unknown":
			found["reaped"] = l
		case msg == "review decision applied":
			found["decision"] = l
		}
		for k, v := range l {
			if _, isNumber := v.(float64); isNumber && (k == "duration" || k == "retry_in") {
				t.Errorf("%s logged as a number of nanoseconds: %v", k, l)
			}
		}
	}
	if l := found["review"]; l == nil || l["level"] != "WARN" || l["reason"] != "permanent_error" || l["error"] != "422 invalid phone" {
		t.Errorf("review line = %v\n%s", l, logs.String())
	}
	if l := found["unknown"]; l == nil || l["level"] != "WARN" || l["retry_in"] != "2s" || l["effect_key"] != "unsure:1" {
		t.Errorf("unknown-outcome line = %v\n%s", l, logs.String())
	}
	if l := found["reaped"]; l == nil || l["level"] != "WARN" || l["effect_key"] != "refused:2" || l["lease_owner"] != "gone" {
		t.Errorf("reaped line = %v\n%s", l, logs.String())
	}
	if l := found["decision"]; l == nil || l["level"] != "INFO" || l["action"] != "abandon" || l["actor"] != "ops:ada" || l["step_state"] != "failed" {
		t.Errorf("review decision line = %v\n%s", l, logs.String())
	}
	if l := found["review"]; l != nil {
		if _, err := time.ParseDuration(l["duration"].(string)); err != nil {
			t.Errorf("duration %v is not duration text: %v", l["duration"], err)
		}
	}
}

// DurationText turns durations into text, inside groups too, and leaves the rest alone.
func TestDurationText(t *testing.T) {
	for _, tc := range []struct {
		in   slog.Attr
		want string
	}{
		{slog.Duration("d", 1234567891*time.Nanosecond), "d=1.235s"},
		{slog.Duration("d", 36*time.Hour), "d=36h0m0s"},
		{slog.Duration("d", 850*time.Microsecond), "d=850µs"},
		{slog.Group("g", slog.Duration("d", 90*time.Second), slog.Int("n", 3)), "g=[d=1m30s n=3]"},
		{slog.Int("n", 3), "n=3"},
	} {
		if got := onceflow.DurationText(tc.in).String(); got != tc.want {
			t.Errorf("DurationText(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
