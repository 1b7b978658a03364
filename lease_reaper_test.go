package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// The lease reaper's decisions, on both backends: a step whose worker vanished is retried
// with the same key only when the destination deduplicates and attempts are left. A step
// whose destination cannot deduplicate (on_unknown: needs_review) goes to review instead
// of being sent again blind, and so does a step whose attempts are used up; neither is
// acted on again by any worker.
func TestReaperDecisions(t *testing.T) {
	cases := []struct {
		name        string
		onUnknown   onceflow.UnknownAction
		maxAttempts int
		failFirst   int // attempts that fail (retryable) before the vanished worker claims
		want        store.State
		wantReason  store.Reason
		exhausted   bool
		calls       int // step function calls after the reap, when a worker works
	}{
		{"retried with the same key", onceflow.RetrySameKey, 3, 0, store.StateRetrying, store.ReasonLeaseExpired, false, 1},
		{"review when the destination cannot deduplicate", onceflow.ReviewUnknown, 3, 0, store.StateNeedsReview, store.ReasonOutcomeUnknown, false, 0},
		{"review when the only attempt is used up", onceflow.RetrySameKey, 1, 0, store.StateNeedsReview, store.ReasonOutcomeUnknown, true, 0},
		{"review when the last attempt is used up", onceflow.RetrySameKey, 2, 1, store.StateNeedsReview, store.ReasonOutcomeUnknown, true, 0},
	}
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					ctx := context.Background()
					st := be.open(t)
					clk := newClock()
					c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "survivor", Clock: clk.Now, ClockSync: -1, Rand: func() float64 { return 0.5 }})
					if err != nil {
						t.Fatal(err)
					}
					var calls atomic.Int64
					if err := c.Register(onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{
						ID: "send", EffectKey: "send:{input.id}", OnUnknown: tc.onUnknown,
						Retry: onceflow.RetryPolicy{MaxAttempts: tc.maxAttempts, Initial: time.Second},
						Do: func(context.Context, *onceflow.StepContext) (any, error) {
							if calls.Add(1) <= int64(tc.failFirst) {
								return nil, errors.New("busy")
							}
							return map[string]any{"ok": true}, nil
						},
					}}}); err != nil {
						t.Fatal(err)
					}
					run, err := c.Start(ctx, "w", "k", map[string]any{"id": 1})
					if err != nil {
						t.Fatal(err)
					}
					for range tc.failFirst {
						if _, err := c.Work(ctx); err != nil {
							t.Fatal(err)
						}
						clk.Advance(time.Minute)
					}
					calls.Store(0)

					// A worker claims the step and vanishes.
					res, err := st.StepClaim(ctx, store.StepClaimParams{Owner: "gone", Now: clk.Now(), LeaseFor: time.Second, Limit: 1,
						Workflows: []string{"w"},
						Prepare:   func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "send:1"}, nil }})
					if err != nil || len(res.Claimed) != 1 || res.Claimed[0].Step.Attempt != tc.failFirst+1 {
						t.Fatalf("claim by the vanished worker: %+v, %v; want attempt %d", res, err, tc.failFirst+1)
					}
					clk.Advance(2 * time.Second)
					if n, err := c.Reap(ctx); err != nil || n != 1 {
						t.Fatalf("Reap = %d, %v; want 1", n, err)
					}

					steps, err := st.StepListByRun(ctx, run.ID)
					if err != nil || len(steps) != 1 {
						t.Fatalf("steps %v, %v", steps, err)
					}
					s := steps[0]
					if s.State != tc.want || s.Reason != tc.wantReason {
						t.Fatalf("after the reap: step %s (%s), want %s (%s)", s.State, s.Reason, tc.want, tc.wantReason)
					}
					evs, err := st.EventList(ctx, store.EventListParams{RunID: run.ID})
					if err != nil {
						t.Fatal(err)
					}
					var decided *store.Event
					for _, e := range evs {
						if e.Actor == store.ActorReaper && e.StepName == "send" && e.Type != store.EventLeaseExpired {
							decided = e
						}
					}
					if decided == nil {
						t.Fatalf("no reaper decision among the events %v", eventTypes(evs, ""))
					}
					var detail map[string]any
					if err := json.Unmarshal(decided.Detail, &detail); err != nil {
						t.Fatal(err)
					}
					if got := detail["attempts_exhausted"] == true; got != tc.exhausted {
						t.Errorf("reaper decision %s detail %v: attempts_exhausted %v, want %v", decided.Type, detail, got, tc.exhausted)
					}

					// Only a step left to retry is acted on again, with its key.
					clk.Advance(time.Hour)
					if _, err := c.Work(ctx); err != nil {
						t.Fatal(err)
					}
					if got := calls.Load(); got != int64(tc.calls) {
						t.Fatalf("step function called %d times after the reap, want %d", got, tc.calls)
					}
				})
			}
		})
	}
}

// The reaper reaps by exactly the engine's time, on both backends: a live lease (claimed
// by another process at T for 30 s, its step still running there) is not reaped at T+20s,
// so no second worker runs the step at the same time; at T+30s, its expiry, it is not
// expired yet; a microsecond later it is, and the attempt's late success completes the
// step from the ledger.
func TestReapDecidesByTheEnginesTime(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := be.open(t)
			clk := newClock()
			t0 := clk.Now()
			var calls atomic.Int64
			running, release := make(chan struct{}), make(chan struct{})
			w := onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "send", EffectKey: "send:{input.id}",
				Do: func(ctx context.Context, _ *onceflow.StepContext) (any, error) {
					if calls.Add(1) == 1 {
						close(running)
						<-release
					}
					return map[string]any{"ok": true}, nil
				}}}}
			var clients []*onceflow.Client
			for _, id := range []string{"reaper", "worker"} {
				c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: id, Clock: clk.Now, ClockSync: -1, LeaseFor: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Register(w); err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
			}
			reaper, worker := clients[0], clients[1]
			run, err := worker.Start(ctx, "w", "k", map[string]any{"id": 1})
			if err != nil {
				t.Fatal(err)
			}
			worked := make(chan error, 1)
			go func() { _, err := worker.Work(ctx); worked <- err }()
			<-running

			clk.Set(t0.Add(20 * time.Second))
			if n, err := reaper.Reap(ctx); err != nil || n != 0 {
				t.Fatalf("Reap 20s into a 30s lease = %d, %v; want 0", n, err)
			}
			if n, err := reaper.Work(ctx); err != nil || n != 0 || calls.Load() != 1 {
				t.Fatalf("another worker executed %d steps (%v) while the step ran (%d calls); want none", n, err, calls.Load())
			}
			clk.Set(t0.Add(30 * time.Second))
			if n, err := reaper.Reap(ctx); err != nil || n != 0 {
				t.Fatalf("Reap at the lease's expiry = %d, %v; want 0 (a lease expires after its time)", n, err)
			}
			clk.Set(t0.Add(30*time.Second + time.Microsecond))
			if n, err := reaper.Reap(ctx); err != nil || n != 1 {
				t.Fatalf("Reap a microsecond after the lease's expiry = %d, %v; want 1", n, err)
			}
			close(release)
			if err := <-worked; err != nil {
				t.Fatal(err)
			}
			// The attempt's late success was kept in the ledger: the step completes from it.
			steps, err := st.StepListByRun(ctx, run.ID)
			if err != nil || len(steps) != 1 || steps[0].State != store.StateCompleted || calls.Load() != 1 {
				t.Fatalf("after the reap: %+v, %v, %d calls; want the step completed, called once", steps, err, calls.Load())
			}
		})
	}
}
