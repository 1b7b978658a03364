package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

var reviewTests = []subtest{
	{"ListFiltersAndFields", testReviewList},
	{"GetByStep", testReviewGet},
	{"RetryGivesFreshBudget", testReviewRetry},
	{"EffectMayExistNeedsADecision", testReviewUnknown},
	{"ResolveCompletesLedgerAndReleases", testReviewResolve},
	{"ResolveKeepsAKeyCompletedElsewhere", testReviewResolveKept},
	{"ResolveRefusesAKeyInFlightElsewhere", testReviewResolveInFlight},
	{"AbandonFailsStepAndRun", testReviewAbandon},
	{"ReplayCorrectsAndResets", testReplayCorrect},
	{"ReplayResetsFailedAndCancelled", testReplayCancelled},
	{"ReplaySkipsWhatNeedsASkippedStep", testReplaySkipped},
	{"ReplayRefusals", testReplayRefusals},
	{"ActionsRefuseAChangedItem", testReviewVersion},
	{"EventTimeRange", testEventTimeRange},
}

// park claims the due steps of the default workflow at now and sends the one named name
// to needs_review after a permanent error (its key released); the others succeed.
func (h *harness) park(run *store.Run, now time.Time, name string) *store.ClaimedStep {
	h.t.Helper()
	res := h.claim(store.StepClaimParams{Now: now})
	var parked *store.ClaimedStep
	for _, cs := range res.Claimed {
		if cs.Step.RunID == run.ID && cs.Step.Name == name {
			parked = cs
			h.mustRecord(giveUp(cs, now.Add(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
			continue
		}
		h.mustRecord(succeed(cs, now.Add(time.Second), fmt.Sprintf(`{"step":%q}`, cs.Step.Name)))
	}
	if parked == nil {
		h.t.Fatalf("run %d step %s was not claimed at %s", run.ID, name, now.Sub(base))
	}
	return parked
}

// action is a review action by "alice" at now.
func action(run *store.Run, step string, now time.Time) store.ReviewAction {
	return store.ReviewAction{RunID: run.ID, Step: step, Actor: "alice", Note: "checked with the customer", Now: now}
}

// wantErr requires err to match target.
func (h *harness) wantErr(what string, err, target error) {
	h.t.Helper()
	if !errors.Is(err, target) {
		h.t.Errorf("%s: error %v, want %v", what, err, target)
	}
}

// eventCount returns how many events the store holds.
func (h *harness) eventCount() int {
	h.t.Helper()
	return len(h.events(store.EventListParams{Limit: 100000}))
}

// wantReviewEvent checks the single event of typ about step s: actor, reason and note.
func (h *harness) wantReviewEvent(s *store.Step, typ store.EventType, reason store.Reason) map[string]any {
	h.t.Helper()
	e := h.only(h.stepEvents(s), typ)
	if e.Actor != "alice" || e.Reason != reason || e.StepName != s.Name || e.RunID != s.RunID {
		h.t.Errorf("%s event: actor %q reason %q step %q run %d; want alice, %q, %q, %d", typ, e.Actor, e.Reason, e.StepName, e.RunID, reason, s.Name, s.RunID)
	}
	d := h.detailOf(e)
	if d["note"] != "checked with the customer" {
		h.t.Errorf("%s event detail %v lacks the note", typ, d)
	}
	return d
}

func testReviewList(h *harness) {
	r1 := h.newRun(store.RunInsertParams{RunKey: "r1", Entity: "order:1", Steps: []store.StepInsert{step("a"), step("b", "a")}})
	r2 := h.newRun(store.RunInsertParams{RunKey: "r2", Entity: "order:2", Steps: []store.StepInsert{step("a"), step("b", "a")}})
	other := h.newRun(store.RunInsertParams{Workflow: "leads", RunKey: "r3", Entity: "lead:3", Steps: []store.StepInsert{step("a")}})
	// r1/a: retried once (503), then refused (422) at +1m01s: reason permanent_error.
	res := h.claim(store.StepClaimParams{Now: base, Workflows: []string{defaultWorkflow, "leads"}})
	h.wantClaimed(res, 0, 0, 0, h.step(r1.ID, "a"), h.step(r2.ID, "a"), h.step(other.ID, "a"))
	h.mustRecord(retry(res.Claimed[0], at(time.Second), at(time.Minute)),
		succeed(res.Claimed[1], at(time.Second), `{}`),
		giveUp(res.Claimed[2], at(2*time.Second), store.OutcomeRetryable, store.StateNeedsReview, store.ReasonAttemptsExhausted))
	// r2/b: parked at claim time, at +2s, before it had an attempt.
	res = h.claim(store.StepClaimParams{Now: at(2 * time.Second), Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) {
		return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonInvalidKey, Err: errors.New("input.email is missing")}
	}})
	wantEqual(h.t, "parked at claim", res.Parked, 1)
	cs := h.claimOne(at(time.Minute), "w1")
	h.mustRecord(giveUp(cs, at(61*time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))

	all := h.reviewList(store.ReviewListParams{})
	var got []string
	for _, it := range all {
		got = append(got, fmt.Sprintf("%s/%s", it.RunKey, it.StepName))
	}
	if want := []string{"r1/a", "r2/b", "r3/a"}; !slices.Equal(got, want) {
		h.t.Fatalf("ReviewList = %q, want %q (step ID order, needs_review only)", got, want)
	}
	a := all[0]
	wantEqual(h.t, "item run", a.RunID, r1.ID)
	wantEqual(h.t, "item step ID", a.StepID, h.step(r1.ID, "a").ID)
	wantEqual(h.t, "item workflow", a.Workflow, defaultWorkflow)
	wantEqual(h.t, "item entity", a.Entity, "order:1")
	wantEqual(h.t, "item state", a.State, store.StateNeedsReview)
	wantEqual(h.t, "item reason", a.Reason, store.ReasonPermanentError)
	wantEqual(h.t, "item last error", a.LastError, "destination said no")
	wantEqual(h.t, "item last outcome", a.LastOutcome, store.OutcomePermanent)
	wantEqual(h.t, "item attempts", a.Attempts, 2)
	wantEqual(h.t, "item attempt base", a.AttemptBase, 0)
	wantEqual(h.t, "item response status (latest attempt)", a.ResponseStatus, 422)
	wantEqual(h.t, "item effect key", a.EffectKey, keyOf(r1, "a"))
	h.wantTime("item since", a.Since, at(61*time.Second))
	h.wantTime("item run created", a.RunCreatedAt, base)
	b := all[1]
	wantEqual(h.t, "parked-at-claim reason", b.Reason, store.ReasonInvalidKey)
	wantEqual(h.t, "parked-at-claim attempts", b.Attempts, 0)
	wantEqual(h.t, "parked-at-claim response status (no attempt)", b.ResponseStatus, 0)
	wantEqual(h.t, "parked-at-claim error", b.LastError, "invalid_key: input.email is missing")
	if b.EffectMayExist() || a.EffectMayExist() {
		h.t.Errorf("EffectMayExist true for items whose destination refused")
	}

	cases := []struct {
		name string
		p    store.ReviewListParams
		want []string
	}{
		{"workflow", store.ReviewListParams{Workflow: "leads"}, []string{"r3/a"}},
		{"step", store.ReviewListParams{StepName: "b"}, []string{"r2/b"}},
		{"reason", store.ReviewListParams{Reason: store.ReasonAttemptsExhausted}, []string{"r3/a"}},
		{"entity", store.ReviewListParams{Entity: "order:1"}, []string{"r1/a"}},
		{"run", store.ReviewListParams{RunID: r2.ID}, []string{"r2/b"}},
		{"parked before", store.ReviewListParams{ParkedBefore: at(time.Minute)}, []string{"r2/b", "r3/a"}},
		{"parked before, inclusive of older", store.ReviewListParams{ParkedBefore: at(3 * time.Minute)}, []string{"r1/a", "r2/b", "r3/a"}},
		{"after", store.ReviewListParams{AfterStepID: all[0].StepID}, []string{"r2/b", "r3/a"}},
		{"limit", store.ReviewListParams{Limit: 1}, []string{"r1/a"}},
		{"combined", store.ReviewListParams{Workflow: defaultWorkflow, Reason: store.ReasonPermanentError, Entity: "order:1"}, []string{"r1/a"}},
		{"no match", store.ReviewListParams{Reason: "nope"}, nil},
	}
	for _, tc := range cases {
		var got []string
		for _, it := range h.reviewList(tc.p) {
			got = append(got, fmt.Sprintf("%s/%s", it.RunKey, it.StepName))
		}
		if !slices.Equal(got, tc.want) {
			h.t.Errorf("ReviewList %s (%+v) = %q, want %q", tc.name, tc.p, got, tc.want)
		}
	}
}

func (h *harness) reviewList(p store.ReviewListParams) []*store.ReviewItem {
	h.t.Helper()
	list, err := h.s.ReviewList(h.ctx, p)
	if err != nil {
		h.t.Fatalf("ReviewList(%+v): %v", p, err)
	}
	return list
}

func testReviewGet(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"))
	h.park(run, base, "a")
	it, err := h.s.ReviewGetByStep(h.ctx, run.ID, "a")
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "item state", it.State, store.StateNeedsReview)
	wantEqual(h.t, "item response status", it.ResponseStatus, 422)
	it, err = h.s.ReviewGetByStep(h.ctx, run.ID, "b")
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "a step not in review is returned with its state", it.State, store.StatePending)
	_, err = h.s.ReviewGetByStep(h.ctx, run.ID, "nope")
	h.wantErr("unknown step", err, store.ErrNotFound)
	_, err = h.s.ReviewGetByStep(h.ctx, run.ID+100, "a")
	h.wantErr("unknown run", err, store.ErrNotFound)
}

