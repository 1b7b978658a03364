package storetest

import (
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/onceflow/onceflow/store"
)

var leaseTests = []subtest{
	{"Heartbeat", testHeartbeat},
	{"Checkpoint", testCheckpoint},
	{"RecordCompareAndSet", testRecordLeaseLost},
	{"LostSuccessKeptWhileHeld", testLostSuccessKeptWhileHeld},
	{"LostSuccessKeptAfterReap", testLostSuccessKeptAfterReap},
	{"LostSuccessLeavesAnotherHoldersKey", testLostSuccessLeavesAnotherHoldersKey},
	{"RecordBatchMixed", testRecordBatchMixed},
	{"ReapExpired", testReapExpired},
	{"ReapLimit", testReapLimit},
}

func testHeartbeat(h *harness) {
	r1, r2, r3 := h.run("r1", step("a")), h.run("r2", step("a")), h.run("r3", step("a"))
	h.claim(store.StepClaimParams{Owner: "w1", Limit: 2})
	h.claim(store.StepClaimParams{Owner: "w2", Limit: 2})
	s1, s2, s3 := h.step(r1.ID, "a"), h.step(r2.ID, "a"), h.step(r3.ID, "a")
	wantEqual(h.t, "owner of r3's step", s3.LeaseOwner, "w2")

	const unknown = int64(1 << 40)
	lost, err := h.s.StepHeartbeat(h.ctx, store.StepHeartbeatParams{Owner: "w1", Now: at(10 * time.Second), LeaseFor: time.Minute,
		StepIDs: []int64{s1.ID, s2.ID, s3.ID, unknown}})
	if err != nil {
		h.t.Fatalf("StepHeartbeat: %v", err)
	}
	slices.Sort(lost)
	if want := []int64{s3.ID, unknown}; !slices.Equal(lost, want) {
		h.t.Errorf("StepHeartbeat lost = %v, want %v", lost, want)
	}
	for _, s := range []*store.Step{s1, s2} {
		h.wantTime("extended lease", h.step(s.RunID, "a").LeaseExpiresAt, at(70*time.Second))
	}
	if got := h.step(r3.ID, "a"); got.LeaseOwner != "w2" || !got.LeaseExpiresAt.Equal(s3.LeaseExpiresAt) {
		h.t.Errorf("w2's step after w1's heartbeat: owner %q lease %s, want w2 and %s unchanged", got.LeaseOwner, got.LeaseExpiresAt, s3.LeaseExpiresAt)
	}

	// The extended leases outlive the reaper; w2's does not.
	n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(45 * time.Second), Decide: retryAt(at(time.Minute))})
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "reaped", n, 1)
	h.wantStep(r3.ID, "a", store.StateRetrying, 1, store.ReasonLeaseExpired)

	// A step that is no longer processing is lost too.
	h.mustRecord(store.StepRecordParams{StepID: s1.ID, Owner: "w1", Attempt: 1, Now: at(50 * time.Second),
		Outcome: store.OutcomeSuccess, Output: []byte(`{}`), NextState: store.StateCompleted})
	lost, err = h.s.StepHeartbeat(h.ctx, store.StepHeartbeatParams{Owner: "w1", Now: at(50 * time.Second), LeaseFor: time.Minute,
		StepIDs: []int64{s1.ID, s2.ID}})
	if err != nil {
		h.t.Fatal(err)
	}
	if !slices.Equal(lost, []int64{s1.ID}) {
		h.t.Errorf("StepHeartbeat after s1 completed: lost = %v, want [%d]", lost, s1.ID)
	}
	h.wantTime("lease extended again", h.step(r2.ID, "a").LeaseExpiresAt, at(110*time.Second))

	lost, err = h.s.StepHeartbeat(h.ctx, store.StepHeartbeatParams{Owner: "w1", Now: at(50 * time.Second), LeaseFor: time.Minute})
	if err != nil || len(lost) != 0 {
		h.t.Errorf("StepHeartbeat without steps = %v, %v; want nothing", lost, err)
	}
}

