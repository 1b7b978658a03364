package storetest

import (
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

var recordTests = []subtest{
	{"SuccessReleasesDependents", testRecordSuccess},
	{"Retrying", testRecordRetrying},
	{"NeedsReviewPermanentFreesKey", testRecordNeedsReviewPermanent},
	{"NeedsReviewUnknownKeepsKey", testRecordNeedsReviewUnknown},
	{"GiveUpAfterSuccessKeepsKey", testRecordGiveUpAfterSuccess},
	{"FailedCancelsDependents", testRecordFailed},
}

func testRecordSuccess(h *harness) {
	// a → b, a → c, (b, c) → d
	run := h.run("r", step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c"))
	ca := h.claimOne(base, "w1")
	p := succeed(ca, at(time.Second), `{"id": 7}`)
	p.ResponseStatus, p.ResponseExcerpt = 201, `{"id":7}`
	p.Request = `{"method":"POST","url":"https://crm.example/leads","headers":{"Authorization":["[redacted]"]},"body":"{\"name\":\"Ada\"}"}`
	h.mustRecord(p)

	a := h.wantStep(run.ID, "a", store.StateCompleted, 1, "")
	h.wantJSON("a output", a.Output, `{"id": 7}`)
	if a.LastOutcome != store.OutcomeSuccess || a.LeaseOwner != "" || !a.LeaseExpiresAt.IsZero() {
		h.t.Errorf("completed step a: outcome %q owner %q lease %s, want success and no lease", a.LastOutcome, a.LeaseOwner, a.LeaseExpiresAt)
	}
	e := h.wantEffect(keyOf(run, "a"), store.EffectCompleted, a)
	h.wantJSON("effect result", e.Result, `{"id": 7}`)
	h.wantTime("effect CompletedAt", e.CompletedAt, at(time.Second))
	atts := h.attempts(run.ID)
	if len(atts) != 1 || atts[0].Outcome != store.OutcomeSuccess || atts[0].ResponseStatus != 201 ||
		atts[0].ResponseExcerpt != `{"id":7}` || atts[0].Error != "" || atts[0].Request != p.Request {
		h.t.Fatalf("attempts = %+v, want one closed with success 201 and the request it sent", atts)
	}
	h.wantTime("attempt EndedAt", atts[0].EndedAt, at(time.Second))

	steps := h.steps(run.ID)
	for name, waiting := range map[string]int{"b": 0, "c": 0, "d": 2} {
		if s := steps[name]; s.State != store.StatePending || s.Waiting != waiting {
			h.t.Errorf("step %s: %s waiting %d, want pending waiting %d", name, s.State, s.Waiting, waiting)
		}
	}
	h.wantRunState(run.ID, store.StateProcessing)

	// b and c are claimable now and see a's output; recording both in one call applies both.
	res := h.claim(store.StepClaimParams{Now: at(time.Second)})
	h.wantClaimed(res, 0, 0, 0, steps["b"], steps["c"])
	for _, c := range res.Claimed {
		h.wantJSON("output of a offered to "+c.Step.Name, c.Outputs["a"], `{"id": 7}`)
	}
	h.mustRecord(succeed(res.Claimed[0], at(2*time.Second), `"b"`), succeed(res.Claimed[1], at(2*time.Second), `"c"`))
	if d := h.step(run.ID, "d"); d.Waiting != 0 || d.State != store.StatePending {
		h.t.Errorf("d after b and c: %s waiting %d, want pending waiting 0", d.State, d.Waiting)
	}
	h.wantRunState(run.ID, store.StateProcessing)

	cd := h.claimOne(at(2*time.Second), "w1")
	wantEqual(h.t, "claimed", cd.Step.Name, "d")
	h.wantJSON("output of b offered to d", cd.Outputs["b"], `"b"`)
	h.wantJSON("output of c offered to d", cd.Outputs["c"], `"c"`)
	h.mustRecord(succeed(cd, at(3*time.Second), `null`))
	h.wantRunState(run.ID, store.StateCompleted)
	h.wantTime("completed run UpdatedAt", h.getRun(run.ID).UpdatedAt, at(3*time.Second))

	evs := h.runEvents(run.ID)
	h.wantTypes("run", evs,
		store.EventRunCreated,
		store.EventStepClaimed, store.EventRunStateChanged, // a; pending → processing
		store.EventStepCompleted,                       // a
		store.EventStepClaimed, store.EventStepClaimed, // b, c
		store.EventStepCompleted, store.EventStepCompleted, // b, c
		store.EventStepClaimed, store.EventStepCompleted, // d
		store.EventRunStateChanged, // processing → completed
	)
	h.wantStepEvent(ofType(evs, store.EventStepCompleted)[0], run, a, keyOf(run, "a"), 1)
}

func testRecordRetrying(h *harness) {
	run := h.run("r", step("a"))
	c1 := h.claimOne(base, "w1")
	h.mustRecord(retry(c1, at(time.Second), at(time.Minute)))

	a := h.wantStep(run.ID, "a", store.StateRetrying, 1, store.ReasonRetryableError)
	h.wantTime("retrying NextAt", a.NextAt, at(time.Minute))
	if a.LastOutcome != store.OutcomeRetryable || a.LastError != "503 service unavailable" || a.LeaseOwner != "" {
		h.t.Errorf("retrying step: outcome %q error %q owner %q, want retryable, the error, no owner", a.LastOutcome, a.LastError, a.LeaseOwner)
	}
	key := keyOf(run, "a")
	h.wantEffect(key, store.EffectInFlight, a)
	h.wantRunState(run.ID, store.StateRetrying)

	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Minute - time.Microsecond)}), 0, 0, 0)
	c2 := h.claimOne(at(time.Minute), "w2")
	if c2.Step.ID != a.ID || c2.Step.Attempt != 2 || c2.Step.EffectKey != key || c2.PreviousOutcome != store.OutcomeRetryable {
		h.t.Errorf("re-claim: step %d attempt %d key %q previous %q, want step %d attempt 2 key %q previous retryable",
			c2.Step.ID, c2.Step.Attempt, c2.Step.EffectKey, c2.PreviousOutcome, a.ID, key)
	}
	h.wantRunState(run.ID, store.StateProcessing)
	atts := h.attempts(run.ID)
	if len(atts) != 2 || atts[0].Number != 1 || atts[0].Outcome != store.OutcomeRetryable || atts[0].ResponseStatus != 503 ||
		atts[1].Number != 2 || atts[1].Worker != "w2" || atts[1].Outcome != "" {
		h.t.Errorf("attempts = %+v, want 1 (retryable, 503) and 2 (open, w2)", atts)
	}
	h.mustRecord(succeed(c2, at(time.Minute+time.Second), `{"ok": true}`))
	h.wantRunState(run.ID, store.StateCompleted)

	evs := h.stepEvents(a)
	h.wantTypes("step a", evs, store.EventStepClaimed, store.EventStepRetryPlanned, store.EventStepClaimed, store.EventStepCompleted)
	h.wantStepEvent(evs[1], run, a, key, 1)
	wantEqual(h.t, "step.retry_scheduled reason", evs[1].Reason, store.ReasonRetryableError)
	h.wantStepEvent(evs[3], run, a, key, 2)
}

