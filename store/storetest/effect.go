package storetest

import (
	"strconv"
	"time"

	"github.com/onceflow/onceflow/store"
)

var effectTests = []subtest{
	{"ReusedAcrossRuns", testEffectReused},
	{"KeyConflict", testEffectKeyConflict},
	{"InFlightWaits", testEffectInFlightWaits},
}

// completeKey runs a one-step run "a" whose step send completes key K with fingerprint fp
// and output {"crm_id": 42}, and returns the run and its step.
func (h *harness) completeKey(fp string) (*store.Run, *store.Step) {
	h.t.Helper()
	run := h.runWithKeys("a", base, map[string]string{"send": "K", "send.fp": fp}, step("send"))
	c := h.claimOne(base, "w1")
	h.mustRecord(succeed(c, at(time.Second), `{"crm_id": 42}`))
	return run, h.step(run.ID, "send")
}

// wantCompletedBy checks that e's detail names run as the one that completed the key.
func (h *harness) wantCompletedBy(e *store.Event, run *store.Run) {
	h.t.Helper()
	got := h.detailOf(e)["completed_by_run"]
	if n, ok := got.(interface{ String() string }); !ok || n.String() != strconv.FormatInt(run.ID, 10) {
		h.t.Errorf("%s detail %s: completed_by_run = %v, want %d", e.Type, e.Detail, got, run.ID)
	}
}

// wantReused checks that step send of run b was completed from A's ledger row without an
// attempt, with the events that say so.
func (h *harness) wantReused(b, a *store.Run, holder *store.Step) {
	h.t.Helper()
	send := h.step(b.ID, "send")
	if send.State != store.StateCompleted || send.Attempt != 0 || send.LeaseOwner != "" {
		h.t.Errorf("reusing step: %s attempt %d owner %q, want completed without an attempt or lease", send.State, send.Attempt, send.LeaseOwner)
	}
	h.wantJSON("reused output", send.Output, `{"crm_id": 42}`)
	wantEqual(h.t, "reused step's key", send.EffectKey, "K")
	wantEqual(h.t, "attempts of the reusing run", len(h.attempts(b.ID)), 0)
	e := h.wantEffect("K", store.EffectCompleted, holder)
	h.wantJSON("ledger result", e.Result, `{"crm_id": 42}`)

	evs := h.stepEvents(send)
	evs = h.last("reusing step", evs, 2)
	h.wantTypes("reusing step", evs, store.EventEffectReused, store.EventStepCompleted)
	for _, ev := range evs {
		h.wantStepEvent(ev, b, send, "K", 0)
		h.wantCompletedBy(ev, a)
	}
}

func testEffectReused(h *harness) {
	cases := []struct{ name, fpA, fpB string }{
		{"SameFingerprint", "F", "F"},
		{"NewRequestWithoutFingerprint", "F", ""},
		{"StoredWithoutFingerprint", "", "G"},
		{"NoFingerprints", "", ""},
	}
	for _, tc := range cases {
		h.sub(tc.name, func(h *harness) {
			a, holder := h.completeKey(tc.fpA)
			b := h.runWithKeys("b", at(2*time.Second), map[string]string{"send": "K", "send.fp": tc.fpB}, step("send"), step("after", "send"))
			h.wantClaimed(h.claim(store.StepClaimParams{Now: at(2 * time.Second)}), 1, 0, 0)
			h.wantReused(b, a, holder)
			h.wantTypes("run b", h.runEvents(b.ID), store.EventRunCreated, store.EventEffectReused, store.EventStepCompleted, store.EventRunStateChanged)
			h.wantRunState(b.ID, store.StateProcessing)

			// The dependent is released and sees the reused output.
			c := h.claimOne(at(2*time.Second), "w1")
			wantEqual(h.t, "claimed after reuse", c.Step.Name, "after")
			h.wantJSON("output offered to after", c.Outputs["send"], `{"crm_id": 42}`)
			h.mustRecord(succeed(c, at(3*time.Second), `{}`))
			h.wantRunState(b.ID, store.StateCompleted)
		})
	}
}

func testEffectKeyConflict(h *harness) {
	_, holder := h.completeKey("F")
	b := h.runWithKeys("b", at(2*time.Second), map[string]string{"send": "K", "send.fp": "G"}, step("send"), step("after", "send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(2 * time.Second)}), 0, 1, 0)

	send := h.wantStep(b.ID, "send", store.StateNeedsReview, 0, store.ReasonKeyConflict)
	if send.LastError == "" {
		h.t.Error("key conflict left LastError empty")
	}
	if after := h.step(b.ID, "after"); after.State != store.StatePending || after.Waiting != 1 {
		h.t.Errorf("after: %s waiting %d, want pending waiting 1", after.State, after.Waiting)
	}
	h.wantRunState(b.ID, store.StateNeedsReview)
	e := h.wantEffect("K", store.EffectCompleted, holder)
	wantEqual(h.t, "ledger fingerprint", e.Fingerprint, "F")
	h.wantJSON("ledger result", e.Result, `{"crm_id": 42}`)
	wantEqual(h.t, "attempts of run b", len(h.attempts(b.ID)), 0)

	evs := h.runEvents(b.ID)
	h.wantTypes("run b", evs, store.EventRunCreated, store.EventEffectConflict, store.EventStepNeedsReview, store.EventRunStateChanged)
	for _, ev := range evs[1:3] {
		h.wantStepEvent(ev, b, send, "K", 0)
		wantEqual(h.t, string(ev.Type)+" reason", ev.Reason, store.ReasonKeyConflict)
	}
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Hour)}), 0, 0, 0)
}

func testEffectInFlightWaits(h *harness) {
	keys := map[string]string{"send": "K"}
	a := h.runWithKeys("a", base, keys, step("send"))
	b := h.runWithKeys("b", base, keys, step("send"))
	res := h.claim(store.StepClaimParams{Now: base, WaitFor: 10 * time.Second})
	h.wantClaimed(res, 0, 0, 1, h.step(a.ID, "send"))
	holder := h.step(a.ID, "send")
	h.wantEffect("K", store.EffectInFlight, holder)

	send := h.wantStep(b.ID, "send", store.StatePending, 0, store.ReasonEffectInFlight)
	h.wantTime("waiting step NextAt", send.NextAt, at(10*time.Second))
	waiting := h.only(h.runEvents(b.ID), store.EventEffectWaiting)
	h.wantStepEvent(waiting, b, send, "K", 0)

	// Not due before NextAt; still waiting at NextAt, without a second event.
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(5 * time.Second), WaitFor: 10 * time.Second}), 0, 0, 0)
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(10 * time.Second), WaitFor: 10 * time.Second}), 0, 0, 1)
	h.wantTime("NextAt after waiting again", h.step(b.ID, "send").NextAt, at(20*time.Second))
	h.wantTypes("run b while waiting", h.runEvents(b.ID), store.EventRunCreated, store.EventEffectWaiting)

	h.mustRecord(succeed(res.Claimed[0], at(15*time.Second), `{"crm_id": 42}`))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(20 * time.Second), WaitFor: 10 * time.Second}), 1, 0, 0)
	h.wantReused(b, a, holder)
	h.wantTypes("run b", h.runEvents(b.ID), store.EventRunCreated, store.EventEffectWaiting,
		store.EventEffectReused, store.EventStepCompleted, store.EventRunStateChanged)
	h.wantRunState(b.ID, store.StateCompleted)
}