// A checkpoint is kept only while the attempt holds its step, and the attempts after it
// see it: after a retry, after the reaper took the step from a dead worker, and in the
// candidates of a claim.
func testCheckpoint(h *harness) {
	cp, ok := h.s.(store.StepCheckpointer)
	if !ok {
		h.t.Skip("the store keeps no checkpoints")
	}
	r := h.run("r1", step("a"))
	c := h.claimOne(at(0), "w1")
	s := c.Step
	if s.Progress != nil {
		h.t.Fatalf("progress before any checkpoint: %s", s.Progress)
	}
	save := func(owner string, attempt int, progress string) error {
		return cp.StepCheckpoint(h.ctx, store.StepCheckpointParams{StepID: s.ID, Owner: owner, Attempt: attempt, Now: at(time.Second),
			Progress: []byte(progress)})
	}
	if err := save("w1", 1, `{"cursor": "p2", "items": 50}`); err != nil {
		h.t.Fatalf("StepCheckpoint: %v", err)
	}
	if err := save("w1", 1, `{"cursor": "p3", "items": 100}`); err != nil {
		h.t.Fatalf("StepCheckpoint again: %v", err)
	}
	h.wantJSON("progress", h.step(r.ID, "a").Progress, `{"cursor": "p3", "items": 100}`)
	for _, bad := range []struct {
		owner   string
		attempt int
	}{{"w2", 1}, {"w1", 2}} {
		if err := save(bad.owner, bad.attempt, `{"cursor": "x"}`); !errors.Is(err, store.ErrLeaseLost) {
			h.t.Errorf("checkpoint by %s attempt %d: %v, want ErrLeaseLost", bad.owner, bad.attempt, err)
		}
	}
	if err := save("w1", 1, `{"cursor": `); err == nil || errors.Is(err, store.ErrLeaseLost) {
		h.t.Errorf("a checkpoint that is not JSON: %v, want an error", err)
	}
	h.wantJSON("progress after refused checkpoints", h.step(r.ID, "a").Progress, `{"cursor": "p3", "items": 100}`)

	// The worker dies: the reaper retries the step, and the next attempt starts from the
	// checkpoint, which the dead worker can no longer change.
	if _, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(10 * time.Minute), Decide: retryAt(at(10 * time.Minute))}); err != nil {
		h.t.Fatal(err)
	}
	if err := save("w1", 1, `{"cursor": "late"}`); !errors.Is(err, store.ErrLeaseLost) {
		h.t.Errorf("checkpoint after the reap: %v, want ErrLeaseLost", err)
	}
	next := h.claimOne(at(11*time.Minute), "w2")
	if next.Step.ID != s.ID || next.Step.Attempt != 2 {
		h.t.Fatalf("claimed step %d attempt %d, want step %d attempt 2", next.Step.ID, next.Step.Attempt, s.ID)
	}
	h.wantJSON("progress of the next attempt", next.Step.Progress, `{"cursor": "p3", "items": 100}`)
}

// retryAt is a reap decision: retry at next.
func retryAt(next time.Time) func(*store.Step) store.ReapDecision {
	return func(*store.Step) store.ReapDecision {
		return store.ReapDecision{State: store.StateRetrying, NextAt: next, Reason: store.ReasonLeaseExpired}
	}
}

