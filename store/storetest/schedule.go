package storetest

import (
	"errors"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

var scheduleTests = []subtest{
	{"AdvanceCompareAndSet", testScheduleAdvance},
	{"ConcurrentAdvanceOnce", testScheduleConcurrentAdvance},
	{"InvalidParams", testScheduleInvalid},
}

var delayTests = []subtest{
	{"WaitUntilPostponesDurably", testDelayWaitUntil},
	{"DelayedDependentAfterRelease", testDelayDependent},
}

// A schedule's state is created by its first advance and then moves only from the Through
// the caller read; the events of an advance are written with it, and only if it applied.
func testScheduleAdvance(h *harness) {
	if _, err := h.s.ScheduleGet(h.ctx, "nightly"); !errors.Is(err, store.ErrNotFound) {
		h.t.Fatalf("ScheduleGet before any advance: err = %v, want ErrNotFound", err)
	}
	adv := func(p store.ScheduleAdvanceParams) bool {
		h.t.Helper()
		ok, err := h.s.ScheduleAdvance(h.ctx, p)
		if err != nil {
			h.t.Fatalf("ScheduleAdvance: %v", err)
		}
		return ok
	}
	t1, t2, t3 := at(time.Hour), at(2*time.Hour), at(3*time.Hour)
	wantEqual(h.t, "first advance", adv(store.ScheduleAdvanceParams{Name: "nightly", To: t1, Now: t1}), true)
	wantEqual(h.t, "a second first advance", adv(store.ScheduleAdvanceParams{Name: "nightly", To: t2, Now: t2}), false)
	ev := &store.Event{At: t2, Type: store.EventScheduleTickLate, RunID: 7, Workflow: "wf", Entity: "schedule:nightly",
		Actor: store.ActorScheduler, Reason: store.ReasonCatchUpAll, Detail: store.EncodeDetail(map[string]any{"tick": t2})}
	wantEqual(h.t, "advance from t1", adv(store.ScheduleAdvanceParams{Name: "nightly", From: t1, To: t2, LastTick: t2, LastRunID: 7,
		Now: t2, Events: []*store.Event{ev}}), true)
	lost := &store.Event{At: t3, Type: store.EventScheduleTickSkipped, Workflow: "wf", Actor: store.ActorScheduler}
	wantEqual(h.t, "stale advance from t1", adv(store.ScheduleAdvanceParams{Name: "nightly", From: t1, To: t3, Now: t3,
		Events: []*store.Event{lost}}), false)
	// An advance that fires nothing keeps the last tick fired.
	wantEqual(h.t, "advance to t3", adv(store.ScheduleAdvanceParams{Name: "nightly", From: t2, To: t3, Now: t3}), true)
	got, err := h.s.ScheduleGet(h.ctx, "nightly")
	if err != nil {
		h.t.Fatal(err)
	}
	h.wantTime("through", got.Through, t3)
	h.wantTime("last tick", got.LastTick, t2)
	wantEqual(h.t, "last run", got.LastRunID, int64(7))
	all, err := h.s.ScheduleList(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "schedules listed", len(all), 1)
	evs := h.events(store.EventListParams{Entity: "schedule:nightly"})
	h.wantTypes("schedule events", evs, store.EventScheduleTickLate)
	wantEqual(h.t, "event run", evs[0].RunID, int64(7))
	if len(ofType(h.events(store.EventListParams{}), store.EventScheduleTickSkipped)) != 0 {
		h.t.Fatal("the events of an advance that did not apply were written")
	}
}

// Of many processes advancing a schedule from the same state, exactly one succeeds.
func testScheduleConcurrentAdvance(h *harness) {
	t1 := at(time.Hour)
	if ok, err := h.s.ScheduleAdvance(h.ctx, store.ScheduleAdvanceParams{Name: "s", To: t1, Now: t1}); err != nil || !ok {
		h.t.Fatalf("first advance: %v %v", ok, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Go(func() {
			ok, err := h.s.ScheduleAdvance(h.ctx, store.ScheduleAdvanceParams{Name: "s", From: t1, To: at(2 * time.Hour), LastTick: at(2 * time.Hour),
				LastRunID: int64(i + 1), Now: at(2 * time.Hour)})
			if err != nil {
				h.t.Errorf("advance %d: %v", i, err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wantEqual(h.t, "advances applied", won, 1)
}

func testScheduleInvalid(h *harness) {
	for _, p := range []store.ScheduleAdvanceParams{
		{To: at(time.Hour)},
		{Name: "s"},
		{Name: "s", From: at(time.Hour), To: at(time.Hour)},
	} {
		if _, err := h.s.ScheduleAdvance(h.ctx, p); err == nil {
			h.t.Errorf("ScheduleAdvance(%+v): no error", p)
		}
	}
}

// A step whose spec says WaitUntil stays pending, due then, with reason delayed and one
// step.delayed event however often it is offered before; it is not handed out before its
// due time, and is claimed once it has come.
func testDelayWaitUntil(h *harness) {
	run := h.run("r1", step("a"))
	due := at(time.Hour)
	offered := 0
	prepare := func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		offered++
		return store.EffectSpec{Key: "k-a", WaitUntil: due}, nil
	}
	res := h.claim(store.StepClaimParams{Owner: "w1", Now: base, LeaseFor: time.Minute, Limit: 10, Prepare: prepare})
	wantEqual(h.t, "waiting", res.Waiting, 1)
	wantEqual(h.t, "claimed", len(res.Claimed), 0)
	a := h.wantStep(run.ID, "a", store.StatePending, 0, store.ReasonDelayed)
	h.wantTime("due", a.NextAt, due)
	h.wantNoEffect("k-a")
	h.wantRunState(run.ID, store.StatePending)
	d := h.detailOf(h.only(h.stepEvents(a), store.EventStepDelayed))
	if d["due_at"] == nil {
		h.t.Fatalf("step.delayed detail %v has no due_at", d)
	}
	// Not offered before it is due.
	res = h.claim(store.StepClaimParams{Owner: "w1", Now: at(59 * time.Minute), LeaseFor: time.Minute, Limit: 10, Prepare: prepare})
	wantEqual(h.t, "offered before due", offered, 1)
	wantEqual(h.t, "claimed before due", len(res.Claimed), 0)
	res = h.claim(store.StepClaimParams{Owner: "w1", Now: due, LeaseFor: time.Minute, Limit: 10, Prepare: prepare})
	wantEqual(h.t, "claimed at due", len(res.Claimed), 1)
	h.wantStep(run.ID, "a", store.StateProcessing, 1, "")
	wantEqual(h.t, "delayed events", len(ofType(h.stepEvents(a), store.EventStepDelayed)), 1)
}

// A dependent released by a record is offered at once; a Prepare that delays it from its
// release time (NextAt) postpones it, and a second offer at the due time claims it.
func testDelayDependent(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"))
	cs := h.claimOne(base, "w1")
	released := at(10 * time.Second)
	h.mustRecord(succeed(cs, released, `{}`))
	b := h.wantStep(run.ID, "b", store.StatePending, 0, "")
	h.wantTime("released dependent's next_at", b.NextAt, released)
	prepare := func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		spec := store.EffectSpec{Key: "k-" + c.Step.Name}
		if c.Step.Reason != store.ReasonDelayed {
			spec.WaitUntil = c.Step.NextAt.Add(24 * time.Hour)
		}
		return spec, nil
	}
	res := h.claim(store.StepClaimParams{Owner: "w1", Now: at(time.Minute), LeaseFor: time.Minute, Limit: 10, Prepare: prepare})
	wantEqual(h.t, "waiting", res.Waiting, 1)
	b = h.wantStep(run.ID, "b", store.StatePending, 0, store.ReasonDelayed)
	h.wantTime("due", b.NextAt, released.Add(24*time.Hour))
	// Nothing to do but wait: the run is pending again, and says so in its trail.
	h.wantRunState(run.ID, store.StatePending)
	evs := ofType(h.runEvents(run.ID), store.EventRunStateChanged)
	if d := h.detailOf(h.last("run.state_changed events", evs, 1)[0]); d["from"] != string(store.StateProcessing) || d["to"] != string(store.StatePending) {
		h.t.Fatalf("last run.state_changed %v, want processing → pending", d)
	}
	res = h.claim(store.StepClaimParams{Owner: "w1", Now: released.Add(24*time.Hour - time.Second), LeaseFor: time.Minute, Limit: 10, Prepare: prepare})
	wantEqual(h.t, "claimed early", len(res.Claimed), 0)
	res = h.claim(store.StepClaimParams{Owner: "w1", Now: released.Add(24 * time.Hour), LeaseFor: time.Minute, Limit: 10, Prepare: prepare})
	wantEqual(h.t, "claimed at due", len(res.Claimed), 1)
	h.wantRunState(run.ID, store.StateProcessing)
}
