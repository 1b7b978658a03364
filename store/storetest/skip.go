package storetest

import (
	"time"

	"github.com/onceflow/onceflow/store"
)

var skipTests = []subtest{
	{"ConditionFalseSkipsDependents", testSkipCascades},
	{"RecordSkippedReleasesKey", testRecordSkipped},
}

// A step whose condition is false is skipped without touching the ledger, and so are the
// steps that need it, transitively; an independent branch still runs.
func testSkipCascades(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"), step("c", "b"), step("d"))
	res := h.claim(store.StepClaimParams{Owner: "w1", Now: base, LeaseFor: time.Minute, Limit: 10, Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		if c.Step.Name == "a" {
			return store.EffectSpec{Skip: store.ReasonConditionFalse}, nil
		}
		return store.EffectSpec{Key: "key-" + c.Step.Name}, nil
	}})
	d := h.step(run.ID, "d")
	h.wantClaimed(res, 0, 0, 0, d)
	wantEqual(h.t, "skipped count", res.Skipped, 1)
	a := h.wantStep(run.ID, "a", store.StateSkipped, 0, store.ReasonConditionFalse)
	wantEqual(h.t, "skipped step's effect key", a.EffectKey, "")
	h.wantTypes("skipped step's events", h.stepEvents(a), store.EventStepSkipped)
	for _, name := range []string{"b", "c"} {
		s := h.wantStep(run.ID, name, store.StateSkipped, 0, store.ReasonDependencySkipped)
		h.wantTypes(name+"'s events", h.stepEvents(s), store.EventStepSkipped)
	}
	h.wantRunState(run.ID, store.StateProcessing)
	h.mustRecord(succeed(res.Claimed[0], at(time.Second), `{}`))
	h.wantRunState(run.ID, store.StateCompleted)
}

// A step that finds nothing to do ends skipped: its key is released and the steps that
// need it are skipped.
func testRecordSkipped(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"))
	cs := h.claimOne(base, "w1")
	p := succeed(cs, at(time.Second), "")
	p.Outcome, p.NextState, p.Reason, p.Output = store.OutcomeSuccess, store.StateSkipped, store.ReasonTransitionInvalid, nil
	h.mustRecord(p)
	h.wantStep(run.ID, "a", store.StateSkipped, 1, store.ReasonTransitionInvalid)
	h.wantStep(run.ID, "b", store.StateSkipped, 0, store.ReasonDependencySkipped)
	h.wantNoEffect(cs.Step.EffectKey)
	h.wantRunState(run.ID, store.StateCompleted)
}