func testRecordLeaseLost(h *harness) {
	cases := []struct {
		name string
		// stale returns the record that must be refused, given the claimed step; it may
		// change the step first.
		stale func(h *harness, c *store.ClaimedStep) store.StepRecordParams
	}{
		{"WrongOwner", func(h *harness, c *store.ClaimedStep) store.StepRecordParams {
			p := retry(c, at(time.Second), at(time.Minute))
			p.Owner = "intruder"
			return p
		}},
		{"WrongAttempt", func(h *harness, c *store.ClaimedStep) store.StepRecordParams {
			p := retry(c, at(time.Second), at(time.Minute))
			p.Attempt = 2
			return p
		}},
		{"StaleAttemptSameOwner", func(h *harness, c *store.ClaimedStep) store.StepRecordParams {
			n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(45 * time.Second), Decide: retryAt(at(time.Minute))})
			if err != nil || n != 1 {
				h.t.Fatalf("StepReapExpired = %d, %v; want 1", n, err)
			}
			if c2 := h.claimOne(at(time.Minute), c.Step.LeaseOwner); c2.Step.Attempt != 2 {
				h.t.Fatalf("re-claim: attempt %d, want 2", c2.Step.Attempt)
			}
			return retry(c, at(61*time.Second), at(2*time.Minute))
		}},
		{"AlreadyRecorded", func(h *harness, c *store.ClaimedStep) store.StepRecordParams {
			h.mustRecord(succeed(c, at(time.Second), `"first"`))
			return succeed(c, at(2*time.Second), `"second"`)
		}},
	}
	for _, tc := range cases {
		h.sub(tc.name, func(h *harness) {
			run := h.run("r", step("a"))
			c := h.claimOne(base, "w1")
			p := tc.stale(h, c)
			before, attsBefore := h.step(run.ID, "a"), h.attempts(run.ID)
			effBefore := h.effect(keyOf(run, "a"))
			h.wantLeaseLost(p)

			if after := h.step(run.ID, "a"); !reflect.DeepEqual(after, before) {
				h.t.Errorf("step changed by a refused record:\n got %+v\nwant %+v", after, before)
			}
			// Only the caller's own attempt row may be closed; nobody else's.
			atts := h.attempts(run.ID)
			if len(atts) != len(attsBefore) {
				h.t.Fatalf("attempts = %d after a refused record, want %d", len(atts), len(attsBefore))
			}
			for i, a := range atts {
				if (a.Number != p.Attempt || a.Worker != p.Owner) && !reflect.DeepEqual(a, attsBefore[i]) {
					h.t.Errorf("attempt %d of %s changed by a refused record of %s attempt %d:\n got %+v\nwant %+v",
						a.Number, a.Worker, p.Owner, p.Attempt, a, attsBefore[i])
				}
			}
			if eff := h.effect(keyOf(run, "a")); !reflect.DeepEqual(eff, effBefore) {
				h.t.Errorf("effect changed by a refused record:\n got %+v\nwant %+v", eff, effBefore)
			}
			evs := h.stepEvents(before)
			last := h.last("step a", evs, 1)[0]
			wantEqual(h.t, "last event", last.Type, store.EventLeaseLost)
			h.wantStepEvent(last, run, before, keyOf(run, "a"), p.Attempt)
			if len(ofType(evs, store.EventLeaseLostRecorded)) != 0 {
				h.t.Errorf("events %q: lease.lost_result_kept without a result to keep", types(evs))
			}
		})
	}
}

func testLostSuccessKeptWhileHeld(h *harness) {
	run := h.run("r", step("a"), step("b", "a"))
	c := h.claimOne(base, "w1")
	key := keyOf(run, "a")
	p := succeed(c, at(time.Second), `{"kept": true}`)
	p.Owner = "w0"
	h.wantLeaseLost(p)

	a := h.wantStep(run.ID, "a", store.StateProcessing, 1, "")
	wantEqual(h.t, "lease owner", a.LeaseOwner, "w1")
	e := h.wantEffect(key, store.EffectCompleted, a)
	h.wantJSON("kept result", e.Result, `{"kept": true}`)
	evs := h.stepEvents(a)
	h.wantTypes("step a", evs, store.EventStepClaimed, store.EventLeaseLost, store.EventLeaseLostRecorded)

	// The lease holder gives up for now; the next claim completes the step from the ledger.
	h.mustRecord(retry(c, at(2*time.Second), at(time.Minute)))
	h.wantEffect(key, store.EffectCompleted, a)
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Minute)}), 1, 0, 0)
	a = h.step(run.ID, "a")
	wantEqual(h.t, "state", a.State, store.StateCompleted)
	h.wantJSON("output from the ledger", a.Output, `{"kept": true}`)
	wantEqual(h.t, "attempts", len(h.attempts(run.ID)), 1)
	evs = h.stepEvents(a)
	h.wantTypes("step a", h.last("step a", evs, 2), store.EventEffectReused, store.EventStepCompleted)
	if b := h.step(run.ID, "b"); b.Waiting != 0 {
		h.t.Errorf("b waiting = %d after a completed from the ledger, want 0", b.Waiting)
	}
}