func testRecordNeedsReviewPermanent(h *harness) {
	// a → b, and an independent c
	run := h.run("r", step("a"), step("b", "a"), step("c"))
	ca := h.claimOne(base, "w1")
	wantEqual(h.t, "first claimed", ca.Step.Name, "a")
	h.mustRecord(giveUp(ca, at(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))

	a := h.wantStep(run.ID, "a", store.StateNeedsReview, 1, store.ReasonPermanentError)
	wantEqual(h.t, "a last outcome", a.LastOutcome, store.OutcomePermanent)
	h.wantNoEffect(keyOf(run, "a"))
	h.wantRunState(run.ID, store.StateNeedsReview)
	if b := h.step(run.ID, "b"); b.State != store.StatePending || b.Waiting != 1 {
		h.t.Errorf("b after a went to review: %s waiting %d, want pending waiting 1", b.State, b.Waiting)
	}

	// The independent branch goes on; b does not.
	cc := h.claimOne(at(time.Second), "w1")
	wantEqual(h.t, "claimed while a is in review", cc.Step.Name, "c")
	h.wantRunState(run.ID, store.StateNeedsReview)
	h.mustRecord(succeed(cc, at(2*time.Second), `"c"`))
	h.wantStep(run.ID, "c", store.StateCompleted, 1, "")
	h.wantRunState(run.ID, store.StateNeedsReview)
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Hour)}), 0, 0, 0)

	evs := h.stepEvents(a)
	h.wantTypes("step a", evs, store.EventStepClaimed, store.EventStepNeedsReview)
	wantEqual(h.t, "step.needs_review reason", evs[1].Reason, store.ReasonPermanentError)
	if atts := h.attempts(run.ID); len(atts) == 0 || atts[0].Outcome != store.OutcomePermanent || atts[0].Error != "destination said no" {
		h.t.Errorf("attempts of a = %+v, want the first permanent with the error", atts)
	}
}