func testReviewRetry(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"))
	cs := h.park(run, base, "a")
	h.wantRunState(run.ID, store.StateNeedsReview)

	res, err := h.s.ReviewRetry(h.ctx, store.ReviewRetryParams{ReviewAction: action(run, "a", at(time.Hour))})
	if err != nil {
		h.t.Fatal(err)
	}
	a := h.wantStep(run.ID, "a", store.StateRetrying, 1, store.ReasonManualRetry)
	wantEqual(h.t, "attempt base after retry", a.AttemptBase, 1)
	wantEqual(h.t, "result step state", res.Step.State, store.StateRetrying)
	wantEqual(h.t, "result run state", res.RunState, store.StateRetrying)
	h.wantTime("retried step due", a.NextAt, at(time.Hour))
	h.wantRunState(run.ID, store.StateRetrying)
	d := h.wantReviewEvent(a, store.EventReviewRetried, store.ReasonManualRetry)
	if d["previous_reason"] != string(store.ReasonPermanentError) {
		h.t.Errorf("review.retried detail %v lacks the previous reason", d)
	}

	// The same action again is refused: the step is no longer in review.
	n := h.eventCount()
	_, err = h.s.ReviewRetry(h.ctx, store.ReviewRetryParams{ReviewAction: action(run, "a", at(time.Hour))})
	h.wantErr("second retry", err, store.ErrNotInReview)
	wantEqual(h.t, "events after a refused retry", h.eventCount(), n)

	// It is claimed again, as attempt 2, under its key.
	again := h.claimOne(at(time.Hour), "w2")
	wantEqual(h.t, "claimed step", again.Step.ID, cs.Step.ID)
	wantEqual(h.t, "claimed attempt", again.Step.Attempt, 2)
	wantEqual(h.t, "claimed attempt base", again.Step.AttemptBase, 1)
	h.mustRecord(succeed(again, at(time.Hour+time.Second), `{}`))
	h.mustRecord(succeed(h.claimOne(at(time.Hour+time.Second), "w2"), at(time.Hour+2*time.Second), `{}`))
	h.wantRunState(run.ID, store.StateCompleted)

	// Unknown run and step, and a step not in review.
	_, err = h.s.ReviewRetry(h.ctx, store.ReviewRetryParams{ReviewAction: action(run, "nope", at(time.Hour))})
	h.wantErr("unknown step", err, store.ErrNotFound)
	_, err = h.s.ReviewRetry(h.ctx, store.ReviewRetryParams{ReviewAction: store.ReviewAction{RunID: run.ID + 100, Step: "a", Actor: "alice", Now: at(time.Hour)}})
	h.wantErr("unknown run", err, store.ErrNotFound)
	_, err = h.s.ReviewRetry(h.ctx, store.ReviewRetryParams{ReviewAction: action(run, "b", at(time.Hour))})
	h.wantErr("completed step", err, store.ErrNotInReview)
}