func testLostSuccessKeptAfterReap(h *harness) {
	run := h.run("r", step("a"))
	key := keyOf(run, "a")
	c := h.claimOne(base, "w1")
	n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(45 * time.Second), Decide: retryAt(at(time.Minute))})
	if err != nil || n != 1 {
		h.t.Fatalf("StepReapExpired = %d, %v; want 1", n, err)
	}
	// The worker was slow, not dead: its success arrives after the reaper.
	h.wantLeaseLost(succeed(c, at(50*time.Second), `{"late": true}`))
	a := h.wantStep(run.ID, "a", store.StateRetrying, 1, store.ReasonLeaseExpired)
	e := h.wantEffect(key, store.EffectCompleted, a)
	h.wantJSON("kept result", e.Result, `{"late": true}`)
	if atts := h.attempts(run.ID); len(atts) != 1 || atts[0].Outcome != store.OutcomeSuccess {
		h.t.Errorf("attempts = %+v, want attempt 1 closed with what really happened (success)", atts)
	}
	lost := h.only(h.stepEvents(a), store.EventLeaseLostRecorded)
	h.wantStepEvent(lost, run, a, key, 1)

	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Minute)}), 1, 0, 0)
	a = h.step(run.ID, "a")
	wantEqual(h.t, "state", a.State, store.StateCompleted)
	h.wantJSON("output from the ledger", a.Output, `{"late": true}`)
	wantEqual(h.t, "attempts", len(h.attempts(run.ID)), 1)
	h.wantTypes("step a", h.stepEvents(a), store.EventStepClaimed, store.EventLeaseExpired, store.EventStepRetryPlanned,
		store.EventLeaseLost, store.EventLeaseLostRecorded, store.EventEffectReused, store.EventStepCompleted)
	h.wantRunState(run.ID, store.StateCompleted)
}

