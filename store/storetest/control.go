package storetest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/onceflow/onceflow/store"
)

var controlTests = []subtest{
	{"CancelRun", testCancelRun},
	{"CancelledAttemptKeepsWhatHappened", testCancelledAttempt},
	{"CancelRefusals", testCancelRefusals},
	{"CancelledRunningStepIsReaped", testCancelledReaped},
	{"PauseAndResume", testPauseResume},
}

// cancel cancels run as alice at now.
func (h *harness) cancel(run *store.Run, now time.Time) *store.RunCancelResult {
	h.t.Helper()
	res, err := h.s.RunCancel(h.ctx, store.RunCancelParams{RunID: run.ID, Actor: "alice", Note: "customer withdrew the order", Now: now})
	if err != nil {
		h.t.Fatalf("RunCancel(%d): %v", run.ID, err)
	}
	return res
}

func names(steps []*store.Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// A cancel turns every step that has not finished into cancelled, at once and with the
// actor and note in the audit trail: pending, retrying and waiting for review, and the
// processing one, whose worker keeps its lease so that the attempt is recorded when it
// ends. Keys whose effect cannot have happened are released; the others stay held.
func testCancelRun(h *harness) {
	run := h.run("r1", step("a"), step("b", "a"), step("c"), step("d"), step("e"))
	res := h.claim(store.StepClaimParams{Now: at(0)})
	claimed := map[string]*store.ClaimedStep{}
	for _, cs := range res.Claimed {
		claimed[cs.Step.Name] = cs
	}
	if len(claimed) != 4 {
		h.t.Fatalf("claimed %v, want a, c, d, e", names(stepsOf(res.Claimed)))
	}
	unknown := giveUp(claimed["c"], at(time.Second), store.OutcomeUnknown, store.StateRetrying, store.ReasonOutcomeUnknown)
	unknown.NextAt = at(time.Hour)
	h.mustRecord(
		unknown, // c: its effect may exist; the key stays held
		giveUp(claimed["d"], at(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError),
		succeed(claimed["e"], at(time.Second), `{"done":true}`),
	)
	keyA, keyC := keyOf(run, "a"), keyOf(run, "c")

	got := h.cancel(run, at(2*time.Second))
	wantEqual(h.t, "cancelled", fmt.Sprint(names(got.Cancelled)), "[b c d]")
	wantEqual(h.t, "running", fmt.Sprint(names(got.Running)), "[a]")
	wantEqual(h.t, "run state in the result", got.Run.State, store.StateCancelled)
	h.wantRunState(run.ID, store.StateCancelled)
	for n, reason := range map[string]store.Reason{"a": store.ReasonCancelledEffectMayExist, "b": store.ReasonRunCancelled,
		"c": store.ReasonCancelledEffectMayExist, "d": store.ReasonRunCancelled} {
		if s := h.step(run.ID, n); s.State != store.StateCancelled || s.Reason != reason {
			h.t.Errorf("step %s: %s/%s, want cancelled/%s", n, s.State, s.Reason, reason)
		}
	}
	wantEqual(h.t, "completed step e", h.step(run.ID, "e").State, store.StateCompleted)
	h.wantEffect(keyA, store.EffectInFlight, h.step(run.ID, "a"))
	h.wantEffect(keyC, store.EffectInFlight, h.step(run.ID, "c"))

	e := h.only(h.runEvents(run.ID), store.EventRunCancelled)
	d := h.detailOf(e)
	if e.Actor != "alice" || d["note"] != "customer withdrew the order" || fmt.Sprint(d["cancelled"]) != "[b c d]" || fmt.Sprint(d["running"]) != "[a]" {
		h.t.Errorf("run.cancelled = actor %q detail %v", e.Actor, d)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		ev := h.only(h.stepEvents(h.step(run.ID, n)), store.EventStepCancelled)
		if ev.Actor != "alice" || ev.Reason != h.step(run.ID, n).Reason || h.detailOf(ev)["note"] != "customer withdrew the order" {
			h.t.Errorf("step.cancelled of %s: actor %q reason %q detail %s", n, ev.Actor, ev.Reason, ev.Detail)
		}
	}
	if d := h.detailOf(h.only(h.stepEvents(h.step(run.ID, "c")), store.EventStepCancelled)); d["key_held"] != true {
		h.t.Errorf("c's cancel does not say its key stays held: %v", d)
	}

	// Nothing of the run is claimed again; the running step's worker still holds its lease.
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(2 * time.Hour)}), 0, 0, 0)
	lost, err := h.s.StepHeartbeat(h.ctx, store.StepHeartbeatParams{Owner: defaultOwner, Now: at(3 * time.Second), LeaseFor: time.Minute,
		StepIDs: []int64{claimed["a"].Step.ID}})
	if err != nil || len(lost) != 0 {
		h.t.Errorf("heartbeat of the running, cancelled step: lost %v, %v", lost, err)
	}

	// A replay waits for the running attempt.
	_, err = h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Actor: "alice", Now: at(3 * time.Second)})
	h.wantErr("replay while a cancelled step's attempt runs", err, store.ErrReviewConflict)

	// The running attempt ends: it is recorded, the step stays cancelled.
	errs := h.record(succeed(claimed["a"], at(4*time.Second), `{"id":7}`))
	if !errors.Is(errs[0], store.ErrStepCancelled) {
		h.t.Fatalf("record of the running attempt = %v, want ErrStepCancelled", errs[0])
	}
	wantEqual(h.t, "step a after its attempt", h.step(run.ID, "a").State, store.StateCancelled)
	eff := h.wantEffect(keyA, store.EffectCompleted, h.step(run.ID, "a"))
	h.wantJSON("a's result in the ledger", eff.Result, `{"id":7}`)
	ev := h.only(h.stepEvents(h.step(run.ID, "a")), store.EventCancelledAttemptRecorded)
	if d := h.detailOf(ev); d["ledger"] != "completed" || d["outcome"] != "success" || ev.Attempt != 1 {
		h.t.Errorf("%s: attempt %d detail %v", ev.Type, ev.Attempt, d)
	}
	if n := len(ofType(h.runEvents(run.ID), store.EventLeaseLost)); n != 0 {
		h.t.Errorf("%d lease.lost events for a cancelled step's attempt", n)
	}
	var ended bool
	for _, a := range h.attempts(run.ID) {
		if a.StepID == claimed["a"].Step.ID {
			ended = a.Outcome == store.OutcomeSuccess && !a.EndedAt.IsZero()
		}
	}
	if !ended {
		h.t.Errorf("the running attempt was not closed with its outcome: %+v", h.attempts(run.ID))
	}
	h.wantRunState(run.ID, store.StateCancelled)
	if a := h.step(run.ID, "a"); a.LeaseOwner != "" || a.LastOutcome != store.OutcomeSuccess || a.Reason != store.ReasonRunCancelled {
		h.t.Errorf("step a after its attempt: lease owner %q, last outcome %q, reason %q", a.LeaseOwner, a.LastOutcome, a.Reason)
	}

	// A replay runs again what cannot have happened (b, d), reuses a's completed key, and
	// leaves c, whose outcome is unknown, cancelled with its key held.
	rep, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Actor: "alice", Now: at(5 * time.Second)})
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "replayed", fmt.Sprint(names(rep.Reset)), "[a b d]")
	wantEqual(h.t, "c after the replay", h.step(run.ID, "c").State, store.StateCancelled)
}