// parkUnknown claims run's step a and parks it after an unknown outcome: its key stays held.
func (h *harness) parkUnknown(run *store.Run, now time.Time) *store.ClaimedStep {
	h.t.Helper()
	cs := h.claimOne(now, "w1")
	h.mustRecord(store.StepRecordParams{StepID: cs.Step.ID, Owner: "w1", Attempt: cs.Step.Attempt, Now: now.Add(time.Second),
		Outcome: store.OutcomeUnknown, Error: "connection reset after the request was sent",
		NextState: store.StateNeedsReview, Reason: store.ReasonOutcomeUnknown})
	return cs
}

func testReviewUnknown(h *harness) {
	h.sub("SendAgain", func(h *harness) {
		run := h.run("r1", step("a"), step("b", "a"))
		cs := h.parkUnknown(run, base)
		it, err := h.s.ReviewGetByStep(h.ctx, run.ID, "a")
		if err != nil {
			h.t.Fatal(err)
		}
		if !it.EffectMayExist() {
			h.t.Fatalf("EffectMayExist false for an item parked after an unknown outcome: %+v", it)
		}
		n := h.eventCount()
		_, err = h.s.ReviewRetry(h.ctx, store.ReviewRetryParams{ReviewAction: action(run, "a", at(time.Minute))})
		h.wantErr("retry without SendAgain", err, store.ErrEffectMayExist)
		_, err = h.s.ReviewAbandon(h.ctx, action(run, "a", at(time.Minute)))
		h.wantErr("abandon", err, store.ErrEffectMayExist)
		_, err = h.s.ReviewResolve(h.ctx, store.ReviewResolveParams{ReviewAction: action(run, "a", at(time.Minute))})
		h.wantErr("resolve without ItHappened", err, store.ErrEffectMayExist)
		_, err = h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Step: "a", Actor: "alice", Now: at(time.Minute)})
		h.wantErr("replay of the item", err, store.ErrEffectMayExist)
		_, err = h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Actor: "alice", Now: at(time.Minute)})
		h.wantErr("replay of the run (the item stays)", err, store.ErrNothingToReplay)
		wantEqual(h.t, "events after refused actions", h.eventCount(), n)
		h.wantStep(run.ID, "a", store.StateNeedsReview, 1, store.ReasonOutcomeUnknown)

		if _, err := h.s.ReviewRetry(h.ctx, store.ReviewRetryParams{ReviewAction: action(run, "a", at(time.Minute)), SendAgain: true}); err != nil {
			h.t.Fatal(err)
		}
		again := h.claimOne(at(time.Minute), "w2")
		wantEqual(h.t, "sent again under the same key", again.Step.EffectKey, cs.Step.EffectKey)
		wantEqual(h.t, "previous outcome seen by the new attempt", again.PreviousOutcome, store.OutcomeUnknown)
		d := h.wantReviewEvent(h.step(run.ID, "a"), store.EventReviewRetried, store.ReasonManualRetry)
		if d["send_again"] != true {
			h.t.Errorf("review.retried detail %v does not say send_again", d)
		}
	})
	h.sub("ItHappened", func(h *harness) {
		run := h.run("r1", step("a"), step("b", "a"))
		cs := h.parkUnknown(run, base)
		res, err := h.s.ReviewResolve(h.ctx, store.ReviewResolveParams{ReviewAction: action(run, "a", at(time.Minute)),
			Output: json.RawMessage(`{"id":77}`), ItHappened: true})
		if err != nil {
			h.t.Fatal(err)
		}
		wantEqual(h.t, "ledger", res.Ledger, store.LedgerCompleted)
		e := h.wantEffect(cs.Step.EffectKey, store.EffectCompleted, h.step(run.ID, "a"))
		h.wantJSON("ledger result", e.Result, `{"id":77}`)
		h.wantTime("ledger completed at", e.CompletedAt, at(time.Minute))
		d := h.wantReviewEvent(h.step(run.ID, "a"), store.EventReviewResolved, store.ReasonResolvedByHand)
		if d["it_happened"] != true || d["ledger"] != store.LedgerCompleted {
			h.t.Errorf("review.resolved detail %v", d)
		}
		// b runs next.
		b := h.claimOne(at(time.Minute), "w1")
		wantEqual(h.t, "released step", b.Step.Name, "b")
		h.wantJSON("output seen by b", b.Outputs["a"], `{"id":77}`)
	})
}

