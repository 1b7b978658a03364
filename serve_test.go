package onceflow_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// realTime makes a bundle run on the wall clock with short intervals.
func realTime(c *onceflow.Config) {
	c.Clock = nil
	c.PollInterval = 20 * time.Millisecond
	c.ReapInterval = 50 * time.Millisecond
	c.Workers = 4
}

// serve runs Serve in the background and returns a function that stops it and waits.
func serve(t *testing.T, c *onceflow.Client) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds, failing the test after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Serve executes independent steps at the same time: in each run of a diamond DAG, b and
// c wait for each other, so every run completes only if the two are in flight together,
// and runs overlap up to the worker pool's size.
func TestServeRunsDAGsConcurrently(t *testing.T) {
	b := setup(t, realTime)
	const runs = 30
	var (
		executed, inFlight, peak atomic.Int64
		mu                       sync.Mutex
		arrived                  = map[string]chan struct{}{} // run key + step → closed on arrival
		alone                    atomic.Int64                 // b or c that waited for its sibling in vain
	)
	arrive := func(key string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if arrived[key] == nil {
			arrived[key] = make(chan struct{})
		}
		return arrived[key]
	}
	track := func() func() {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return func() { inFlight.Add(-1) }
	}
	count := func(context.Context, *onceflow.StepContext) (any, error) {
		defer track()()
		executed.Add(1)
		return nil, nil
	}
	// sibling waits, in step me, until step other of the same run has started too.
	sibling := func(me, other string) onceflow.StepFunc {
		return func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			defer track()()
			executed.Add(1)
			if ch := arrive(sc.RunKey + "/" + me); !isClosed(ch) {
				close(ch)
			}
			if alone.Load() > 0 {
				return nil, nil // already failed; do not hold every run up
			}
			select {
			case <-arrive(sc.RunKey + "/" + other):
			case <-time.After(10 * time.Second):
				alone.Add(1)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, nil
		}
	}
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "a", Do: count},
		{ID: "b", Needs: []string{"a"}, Do: sibling("b", "c")},
		{ID: "c", Needs: []string{"a"}, Do: sibling("c", "b")},
		{ID: "d", Needs: []string{"b", "c"}, Do: count},
	}})
	stop := serve(t, b.client)
	for i := range runs {
		b.start(t, "w", fmt.Sprintf("run-%d", i), nil)
	}
	waitFor(t, "every run to complete", func() bool {
		done, err := b.store.RunList(b.ctx, store.RunListParams{State: store.StateCompleted, Limit: runs})
		return err == nil && len(done) == runs
	})
	stop()
	if n := alone.Load(); n > 0 {
		t.Fatalf("%d of b and c ran without their sibling in flight: independent steps are not executed concurrently", n)
	}
	if got := executed.Load(); got != runs*4 {
		t.Fatalf("executed %d steps, want %d", got, runs*4)
	}
	if p := peak.Load(); p < 2 || p > 4 {
		t.Fatalf("at most %d steps in flight at once, want between 2 and the 4 workers", p)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// On shutdown a step that does not finish within the grace period is interrupted and
// released for another worker, with the same effect key.
func TestShutdownReleasesInterruptedStep(t *testing.T) {
	b := setup(t, realTime, func(c *onceflow.Config) { c.ShutdownGrace = 20 * time.Millisecond })
	started := make(chan struct{})
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "slow", Do: func(ctx context.Context, _ *onceflow.StepContext) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}}})
	run := b.start(t, "w", "k", nil)
	stop := serve(t, b.client)
	waitStarted(t, "slow", started, nil)
	stop()
	st := b.steps(t, run.ID)["slow"]
	if st.State != store.StateRetrying || st.Reason != store.ReasonWorkerShutdown || st.LastOutcome != store.OutcomeUnknown {
		t.Fatalf("interrupted step: %s %s %s", st.State, st.Reason, st.LastOutcome)
	}
	if eff, err := b.store.EffectGetByKey(b.ctx, st.EffectKey); err != nil || eff.StepID != st.ID {
		t.Fatalf("the key must stay with the step: %+v %v", eff, err)
	}
}

// A step that finishes within the grace period is recorded normally.
func TestShutdownLetsRunningStepFinish(t *testing.T) {
	b := setup(t, realTime)
	started, release := make(chan struct{}), make(chan struct{})
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: func(ctx context.Context, _ *onceflow.StepContext) (any, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done(): // interrupted after the grace period: the test failed
			return nil, ctx.Err()
		}
		return "done", nil
	}}}})
	run := b.start(t, "w", "k", nil)
	stop := serve(t, b.client)
	waitStarted(t, "s", started, nil)
	go func() { close(release) }()
	stop()
	if st := b.steps(t, run.ID)["s"]; st.State != store.StateCompleted || string(st.Output) != `"done"` {
		t.Fatalf("step %s %s, want completed", st.State, st.Output)
	}
}

// Heartbeats keep a long step's lease alive: it is not reaped and runs once.
func TestHeartbeatKeepsLease(t *testing.T) {
	b := setup(t, realTime, func(c *onceflow.Config) {
		c.LeaseFor = 200 * time.Millisecond
		c.HeartbeatEvery = 20 * time.Millisecond
		c.ReapInterval = 10 * time.Millisecond
	})
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: func(ctx context.Context, _ *onceflow.StepContext) (any, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		select {
		case <-release:
		case <-ctx.Done(): // interrupted after the grace period: the test failed
			return nil, ctx.Err()
		}
		return nil, nil
	}}}})
	run := b.start(t, "w", "k", nil)
	stop := serve(t, b.client)
	waitStarted(t, "s", started, nil)
	first := b.steps(t, run.ID)["s"].LeaseExpiresAt
	// Wait until the lease has been pushed past its original expiry and that moment has
	// passed: without heartbeats the reaper would have taken the step by then.
	waitFor(t, "the lease to be extended past its first expiry", func() bool {
		return time.Now().After(first.Add(50*time.Millisecond)) && b.steps(t, run.ID)["s"].LeaseExpiresAt.After(first)
	})
	close(release)
	waitFor(t, "the step to complete", func() bool { return b.steps(t, run.ID)["s"].State == store.StateCompleted })
	stop()
	if calls.Load() != 1 {
		t.Fatalf("step ran %d times, want once", calls.Load())
	}
	for _, e := range b.events(t, store.EventListParams{RunID: run.ID}) {
		if e.Type == store.EventLeaseExpired {
			t.Fatal("the lease expired although heartbeats were sent")
		}
	}
}