// A worker that lost its lease reports a success after its step's key passed to another
// step: the reaper retried the step, the retry was refused by the destination (the key is
// free again) and another run's step took the key. The late success is the first
// worker's; it must not complete the row another step holds, and a later step reusing
// the key gets the holder's result.
func testLostSuccessLeavesAnotherHoldersKey(h *harness) {
	const key = "charge:order-1001"
	keys := map[string]string{"a": key}
	runA := h.runWithKeys("rA", base, keys, step("a"))
	slow := h.claimOne(base, "w1")
	if slow.Step.RunID != runA.ID {
		h.t.Fatalf("claimed run %d's step, want run A's (%d)", slow.Step.RunID, runA.ID)
	}
	if n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(45 * time.Second), Decide: retryAt(at(time.Minute))}); err != nil || n != 1 {
		h.t.Fatalf("StepReapExpired = %d, %v; want 1", n, err)
	}
	retried := h.claimOne(at(time.Minute), "w2")
	if retried.Step.ID != slow.Step.ID || retried.Step.Attempt != 2 {
		h.t.Fatalf("re-claim: step %d attempt %d, want step %d attempt 2", retried.Step.ID, retried.Step.Attempt, slow.Step.ID)
	}
	h.mustRecord(giveUp(retried, at(61*time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	h.wantNoEffect(key)

	runB := h.runWithKeys("rB", at(62*time.Second), keys, step("a"))
	holder := h.claimOne(at(62*time.Second), "w3")
	b := h.step(runB.ID, "a")
	if holder.Step.ID != b.ID {
		h.t.Fatalf("claimed step %d, want run B's step %d", holder.Step.ID, b.ID)
	}
	h.wantEffect(key, store.EffectInFlight, b)

	// The first worker's success of attempt 1 arrives now.
	h.wantLeaseLost(succeed(slow, at(63*time.Second), `{"charged_by": "w1"}`))
	e := h.wantEffect(key, store.EffectInFlight, b)
	if len(e.Result) != 0 && string(e.Result) != "null" {
		h.t.Errorf("the row run B's step holds took the late result of run A's step: %s", e.Result)
	}
	a := h.step(runA.ID, "a")
	if kept := ofType(h.stepEvents(a), store.EventLeaseLostRecorded); len(kept) != 0 {
		h.t.Errorf("run A's step: %d lease.lost_result_kept events, want none (the key is another step's)", len(kept))
	}
	h.wantStep(runA.ID, "a", store.StateNeedsReview, 2, store.ReasonPermanentError)

	// The holder completes the key with its own result, which a later step reuses.
	h.mustRecord(succeed(holder, at(64*time.Second), `{"charged_by": "w3"}`))
	e = h.wantEffect(key, store.EffectCompleted, b)
	h.wantJSON("ledger result", e.Result, `{"charged_by": "w3"}`)
	h.wantJSON("run B's output", h.step(runB.ID, "a").Output, `{"charged_by": "w3"}`)
	runC := h.runWithKeys("rC", at(65*time.Second), keys, step("a"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(65 * time.Second), Owner: "w4"}), 1, 0, 0)
	c := h.step(runC.ID, "a")
	wantEqual(h.t, "run C's step", c.State, store.StateCompleted)
	h.wantJSON("run C's output, reused", c.Output, `{"charged_by": "w3"}`)
}

func testRecordBatchMixed(h *harness) {
	r1, r2 := h.run("r1", step("a")), h.run("r2", step("a"))
	res := h.claim(store.StepClaimParams{})
	h.wantClaimed(res, 0, 0, 0, h.step(r1.ID, "a"), h.step(r2.ID, "a"))
	stale := succeed(res.Claimed[1], at(time.Second), `"stale"`)
	stale.Attempt = 7
	errs := h.record(succeed(res.Claimed[0], at(time.Second), `"one"`), stale)
	if errs[0] != nil || !errors.Is(errs[1], store.ErrLeaseLost) {
		h.t.Fatalf("StepRecord entry errors = %v, want [nil, ErrLeaseLost]", errs)
	}
	h.wantStep(r1.ID, "a", store.StateCompleted, 1, "")
	h.wantStep(r2.ID, "a", store.StateProcessing, 1, "")
	h.wantRunState(r1.ID, store.StateCompleted)
	h.wantRunState(r2.ID, store.StateProcessing)
}

func testReapExpired(h *harness) {
	r1, r3 := h.run("r1", step("a")), h.run("r3", step("a"))
	h.claim(store.StepClaimParams{Owner: "w1"}) // leases until base+30s
	r2 := h.newRun(store.RunInsertParams{RunKey: "r2", Now: at(30 * time.Second), Steps: []store.StepInsert{step("a")}})
	h.claim(store.StepClaimParams{Owner: "w2", Now: at(30 * time.Second)}) // lease until base+60s
	s1, s3 := h.step(r1.ID, "a"), h.step(r3.ID, "a")

	decide := func(s *store.Step) store.ReapDecision {
		if s.State != store.StateProcessing || s.LeaseOwner != "w1" || s.Attempt != 1 || s.EffectKey == "" {
			h.t.Errorf("Decide got step %+v, want w1's processing attempt 1 with its key", s)
		}
		switch s.ID {
		case s1.ID:
			return store.ReapDecision{State: store.StateRetrying, NextAt: at(2 * time.Minute), Reason: store.ReasonLeaseExpired}
		case s3.ID:
			return store.ReapDecision{State: store.StateNeedsReview, Reason: store.ReasonOutcomeUnknown}
		}
		h.t.Errorf("Decide got step %d, which has not expired", s.ID)
		return store.ReapDecision{State: store.StateNeedsReview, Reason: "unexpected"}
	}
	reap := func(now time.Time, want int) {
		h.t.Helper()
		n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: now, Decide: decide})
		if err != nil {
			h.t.Fatalf("StepReapExpired at %s: %v", now.Sub(base), err)
		}
		if n != want {
			h.t.Errorf("StepReapExpired at %s = %d, want %d", now.Sub(base), n, want)
		}
	}
	reap(at(30*time.Second), 0) // expiring at Now is not expired before Now
	reap(at(45*time.Second), 2)
	reap(at(45*time.Second), 0)

	a1 := h.wantStep(r1.ID, "a", store.StateRetrying, 1, store.ReasonLeaseExpired)
	h.wantTime("NextAt of the reaped step", a1.NextAt, at(2*time.Minute))
	a3 := h.wantStep(r3.ID, "a", store.StateNeedsReview, 1, store.ReasonOutcomeUnknown)
	for _, s := range []*store.Step{a1, a3} {
		if s.LastOutcome != store.OutcomeUnknown || s.LeaseOwner != "" || !s.LeaseExpiresAt.IsZero() {
			h.t.Errorf("reaped step %d: outcome %q owner %q lease %s, want unknown and no lease", s.ID, s.LastOutcome, s.LeaseOwner, s.LeaseExpiresAt)
		}
		atts := h.attempts(s.RunID)
		if len(atts) != 1 || atts[0].Outcome != store.OutcomeUnknown {
			h.t.Errorf("attempts of reaped step %d = %+v, want one closed with outcome unknown", s.ID, atts)
		} else {
			h.wantTime("reaped attempt EndedAt", atts[0].EndedAt, at(45*time.Second))
		}
		h.wantEffect(s.EffectKey, store.EffectInFlight, s)
	}
	h.wantStep(r2.ID, "a", store.StateProcessing, 1, "")
	h.wantRunState(r1.ID, store.StateRetrying)
	h.wantRunState(r3.ID, store.StateNeedsReview)

	for _, tc := range []struct {
		s    *store.Step
		run  *store.Run
		next store.EventType
	}{{a1, r1, store.EventStepRetryPlanned}, {a3, r3, store.EventStepNeedsReview}} {
		evs := h.stepEvents(tc.s)
		h.wantTypes("reaped step", evs, store.EventStepClaimed, store.EventLeaseExpired, tc.next)
		h.wantStepEvent(evs[1], tc.run, tc.s, tc.s.EffectKey, 1)
		wantEqual(h.t, "lease.expired actor", evs[1].Actor, store.ActorReaper)
		h.wantStepEvent(evs[2], tc.run, tc.s, tc.s.EffectKey, 1)
	}

	// Retried with the same key, knowing the outcome is unknown.
	c := h.claimOne(at(2*time.Minute), "w9")
	if c.Step.ID != s1.ID || c.Step.Attempt != 2 || c.Step.EffectKey != s1.EffectKey || c.PreviousOutcome != store.OutcomeUnknown {
		h.t.Errorf("re-claim after reap: step %d attempt %d key %q previous %q, want step %d attempt 2 key %q previous unknown",
			c.Step.ID, c.Step.Attempt, c.Step.EffectKey, c.PreviousOutcome, s1.ID, s1.EffectKey)
	}
	// The old owner reports late: refused, the new attempt keeps the step.
	before := h.step(r1.ID, "a")
	h.wantLeaseLost(retry(&store.ClaimedStep{Step: s1}, at(2*time.Minute+time.Second), at(3*time.Minute)))
	if after := h.step(r1.ID, "a"); !reflect.DeepEqual(after, before) {
		h.t.Errorf("late record changed the step:\n got %+v\nwant %+v", after, before)
	}
}

func testReapLimit(h *harness) {
	for _, k := range []string{"r1", "r2", "r3"} {
		h.run(k, step("a"))
	}
	h.claim(store.StepClaimParams{})
	for _, want := range []int{2, 1, 0} {
		n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(time.Minute), Limit: 2, Decide: retryAt(at(time.Hour))})
		if err != nil {
			h.t.Fatal(err)
		}
		wantEqual(h.t, "reaped with limit 2", n, want)
	}
}