func testReviewResolve(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"), step("c", "b"))
	h.park(run, base, "a")
	// a's key was released when the destination refused.
	h.wantNoEffect(keyOf(run, "a"))
	res, err := h.s.ReviewResolve(h.ctx, store.ReviewResolveParams{ReviewAction: action(run, "a", at(time.Hour)), Output: json.RawMessage(`{"id":77}`)})
	if err != nil {
		h.t.Fatal(err)
	}
	a := h.wantStep(run.ID, "a", store.StateCompleted, 1, store.ReasonResolvedByHand)
	h.wantJSON("resolved output", a.Output, `{"id":77}`)
	wantEqual(h.t, "ledger", res.Ledger, store.LedgerCompleted)
	wantEqual(h.t, "result run state", res.RunState, store.StateProcessing)
	e := h.wantEffect(keyOf(run, "a"), store.EffectCompleted, a)
	h.wantJSON("ledger result", e.Result, `{"id":77}`)
	d := h.wantReviewEvent(a, store.EventReviewResolved, store.ReasonResolvedByHand)
	if d["ledger"] != store.LedgerCompleted || d["previous_reason"] != string(store.ReasonPermanentError) {
		h.t.Errorf("review.resolved detail %v", d)
	}
	if _, ok := d["output"]; ok {
		h.t.Errorf("review.resolved detail %v carries the output; it belongs in the step and the ledger", d)
	}
	h.wantRunState(run.ID, store.StateProcessing)

	// The dependent step is released.
	b := h.claimOne(at(time.Hour), "w1")
	wantEqual(h.t, "released step", b.Step.Name, "b")
	h.wantJSON("output seen by b", b.Outputs["a"], `{"id":77}`)

	// Another run with the same key reuses the hand-made result.
	other := h.runWithKeys("r2", at(time.Hour), map[string]string{"x": keyOf(run, "a")}, step("x"))
	res2 := h.claim(store.StepClaimParams{Now: at(time.Hour)})
	h.wantClaimed(res2, 1, 0, 0)
	x := h.wantStep(other.ID, "x", store.StateCompleted, 0, store.ReasonEffectReused)
	h.wantJSON("reused output", x.Output, `{"id":77}`)
}