func testRecordNeedsReviewUnknown(h *harness) {
	run := h.runWithKeys("r1", base, map[string]string{"send": "K"}, step("send"))
	c := h.claimOne(base, "w1")
	h.mustRecord(giveUp(c, at(time.Second), store.OutcomeUnknown, store.StateNeedsReview, store.ReasonOutcomeUnknown))
	send := h.wantStep(run.ID, "send", store.StateNeedsReview, 1, store.ReasonOutcomeUnknown)
	h.wantEffect("K", store.EffectInFlight, send)

	// The key stays held: another step with it waits.
	other := h.runWithKeys("r2", at(time.Second), map[string]string{"send": "K"}, step("send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Second)}), 0, 0, 1)
	h.wantStep(other.ID, "send", store.StatePending, 0, store.ReasonEffectInFlight)
	h.wantEffect("K", store.EffectInFlight, send)
}

// An attempt that succeeded but whose step the engine still sends to review or failure has
// performed the effect: its key is not a known failure and must not become free.
func testRecordGiveUpAfterSuccess(h *harness) {
	for _, state := range []store.State{store.StateNeedsReview, store.StateFailed} {
		h.sub(string(state), func(h *harness) {
			run := h.run("r", step("a"))
			c := h.claimOne(base, "w1")
			p := giveUp(c, at(time.Second), store.OutcomeSuccess, state, "output_rejected")
			h.mustRecord(p)
			a := h.wantStep(run.ID, "a", state, 1, "output_rejected")
			e, err := h.s.EffectGetByKey(h.ctx, keyOf(run, "a"))
			if err != nil {
				h.t.Fatalf("EffectGetByKey after a successful attempt: %v; the key must stay taken", err)
			}
			if e.StepID != a.ID {
				h.t.Errorf("effect held by step %d, want %d", e.StepID, a.ID)
			}
		})
	}
}

func testRecordFailed(h *harness) {
	// a → b → c, (a, e) → d, e independent
	run := h.run("r", step("a"), step("b", "a"), step("c", "b"), step("d", "a", "e"), step("e"))
	res := h.claim(store.StepClaimParams{})
	steps := h.steps(run.ID)
	h.wantClaimed(res, 0, 0, 0, steps["a"], steps["e"])
	ca, ce := res.Claimed[0], res.Claimed[1]
	h.mustRecord(succeed(ce, at(time.Second), `"e"`))
	h.mustRecord(giveUp(ca, at(2*time.Second), store.OutcomePermanent, store.StateFailed, store.ReasonPermanentError))

	h.wantStep(run.ID, "a", store.StateFailed, 1, store.ReasonPermanentError)
	h.wantNoEffect(keyOf(run, "a"))
	for _, name := range []string{"b", "c", "d"} {
		h.wantStep(run.ID, name, store.StateCancelled, 0, store.ReasonDependencyFailed)
	}
	h.wantStep(run.ID, "e", store.StateCompleted, 1, "")
	h.wantRunState(run.ID, store.StateFailed)
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Hour)}), 0, 0, 0)

	evs := h.runEvents(run.ID)
	failed := h.only(evs, store.EventStepFailed)
	h.wantStepEvent(failed, run, steps["a"], keyOf(run, "a"), 1)
	var cancelled []string
	for _, e := range ofType(evs, store.EventStepCancelled) {
		cancelled = append(cancelled, e.StepName)
		if e.Reason != store.ReasonDependencyFailed || e.RunID != run.ID || e.Workflow != run.Workflow || e.Entity != run.Entity ||
			e.StepID != steps[e.StepName].ID || e.ID < failed.ID {
			h.t.Errorf("step.cancelled = %+v, want reason dependency_failed for a step of run %d after step.failed", e, run.ID)
		}
	}
	slices.Sort(cancelled)
	wantEqual(h.t, "cancelled steps", strings.Join(cancelled, ","), "b,c,d")
	if last := h.last("run events", evs, 1)[0]; last.Type != store.EventRunStateChanged {
		h.t.Errorf("last run event = %s, want run.state_changed to failed", last.Type)
	}
}
