package storetest

import (
	"time"

	"github.com/onceflow/onceflow/store"
)

var skipTests = []subtest{
	{"SkipReleasesDependents", testSkipReleasesDependents},
}

// A step whose condition is false is skipped without touching the ledger, and the steps
// that need it run as if it had completed.
func testSkipReleasesDependents(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"))
	res := h.claim(store.StepClaimParams{Owner: "w1", Now: base, LeaseFor: time.Minute, Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		if c.Step.Name == "a" {
			return store.EffectSpec{Skip: "condition_false"}, nil
		}
		return store.EffectSpec{Key: "key-b"}, nil
	}})
	h.wantClaimed(res, 0, 0, 0)
	wantEqual(h.t, "skipped count", res.Skipped, 1)
	a := h.wantStep(run.ID, "a", store.StateSkipped, 0, "condition_false")
	wantEqual(h.t, "skipped step's effect key", a.EffectKey, "")
	h.wantTypes("skipped step's events", h.stepEvents(a), store.EventStepSkipped)

	cs := h.claimOne(at(time.Second), "w1")
	if cs == nil || cs.Step.Name != "b" {
		h.t.Fatalf("claimed %+v after the skip, want step b", cs)
	}
	h.mustRecord(succeed(cs, at(2*time.Second), `{"ok":true}`))
	h.wantRunState(run.ID, store.StateCompleted)
}