func testReviewResolveKept(h *harness) {
	// r1 completes key K with fingerprint f1; r2 asks for K with f2 and is parked
	// (key_conflict); resolving r2 by hand keeps r1's row.
	r1 := h.runWithKeys("r1", base, map[string]string{"a": "K", "a.fp": "f1"}, step("a"))
	h.mustRecord(succeed(h.claimOne(base, "w1"), at(time.Second), `{"id":1}`))
	r2 := h.runWithKeys("r2", at(time.Minute), map[string]string{"a": "K", "a.fp": "f2"}, step("a"), step("b", "a"))
	res := h.claim(store.StepClaimParams{Now: at(time.Minute)})
	h.wantClaimed(res, 0, 1, 0)
	h.wantStep(r2.ID, "a", store.StateNeedsReview, 0, store.ReasonKeyConflict)

	out, err := h.s.ReviewResolve(h.ctx, store.ReviewResolveParams{ReviewAction: action(r2, "a", at(time.Hour))})
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "ledger", out.Ledger, store.LedgerKept)
	a := h.wantStep(r2.ID, "a", store.StateCompleted, 0, store.ReasonResolvedByHand)
	h.wantJSON("output taken from the ledger", a.Output, `{"id":1}`)
	e := h.wantEffect("K", store.EffectCompleted, h.step(r1.ID, "a"))
	wantEqual(h.t, "ledger fingerprint kept", e.Fingerprint, "f1")
	h.wantTime("ledger completed at kept", e.CompletedAt, at(time.Second))
}

func testReviewResolveInFlight(h *harness) {
	r1 := h.runWithKeys("r1", base, map[string]string{"a": "K"}, step("a"))
	h.park(r1, base, "a")
	// Another run now holds K in flight.
	r2 := h.runWithKeys("r2", at(time.Minute), map[string]string{"a": "K"}, step("a"))
	cs := h.claimOne(at(time.Minute), "w2")
	wantEqual(h.t, "holder", cs.Step.RunID, r2.ID)
	n := h.eventCount()
	_, err := h.s.ReviewResolve(h.ctx, store.ReviewResolveParams{ReviewAction: action(r1, "a", at(time.Hour))})
	h.wantErr("resolve while the key is in flight elsewhere", err, store.ErrReviewConflict)
	wantEqual(h.t, "events after a refused resolve", h.eventCount(), n)
	h.wantStep(r1.ID, "a", store.StateNeedsReview, 1, store.ReasonPermanentError)
	h.wantEffect("K", store.EffectInFlight, cs.Step)
}