func stepsOf(cs []*store.ClaimedStep) []*store.Step {
	out := make([]*store.Step, len(cs))
	for i, c := range cs {
		out[i] = c.Step
	}
	return out
}

// The attempt of a cancelled step leaves the ledger as its outcome says: a refusal frees the
// key for others, an unknown outcome keeps it held.
func testCancelledAttempt(h *harness) {
	r1 := h.run("r1", step("a"))
	r2 := h.run("r2", step("a"))
	res := h.claim(store.StepClaimParams{Now: at(0)})
	if len(res.Claimed) != 2 {
		h.t.Fatalf("claimed %d, want 2", len(res.Claimed))
	}
	h.cancel(r1, at(time.Second))
	h.cancel(r2, at(time.Second))
	var refused, unknown *store.ClaimedStep
	for _, cs := range res.Claimed {
		if cs.Step.RunID == r1.ID {
			refused = cs
		} else {
			unknown = cs
		}
	}
	errs := h.record(retry(refused, at(2*time.Second), at(time.Minute)),
		giveUp(unknown, at(2*time.Second), store.OutcomeUnknown, store.StateRetrying, store.ReasonOutcomeUnknown))
	for i, err := range errs {
		if !errors.Is(err, store.ErrStepCancelled) {
			h.t.Errorf("entry %d: %v, want ErrStepCancelled", i, err)
		}
	}
	h.wantNoEffect(keyOf(r1, "a"))
	h.wantEffect(keyOf(r2, "a"), store.EffectInFlight, h.step(r2.ID, "a"))
	for _, tc := range []struct {
		run    *store.Run
		ledger string
	}{{r1, "released"}, {r2, "held"}} {
		d := h.detailOf(h.only(h.stepEvents(h.step(tc.run.ID, "a")), store.EventCancelledAttemptRecorded))
		wantEqual(h.t, "ledger", d["ledger"], any(tc.ledger))
		wantEqual(h.t, "state", h.step(tc.run.ID, "a").State, store.StateCancelled)
	}
	// A replay resets the refused one, not the one whose effect may exist.
	_, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: r2.ID, Actor: "alice", Now: at(3 * time.Second)})
	h.wantErr("replay of a step cancelled after an unknown outcome", err, store.ErrNothingToReplay)
	if _, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: r1.ID, Actor: "alice", Now: at(3 * time.Second)}); err != nil {
		h.t.Errorf("replay of a step cancelled after a refusal: %v", err)
	}
	// A record from a worker that is not the one running it is still a lost lease.
	h.wantLeaseLost(store.StepRecordParams{StepID: refused.Step.ID, Owner: "someone-else", Attempt: 1, Now: at(3 * time.Second),
		Outcome: store.OutcomeSuccess, NextState: store.StateCompleted})
}