func testReviewAbandon(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"), step("c", "b"), step("d"))
	res := h.claim(store.StepClaimParams{Now: base})
	h.mustRecord(giveUp(res.Claimed[0], at(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError),
		succeed(res.Claimed[1], at(time.Second), `{}`))
	h.wantRunState(run.ID, store.StateNeedsReview)
	out, err := h.s.ReviewAbandon(h.ctx, action(run, "a", at(time.Hour)))
	if err != nil {
		h.t.Fatal(err)
	}
	a := h.wantStep(run.ID, "a", store.StateFailed, 1, store.ReasonAbandoned)
	h.wantStep(run.ID, "b", store.StateCancelled, 0, store.ReasonDependencyFailed)
	h.wantStep(run.ID, "c", store.StateCancelled, 0, store.ReasonDependencyFailed)
	h.wantStep(run.ID, "d", store.StateCompleted, 1, "")
	wantEqual(h.t, "result run state", out.RunState, store.StateFailed)
	h.wantRunState(run.ID, store.StateFailed)
	h.wantReviewEvent(a, store.EventReviewAbandoned, store.ReasonAbandoned)
	changes := ofType(h.runEvents(run.ID), store.EventRunStateChanged)
	wantEqual(h.t, "actor of the run's last state change", h.last("run.state_changed events", changes, 1)[0].Actor, "alice")
	_, err = h.s.ReviewAbandon(h.ctx, action(run, "a", at(time.Hour)))
	h.wantErr("abandon twice", err, store.ErrNotInReview)
}

// chain inserts a run of a → b → c → d whose input is in, and runs it until c is parked.
func (h *harness) chain(key string, in string) *store.Run {
	h.t.Helper()
	run := h.newRun(store.RunInsertParams{RunKey: key, Entity: "order:" + key, Input: json.RawMessage(in),
		Steps: []store.StepInsert{step("a"), step("b", "a"), step("c", "b"), step("d", "c")}})
	h.mustRecord(succeed(h.claimOne(base, "w1"), at(time.Second), `{"id":"A"}`))
	h.mustRecord(succeed(h.claimOne(at(time.Second), "w1"), at(2*time.Second), `{"id":"B"}`))
	h.park(run, at(2*time.Second), "c")
	return run
}

func testReplayCorrect(h *harness) {
	run := h.chain("1001", `{"email":"bad"}`)
	h.wantRunState(run.ID, store.StateNeedsReview)
	before := h.steps(run.ID)

	res, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Step: "c", Input: json.RawMessage(`{"email":"ada@example.com"}`),
		BaseInput: json.RawMessage(`{"email":"bad"}`), Entity: "order:1001-fixed", Diff: json.RawMessage(`{"email":"ada@example.com"}`),
		Actor: "alice", Note: "checked with the customer", Now: at(time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "revision", res.Revision, 1)
	wantEqual(h.t, "run state after replay", res.Run.State, store.StateProcessing)
	h.wantJSON("run input after replay", res.Run.Input, `{"email":"ada@example.com"}`)
	wantEqual(h.t, "run entity after replay", res.Run.Entity, "order:1001-fixed")
	wantEqual(h.t, "input hash kept", res.Run.InputHash, run.InputHash)
	if len(res.Reset) != 1 || res.Reset[0].Name != "c" {
		h.t.Fatalf("reset %+v, want step c", res.Reset)
	}
	// Completed steps are untouched.
	for _, name := range []string{"a", "b"} {
		s := h.step(run.ID, name)
		if s.State != store.StateCompleted || !s.UpdatedAt.Equal(before[name].UpdatedAt) || s.Attempt != 1 {
			h.t.Errorf("completed step %s changed: %+v", name, s)
		}
	}
	c := h.wantStep(run.ID, "c", store.StatePending, 1, store.ReasonReplay)
	wantEqual(h.t, "reset step waiting", c.Waiting, 0)
	wantEqual(h.t, "reset step attempt base", c.AttemptBase, 1)
	h.wantTime("reset step due", c.NextAt, at(time.Hour))
	d := h.wantStep(run.ID, "d", store.StatePending, 0, "")
	wantEqual(h.t, "dependent still waiting", d.Waiting, 1)

	revs, err := h.s.RunRevisionList(h.ctx, run.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(revs) != 1 {
		h.t.Fatalf("%d revisions, want 1", len(revs))
	}
	rv := revs[0]
	wantEqual(h.t, "revision number", rv.Revision, 1)
	h.wantJSON("revision input before", rv.InputBefore, `{"email":"bad"}`)
	h.wantJSON("revision input after", rv.InputAfter, `{"email":"ada@example.com"}`)
	h.wantJSON("revision diff", rv.Diff, `{"email":"ada@example.com"}`)
	wantEqual(h.t, "revision entity before", rv.EntityBefore, "order:1001")
	wantEqual(h.t, "revision entity after", rv.EntityAfter, "order:1001-fixed")
	wantEqual(h.t, "revision actor", rv.Actor, "alice")
	wantEqual(h.t, "revision note", rv.Note, "checked with the customer")
	h.wantTime("revision at", rv.At, at(time.Hour))

	evs := h.runEvents(run.ID)
	corrected := h.only(evs, store.EventRunInputCorrected)
	cd := h.detailOf(corrected)
	if corrected.Actor != "alice" || fmt.Sprint(cd["revision"]) != "1" || fmt.Sprint(cd["fields"]) != "[email]" || cd["note"] != "checked with the customer" ||
		cd["entity_after"] != "order:1001-fixed" {
		h.t.Errorf("run.input_corrected = actor %q detail %v", corrected.Actor, cd)
	}
	if strings.Contains(string(corrected.Detail), "ada@example.com") {
		h.t.Errorf("run.input_corrected detail carries the corrected values: %s", corrected.Detail)
	}
	h.wantReviewEvent(c, store.EventReviewReplayed, store.ReasonReplay)

	// The replayed step is claimed again and, with its dependent, completes the run.
	cs := h.claimOne(at(time.Hour), "w1")
	wantEqual(h.t, "claimed after replay", cs.Step.Name, "c")
	h.wantJSON("claim sees the corrected input", cs.Run.Input, `{"email":"ada@example.com"}`)
	h.mustRecord(succeed(cs, at(time.Hour+time.Second), `{}`))
	h.mustRecord(succeed(h.claimOne(at(time.Hour+time.Second), "w1"), at(time.Hour+2*time.Second), `{}`))
	h.wantRunState(run.ID, store.StateCompleted)

	// A second correction is revision 2.
	run2 := h.chain("1002", `{"email":"bad"}`)
	for i, email := range []string{"x", "y"} {
		prev := h.getRun(run2.ID)
		in := json.RawMessage(fmt.Sprintf(`{"email":%q}`, email))
		if i == 1 {
			// Park c again so that there is something to replay.
			h.park(run2, at(2*time.Hour), "c")
		}
		res, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run2.ID, Input: in, BaseInput: prev.Input, Entity: prev.Entity, Diff: in,
			Actor: "alice", Now: at(time.Hour)})
		if err != nil {
			h.t.Fatal(err)
		}
		wantEqual(h.t, "revision", res.Revision, i+1)
	}
}

func testReplayCancelled(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"), step("c", "b"), step("d"))
	res := h.claim(store.StepClaimParams{Now: base})
	h.mustRecord(giveUp(res.Claimed[0], at(time.Second), store.OutcomePermanent, store.StateFailed, store.ReasonPermanentError),
		succeed(res.Claimed[1], at(time.Second), `{}`))
	h.wantRunState(run.ID, store.StateFailed)
	h.wantStep(run.ID, "c", store.StateCancelled, 0, store.ReasonDependencyFailed)

	out, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Actor: "alice", Note: "checked with the customer", Now: at(time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "revision without a correction", out.Revision, 0)
	var names []string
	for _, s := range out.Reset {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		h.t.Errorf("reset %q, want a, b, c", names)
	}
	a := h.wantStep(run.ID, "a", store.StatePending, 1, store.ReasonReplay)
	wantEqual(h.t, "a waiting", a.Waiting, 0)
	b := h.wantStep(run.ID, "b", store.StatePending, 0, store.ReasonReplay)
	wantEqual(h.t, "b waiting", b.Waiting, 1)
	c := h.wantStep(run.ID, "c", store.StatePending, 0, store.ReasonReplay)
	wantEqual(h.t, "c waiting", c.Waiting, 1)
	h.wantRunState(run.ID, store.StateProcessing)
	h.wantTypes("events of the run", ofType(h.runEvents(run.ID), store.EventRunInputCorrected))
	if d := h.detailOf(h.only(h.stepEvents(c), store.EventReviewReplayed)); d["previous_state"] != string(store.StateCancelled) {
		h.t.Errorf("review.replayed of c: detail %v", d)
	}
	// a, b and c run in order.
	for i, name := range []string{"a", "b", "c"} {
		cs := h.claimOne(at(time.Hour+time.Duration(i)*time.Second), "w1")
		wantEqual(h.t, "claimed", cs.Step.Name, name)
		h.mustRecord(succeed(cs, at(time.Hour+time.Duration(i)*time.Second), `{}`))
	}
	h.wantRunState(run.ID, store.StateCompleted)
}

func testReplaySkipped(h *harness) {
	// c needs a and b. b fails first (c is cancelled), then a ends skipped (c stays
	// cancelled). A replay resets b and c; c, needing a skipped step, is skipped.
	run := h.run("r1", step("a"), step("b"), step("c", "a", "b"))
	res := h.claim(store.StepClaimParams{Now: base})
	h.mustRecord(giveUp(res.Claimed[1], at(time.Second), store.OutcomePermanent, store.StateFailed, store.ReasonPermanentError))
	skip := succeed(res.Claimed[0], at(2*time.Second), "")
	skip.NextState, skip.Reason, skip.Output = store.StateSkipped, store.ReasonTransitionInvalid, nil
	h.mustRecord(skip)
	h.wantStep(run.ID, "c", store.StateCancelled, 0, store.ReasonDependencyFailed)

	if _, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Actor: "alice", Now: at(time.Hour)}); err != nil {
		h.t.Fatal(err)
	}
	h.wantStep(run.ID, "b", store.StatePending, 1, store.ReasonReplay)
	h.wantStep(run.ID, "c", store.StateSkipped, 0, store.ReasonDependencySkipped)
	h.mustRecord(succeed(h.claimOne(at(time.Hour), "w1"), at(time.Hour), `{}`))
	h.wantRunState(run.ID, store.StateCompleted)
}

func testReplayRefusals(h *harness) {
	run := h.chain("1001", `{"email":"bad"}`)
	n := h.eventCount()
	nothing := func(what string, p store.RunReplayParams, target error) {
		h.t.Helper()
		if p.Actor == "" {
			p.Actor = "alice"
		}
		p.Now = at(time.Hour)
		_, err := h.s.RunReplay(h.ctx, p)
		h.wantErr(what, err, target)
		wantEqual(h.t, "events after "+what, h.eventCount(), n)
		h.wantJSON("input after "+what, h.getRun(run.ID).Input, `{"email":"bad"}`)
		h.wantStep(run.ID, "c", store.StateNeedsReview, 1, store.ReasonPermanentError)
	}
	nothing("unknown run", store.RunReplayParams{RunID: run.ID + 100}, store.ErrNotFound)
	nothing("unknown step", store.RunReplayParams{RunID: run.ID, Step: "nope"}, store.ErrNotFound)
	nothing("step not in review", store.RunReplayParams{RunID: run.ID, Step: "a"}, store.ErrNotInReview)
	nothing("stale base input", store.RunReplayParams{RunID: run.ID, Input: json.RawMessage(`{"email":"x"}`), BaseInput: json.RawMessage(`{"email":"old"}`),
		Diff: json.RawMessage(`{"email":"x"}`)}, store.ErrReviewConflict)
	if revs, err := h.s.RunRevisionList(h.ctx, run.ID); err != nil || len(revs) != 0 {
		h.t.Errorf("revisions after refusals: %d, %v", len(revs), err)
	}

	// A run with nothing to replay.
	done := h.run("done", step("a"))
	h.mustRecord(succeed(h.claimOne(at(time.Minute), "w1"), at(time.Minute), `{}`))
	_, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: done.ID, Actor: "alice", Now: at(time.Hour)})
	h.wantErr("completed run", err, store.ErrNothingToReplay)

	// A run with a step processing.
	busy := h.run("busy", step("a"), step("b"))
	res := h.claim(store.StepClaimParams{Now: at(2 * time.Minute)})
	h.mustRecord(giveUp(res.Claimed[0], at(2*time.Minute), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	_, err = h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: busy.ID, Actor: "alice", Now: at(time.Hour)})
	h.wantErr("run with a step processing", err, store.ErrReviewConflict)
	h.wantStep(busy.ID, "a", store.StateNeedsReview, 1, store.ReasonPermanentError)
}