func testCancelRefusals(h *harness) {
	run := h.run("r1", step("a"))
	h.mustRecord(succeed(h.claimOne(at(0), "w1"), at(time.Second), `{}`))
	_, err := h.s.RunCancel(h.ctx, store.RunCancelParams{RunID: run.ID, Actor: "alice", Now: at(2 * time.Second)})
	h.wantErr("cancel of a completed run", err, store.ErrRunFinished)
	h.wantRunState(run.ID, store.StateCompleted)
	_, err = h.s.RunCancel(h.ctx, store.RunCancelParams{RunID: run.ID + 100, Actor: "alice", Now: at(2 * time.Second)})
	h.wantErr("cancel of an unknown run", err, store.ErrNotFound)
	other := h.run("r2", step("a"))
	before := h.eventCount()
	if _, err := h.s.RunCancel(h.ctx, store.RunCancelParams{RunID: other.ID, Now: at(2 * time.Second)}); err == nil {
		h.t.Error("a cancel without an actor was accepted")
	}
	wantEqual(h.t, "events written by refused cancels", h.eventCount(), before)
	h.wantRunState(other.ID, store.StatePending)
}

// A pause is durable and idempotent, audited with actor and note; a resume ends it.
func testPauseResume(h *harness) {
	p := store.WorkflowPauseParams{Workflow: "orders", Actor: "alice", Note: "the CRM is down", Now: at(time.Minute)}
	for i, want := range []bool{true, false} {
		changed, err := h.s.WorkflowPause(h.ctx, p)
		if err != nil || changed != want {
			h.t.Fatalf("WorkflowPause #%d = %v, %v; want %v", i+1, changed, err, want)
		}
	}
	if _, err := h.s.WorkflowPause(h.ctx, store.WorkflowPauseParams{Workflow: "refunds", Actor: "bob", Now: at(2 * time.Minute)}); err != nil {
		h.t.Fatal(err)
	}
	list, err := h.s.WorkflowPauseList(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(list) != 2 || list[0].Workflow != "orders" || list[0].Actor != "alice" || list[0].Note != "the CRM is down" ||
		!list[0].Since.Equal(at(time.Minute)) || list[1].Workflow != "refunds" {
		h.t.Errorf("WorkflowPauseList = %+v", list)
	}
	p.Now, p.Note = at(time.Hour), "the CRM is back"
	for i, want := range []bool{true, false} {
		changed, err := h.s.WorkflowResume(h.ctx, p)
		if err != nil || changed != want {
			h.t.Fatalf("WorkflowResume #%d = %v, %v; want %v", i+1, changed, err, want)
		}
	}
	if list, err = h.s.WorkflowPauseList(h.ctx); err != nil || len(list) != 1 || list[0].Workflow != "refunds" {
		h.t.Errorf("after resume: %+v, %v", list, err)
	}
	var got []string
	for _, e := range h.events(store.EventListParams{Limit: 100}) {
		if e.Workflow == "orders" {
			got = append(got, string(e.Type)+" "+e.Actor+" "+fmt.Sprint(h.detailOf(e)["note"]))
		}
	}
	want := []string{"workflow.paused alice the CRM is down", "workflow.resumed alice the CRM is back"}
	if !slices.Equal(got, want) {
		h.t.Errorf("events %q, want %q", got, want)
	}
	if _, err := h.s.WorkflowPause(h.ctx, store.WorkflowPauseParams{Workflow: "orders", Now: at(0)}); err == nil {
		h.t.Error("a pause without an actor was accepted")
	}
}

// A step cancelled while its attempt ran, whose worker then vanished, is reaped like any
// other: the attempt ends with an unknown outcome, the lease ends, the step stays cancelled
// with its key held.
func testCancelledReaped(h *harness) {
	run := h.run("r1", step("a"))
	cs := h.claimOne(at(0), "w1")
	h.cancel(run, at(time.Second))
	n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(10 * time.Second), Limit: 10,
		Decide: func(*store.Step) store.ReapDecision {
			h.t.Fatal("Decide called for a cancelled step")
			return store.ReapDecision{}
		}})
	if err != nil || n != 0 {
		h.t.Fatalf("reap before the lease expired: %d, %v", n, err)
	}
	n, err = h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(time.Hour), Limit: 10,
		Decide: func(*store.Step) store.ReapDecision {
			h.t.Fatal("Decide called for a cancelled step")
			return store.ReapDecision{}
		}})
	if err != nil || n != 1 {
		h.t.Fatalf("reap of the vanished worker's cancelled step: %d, %v", n, err)
	}
	st := h.step(run.ID, "a")
	if st.State != store.StateCancelled || st.Reason != store.ReasonCancelledEffectMayExist || st.LeaseOwner != "" || st.LastOutcome != store.OutcomeUnknown {
		h.t.Errorf("step after the reap: %s/%s owner %q outcome %q", st.State, st.Reason, st.LeaseOwner, st.LastOutcome)
	}
	h.wantEffect(keyOf(run, "a"), store.EffectInFlight, st)
	atts := h.attempts(run.ID)
	if len(atts) != 1 || atts[0].Outcome != store.OutcomeUnknown || atts[0].EndedAt.IsZero() {
		h.t.Errorf("attempts %+v", atts)
	}
	ev := h.only(h.stepEvents(st), store.EventLeaseExpired)
	if h.detailOf(ev)["step_cancelled"] != true || ev.Actor != store.ActorReaper {
		h.t.Errorf("lease.expired %s by %s", ev.Detail, ev.Actor)
	}
	h.wantRunState(run.ID, store.StateCancelled)
	if n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(2 * time.Hour), Limit: 10,
		Decide: func(*store.Step) store.ReapDecision { return store.ReapDecision{} }}); err != nil || n != 0 {
		h.t.Errorf("second reap: %d, %v", n, err)
	}
	// The vanished worker's late success is still kept in the ledger.
	h.wantLeaseLost(succeed(cs, at(3*time.Hour), `{"late":true}`))
	h.wantEffect(keyOf(run, "a"), store.EffectCompleted, st)
}