func testEventTimeRange(h *harness) {
	r1 := h.newRun(store.RunInsertParams{RunKey: "r1", Entity: "lead:1", Steps: []store.StepInsert{step("a")}})
	r2 := h.newRun(store.RunInsertParams{RunKey: "r2", Entity: "lead:2", Now: at(time.Minute), Steps: []store.StepInsert{step("a")}})
	h.mustRecord(succeed(h.claimOne(at(2*time.Minute), "w1"), at(3*time.Minute), `{}`))
	h.mustRecord(succeed(h.claimOne(at(4*time.Minute), "w1"), at(5*time.Minute), `{}`))
	all := h.events(store.EventListParams{})
	within := func(since, until time.Time, run int64) []int64 {
		var out []int64
		for _, e := range all {
			if (since.IsZero() || !e.At.Before(since)) && (until.IsZero() || e.At.Before(until)) && (run == 0 || e.RunID == run) {
				out = append(out, e.ID)
			}
		}
		return out
	}
	cases := []struct {
		name         string
		since, until time.Time
		run          int64
	}{
		{"since", at(time.Minute), time.Time{}, 0},
		{"until (exclusive)", time.Time{}, at(3 * time.Minute), 0},
		{"since and until", at(2 * time.Minute), at(4 * time.Minute), 0},
		{"at an event's instant", at(3 * time.Minute), at(3*time.Minute + time.Microsecond), 0},
		{"with a run", at(time.Minute), time.Time{}, r2.ID},
		{"empty range", at(time.Hour), time.Time{}, 0},
	}
	for _, tc := range cases {
		var got []int64
		for _, e := range h.events(store.EventListParams{Since: tc.since, Until: tc.until, RunID: tc.run}) {
			got = append(got, e.ID)
		}
		if want := within(tc.since, tc.until, tc.run); !slices.Equal(got, want) {
			h.t.Errorf("EventList %s = %v, want %v", tc.name, got, want)
		}
	}
	if len(within(at(3*time.Minute), at(3*time.Minute+time.Microsecond), 0)) == 0 {
		h.t.Error("no event at +3m: the test does not test the bounds")
	}
	_ = r1
}

// An action that names the version of the item it was decided on is refused with
// ErrItemChanged, writing nothing, once the item has changed (here: retried and parked
// again); the version a review item shows is the version of its step.
func testReviewVersion(h *harness) {
	run := h.run("r1", step("a"))
	h.park(run, base, "a")
	it, err := h.s.ReviewGetByStep(h.ctx, run.ID, "a")
	if err != nil {
		h.t.Fatal(err)
	}
	first := it.Version()
	wantEqual(h.t, "the version of the item and of its step", first, store.StepVersion(h.step(run.ID, "a")))
	retry := store.ReviewRetryParams{ReviewAction: action(run, "a", at(time.Minute))}
	retry.Version = first
	if _, err := h.s.ReviewRetry(h.ctx, retry); err != nil {
		h.t.Fatalf("retry of the item as shown: %v", err)
	}
	h.park(run, at(2*time.Minute), "a")
	second := store.StepVersion(h.step(run.ID, "a"))
	if second == first {
		h.t.Fatalf("the item parked again keeps its version %s", first)
	}
	events := h.eventCount()
	stale := action(run, "a", at(time.Hour))
	stale.Version = first
	_, err = h.s.ReviewAbandon(h.ctx, stale)
	h.wantErr("abandon of the item as it was", err, store.ErrItemChanged)
	_, err = h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Step: "a", Actor: "alice", Now: at(time.Hour),
		StepVersions: map[string]string{"a": first}})
	h.wantErr("replay of the item as it was", err, store.ErrItemChanged)
	h.wantStep(run.ID, "a", store.StateNeedsReview, 2, store.ReasonPermanentError)
	wantEqual(h.t, "events after the refusals", h.eventCount(), events)
	stale.Version = second
	if _, err := h.s.ReviewAbandon(h.ctx, stale); err != nil {
		h.t.Fatalf("abandon of the item as it is: %v", err)
	}
	h.wantStep(run.ID, "a", store.StateFailed, 2, store.ReasonAbandoned)
}
