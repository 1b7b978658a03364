package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/onceflow/onceflow/store"
)

// The batch forms of the write path: one transaction for many items, one result per item.
// An item that conflicts, lost its lease or is invalid must not fail or roll back the
// others; a call that fails as a whole must commit nothing.

var batchTests = []subtest{
	{"StartMixed", testBatchStartMixed},
	{"StartRepeatsCreateNothing", testBatchStartRepeats},
	{"StartFailedCommitsNothing", testBatchStartFailed},
	{"GetByKey", testBatchGetByKey},
	{"ClaimMixed", testBatchClaimMixed},
	{"ClaimSharedKeys", testBatchClaimSharedKeys},
	{"StartEventsInOrder", testBatchStartEventsInOrder},
	{"RecordMixed", testBatchRecordMixed},
	{"RecordEveryKind", testBatchRecordEveryKind},
	{"SameTrailAsSingleItems", testBatchTrail},
	{"SameTrailParallelRoots", testBatchTrailParallelRoots},
}

// insertParams fills the harness's defaults into a RunInsertParams for RunInsertMany.
func insertParams(key string, steps ...store.StepInsert) store.RunInsertParams {
	return store.RunInsertParams{Workflow: defaultWorkflow, RunKey: key, Entity: "entity:" + key,
		Input: json.RawMessage(`{}`), InputHash: "hash-" + key, Actor: "test", Now: base, Steps: steps}
}

func testBatchStartMixed(h *harness) {
	old := h.run("old", step("a"))
	res, err := h.s.RunInsertMany(h.ctx, []store.RunInsertParams{
		insertParams("new-1", step("a"), step("b", "a")),
		insertParams("old", step("a")),                      // known before the batch
		insertParams("new-1", step("a"), step("b", "a")),    // repeated inside the batch
		insertParams("", step("a")),                         // invalid: no run key
		insertParams("new-2", step("a"), step("b", "nope")), // invalid: needs an unknown step
		insertParams("new-3", step("a")),
	})
	if err != nil {
		h.t.Fatalf("RunInsertMany: %v", err)
	}
	if len(res) != 6 {
		h.t.Fatalf("RunInsertMany returned %d results for 6 params", len(res))
	}
	for i, want := range []bool{true, false, false, false, false, true} {
		r := res[i]
		if (r.Err != nil) != (i == 3 || i == 4) {
			h.t.Errorf("result %d: error %v", i, r.Err)
		}
		if r.Err != nil {
			if r.Run != nil {
				h.t.Errorf("result %d: a run (%+v) with its error", i, r.Run)
			}
			continue
		}
		if r.Run == nil || r.Created != want {
			h.t.Errorf("result %d: run %+v created %v, want created %v", i, r.Run, r.Created, want)
		}
	}
	if res[1].Run.ID != old.ID {
		h.t.Errorf("known key: run %d, want %d", res[1].Run.ID, old.ID)
	}
	if res[2].Run.ID != res[0].Run.ID {
		h.t.Errorf("key repeated in the batch: run %d, want the first's %d", res[2].Run.ID, res[0].Run.ID)
	}
	if got := h.steps(res[0].Run.ID); len(got) != 2 || got["b"] == nil || got["b"].Waiting != 1 {
		h.t.Errorf("steps of new-1 = %v, want a and b (b waiting 1), once", got)
	}
	if got := h.steps(res[5].Run.ID); len(got) != 1 || got["a"].State != store.StatePending {
		h.t.Errorf("steps of new-3 = %v, want a pending", got)
	}
	if _, err := h.s.RunGetByKey(h.ctx, defaultWorkflow, "new-2"); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("the invalid param's run: RunGetByKey = %v, want ErrNotFound (nothing written)", err)
	}
	h.wantTypes("new-1", h.runEvents(res[0].Run.ID), store.EventRunCreated, store.EventRunDeduplicated)
	h.wantTypes("old", h.runEvents(old.ID), store.EventRunCreated, store.EventRunDeduplicated)
	h.wantTypes("new-3", h.runEvents(res[5].Run.ID), store.EventRunCreated)
	runs, err := h.s.RunList(h.ctx, store.RunListParams{})
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "runs", len(runs), 3)
}

// A Repeat param records the repeat of a key its caller found started: it is looked up
// after the batch's other params, never inserted, and one whose run is gone (a purge
// since the caller's read) gets ErrNotFound and writes nothing.
func testBatchStartRepeats(h *harness) {
	repeat := func(key string) store.RunInsertParams {
		p := insertParams(key, step("a"))
		p.Repeat = true
		return p
	}
	old := h.run("old", step("a"))
	res, err := h.s.RunInsertMany(h.ctx, []store.RunInsertParams{repeat("old"), repeat("gone"), repeat("made"), insertParams("made", step("a"))})
	if err != nil {
		h.t.Fatalf("RunInsertMany: %v", err)
	}
	if len(res) != 4 {
		h.t.Fatalf("RunInsertMany returned %d results for 4 params", len(res))
	}
	if r := res[0]; r.Err != nil || r.Created || r.Run == nil || r.Run.ID != old.ID {
		h.t.Errorf("the repeat of a known key: %+v, want run %d, not created", r, old.ID)
	}
	if r := res[1]; !errors.Is(r.Err, store.ErrNotFound) || r.Run != nil || r.Created {
		h.t.Errorf("the repeat of a key without a run: %+v, want ErrNotFound and no run", r)
	}
	made := res[3]
	if made.Err != nil || !made.Created || made.Run == nil {
		h.t.Fatalf("the start of a new key: %+v, want it created", made)
	}
	if r := res[2]; r.Err != nil || r.Created || r.Run == nil || r.Run.ID != made.Run.ID {
		h.t.Errorf("the repeat of the key the batch started: %+v, want run %d, not created", r, made.Run.ID)
	}
	if r, err := h.s.RunGetByKey(h.ctx, defaultWorkflow, "gone"); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("the repeated key without a run after the batch: %+v, %v; want none", r, err)
	}
	h.wantTypes("the known run", h.runEvents(old.ID), store.EventRunCreated, store.EventRunDeduplicated)
	h.wantTypes("the run the batch started", h.runEvents(made.Run.ID), store.EventRunCreated, store.EventRunDeduplicated)

	if _, _, err := h.s.RunInsert(h.ctx, repeat("gone")); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("RunInsert of a repeat without a run: %v, want ErrNotFound", err)
	}
	if bw, ok := h.s.(store.BatchWriter); ok {
		wb, err := bw.WriteBatch(h.ctx, store.WriteBatchParams{Starts: []store.RunInsertParams{repeat("gone"), repeat("old")}})
		if err != nil {
			h.t.Fatalf("WriteBatch: %v", err)
		}
		if r := wb.Starts[0]; !errors.Is(r.Err, store.ErrNotFound) || r.Run != nil {
			h.t.Errorf("WriteBatch: the repeat of a key without a run: %+v, want ErrNotFound", r)
		}
		if r := wb.Starts[1]; r.Err != nil || r.Created || r.Run == nil || r.Run.ID != old.ID {
			h.t.Errorf("WriteBatch: the repeat of a known key: %+v, want run %d", r, old.ID)
		}
	}
	if r, err := h.s.RunGetByKey(h.ctx, defaultWorkflow, "gone"); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("the repeated key without a run at the end: %+v, %v; want none", r, err)
	}
}

func testBatchStartFailed(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	res, err := h.s.RunInsertMany(ctx, []store.RunInsertParams{insertParams("a", step("a")), insertParams("b", step("a"))})
	if err == nil {
		h.t.Fatalf("RunInsertMany with a cancelled context = %+v, nil; want an error", res)
	}
	if res != nil {
		h.t.Errorf("RunInsertMany failed but returned results %+v", res)
	}
	for _, key := range []string{"a", "b"} {
		if _, err := h.s.RunGetByKey(h.ctx, defaultWorkflow, key); !errors.Is(err, store.ErrNotFound) {
			h.t.Errorf("run %s after a failed batch: %v, want ErrNotFound", key, err)
		}
	}
}

func testBatchGetByKey(h *harness) {
	run := h.run("k", step("a"))
	got, err := h.s.RunGetByKey(h.ctx, defaultWorkflow, "k")
	if err != nil {
		h.t.Fatalf("RunGetByKey: %v", err)
	}
	if got.ID != run.ID || got.InputHash != run.InputHash || got.RunKey != "k" || got.Entity != "entity:k" {
		h.t.Errorf("RunGetByKey = %+v, want %+v", got, run)
	}
	for _, k := range [][2]string{{defaultWorkflow, "other"}, {"other-workflow", "k"}} {
		if _, err := h.s.RunGetByKey(h.ctx, k[0], k[1]); !errors.Is(err, store.ErrNotFound) {
			h.t.Errorf("RunGetByKey(%s, %s) = %v, want ErrNotFound", k[0], k[1], err)
		}
	}
}

// testBatchClaimMixed: one claim meets a free key, a key completed with another request, a
// key completed with the same request and a key held in flight; each gets its own outcome.
func testBatchClaimMixed(h *harness) {
	done := h.runWithKeys("done", base, map[string]string{"a": "k-done", "a.fp": "fp1"}, step("a"))
	holder := h.runWithKeys("holder", base, map[string]string{"a": "k-held"}, step("a"))
	cs := h.claim(store.StepClaimParams{Limit: 2})
	if len(cs.Claimed) != 2 {
		h.t.Fatalf("setup claim: %d claimed, want 2", len(cs.Claimed))
	}
	for _, c := range cs.Claimed {
		if c.Run.ID == done.ID {
			h.mustRecord(succeed(c, at(time.Second), `{"n": 1}`))
		}
	}

	free := h.runWithKeys("free", at(time.Second), map[string]string{"a": "k-free"}, step("a"))
	conflict := h.runWithKeys("conflict", at(time.Second), map[string]string{"a": "k-done", "a.fp": "fp2"}, step("a"))
	reuse := h.runWithKeys("reuse", at(time.Second), map[string]string{"a": "k-done", "a.fp": "fp1"}, step("a"))
	wait := h.runWithKeys("wait", at(time.Second), map[string]string{"a": "k-held"}, step("a"))
	res := h.claim(store.StepClaimParams{Now: at(2 * time.Second)})
	h.wantClaimed(res, 1, 1, 1, h.step(free.ID, "a"))
	h.wantStep(free.ID, "a", store.StateProcessing, 1, "")
	h.wantStep(conflict.ID, "a", store.StateNeedsReview, 0, store.ReasonKeyConflict)
	h.wantStep(reuse.ID, "a", store.StateCompleted, 0, store.ReasonEffectReused)
	h.wantStep(wait.ID, "a", store.StatePending, 0, store.ReasonEffectInFlight)
	h.wantEffect("k-free", store.EffectInFlight, h.step(free.ID, "a"))
	h.wantEffect("k-held", store.EffectInFlight, h.step(holder.ID, "a"))
	h.wantTypes("conflict", h.runEvents(conflict.ID), store.EventRunCreated, store.EventEffectConflict,
		store.EventStepNeedsReview, store.EventRunStateChanged)
	h.wantTypes("reuse", h.runEvents(reuse.ID), store.EventRunCreated, store.EventEffectReused,
		store.EventStepCompleted, store.EventRunStateChanged)
	h.wantTypes("wait", h.runEvents(wait.ID), store.EventRunCreated, store.EventEffectWaiting)
}

// testBatchClaimSharedKeys: one claim whose candidates share effect keys decides each as
// if it were claimed alone, in candidate order: of two new steps with one new key, the
// first takes it and the second waits for it; a key completed in the ledger is reused
// (twice), one held in flight elsewhere makes its step wait, and two due steps of one run
// are both decided.
func testBatchClaimSharedKeys(h *harness) {
	done := h.runWithKeys("done", base, map[string]string{"send": "k-done", "send.fp": "fp"}, step("send"))
	h.mustRecord(succeed(h.claimOne(base, "w0"), at(time.Second), `{"n": 1}`))
	holder := h.runWithKeys("holder", at(time.Second), map[string]string{"send": "k-held"}, step("send"))
	h.claimOne(at(time.Second), "w0")

	now := at(2 * time.Second)
	first := h.runWithKeys("first", now, map[string]string{"send": "k-new"}, step("send"))
	second := h.runWithKeys("second", now, map[string]string{"send": "k-new"}, step("send"))
	reuse := h.runWithKeys("reuse", now, map[string]string{"send": "k-done", "send.fp": "fp"}, step("send"), step("after", "send"))
	wait := h.runWithKeys("wait", now, map[string]string{"send": "k-held"}, step("send"))
	// Two steps of one run: a reuses k-done, b (a key of its own) is taken afterwards.
	both := h.runWithKeys("both", now, map[string]string{"a": "k-done", "a.fp": "fp"}, step("a"), step("b"), step("c", "a", "b"))

	res := h.claim(store.StepClaimParams{Now: now, Owner: "w1"})
	h.wantClaimed(res, 2, 0, 2, h.step(first.ID, "send"), h.step(both.ID, "b"))
	h.wantStep(first.ID, "send", store.StateProcessing, 1, "")
	h.wantStep(second.ID, "send", store.StatePending, 0, store.ReasonEffectInFlight)
	h.wantStep(reuse.ID, "send", store.StateCompleted, 0, store.ReasonEffectReused)
	h.wantStep(wait.ID, "send", store.StatePending, 0, store.ReasonEffectInFlight)
	h.wantStep(both.ID, "a", store.StateCompleted, 0, store.ReasonEffectReused)
	h.wantStep(both.ID, "b", store.StateProcessing, 1, "")
	h.wantEffect("k-new", store.EffectInFlight, h.step(first.ID, "send"))
	h.wantEffect("k-held", store.EffectInFlight, h.step(holder.ID, "send"))
	h.wantEffect("k-done", store.EffectCompleted, h.step(done.ID, "send"))
	wantEqual(h.t, "waiting count of reuse/after", h.step(reuse.ID, "after").Waiting, 0)
	wantEqual(h.t, "waiting count of both/c", h.step(both.ID, "c").Waiting, 1)

	for _, tc := range []struct {
		run    *store.Run
		holder *store.Run
	}{{second, first}, {wait, holder}} {
		e := h.only(h.runEvents(tc.run.ID), store.EventEffectWaiting)
		if got := h.detailOf(e)["held_by_run"]; fmt.Sprint(got) != fmt.Sprint(tc.holder.ID) {
			h.t.Errorf("run %s waits: held_by_run = %v, want %d", tc.run.RunKey, got, tc.holder.ID)
		}
	}
	h.wantTypes("first", h.runEvents(first.ID), store.EventRunCreated, store.EventStepClaimed, store.EventRunStateChanged)
	h.wantTypes("second", h.runEvents(second.ID), store.EventRunCreated, store.EventEffectWaiting)
	h.wantTypes("reuse", h.runEvents(reuse.ID), store.EventRunCreated, store.EventEffectReused, store.EventStepCompleted,
		store.EventRunStateChanged)
	h.wantTypes("wait", h.runEvents(wait.ID), store.EventRunCreated, store.EventEffectWaiting)
	h.wantTypes("both", h.runEvents(both.ID), store.EventRunCreated, store.EventEffectReused, store.EventStepCompleted,
		store.EventRunStateChanged, store.EventStepClaimed)

	// The claim's events follow its candidates' order.
	var order []int64
	for _, e := range h.events(store.EventListParams{Since: now}) {
		if e.Type != store.EventRunCreated && (len(order) == 0 || order[len(order)-1] != e.RunID) {
			order = append(order, e.RunID)
		}
	}
	if want := []int64{first.ID, second.ID, reuse.ID, wait.ID, both.ID}; !slices.Equal(order, want) {
		h.t.Errorf("runs in the order of the claim's events = %v, want %v", order, want)
	}
}

// testBatchStartEventsInOrder: a batch of starts with a key known before it and a key
// repeated in it appends one event per start, in the batch's order, and gives the new runs
// and their steps IDs in that order.
func testBatchStartEventsInOrder(h *harness) {
	old := h.run("old", step("a"))
	now := at(time.Second)
	ps := []store.RunInsertParams{
		insertParams("new-1", step("a"), step("b", "a")),
		insertParams("old", step("a")),
		insertParams("new-1", step("a")),
		insertParams("new-2", step("a")),
	}
	for i := range ps {
		ps[i].Now = now
	}
	ps[2].InputHash = "other"
	res, err := h.s.RunInsertMany(h.ctx, ps)
	if err != nil {
		h.t.Fatalf("RunInsertMany: %v", err)
	}
	for i, want := range []bool{true, false, false, true} {
		if r := res[i]; r.Err != nil || r.Run == nil || r.Created != want {
			h.t.Fatalf("result %d: %+v, want created %v", i, r, want)
		}
	}
	wantEqual(h.t, "run of the known key", res[1].Run.ID, old.ID)
	wantEqual(h.t, "run of the repeated key", res[2].Run.ID, res[0].Run.ID)
	if res[3].Run.ID <= res[0].Run.ID {
		h.t.Errorf("new runs' IDs %d, %d: want them in the batch's order", res[0].Run.ID, res[3].Run.ID)
	}
	s1, s2 := h.steps(res[0].Run.ID), h.steps(res[3].Run.ID)
	if len(s1) != 2 || len(s2) != 1 || s1["a"].ID >= s1["b"].ID || s1["b"].ID >= s2["a"].ID {
		h.t.Errorf("steps of new-1 %v and new-2 %v: want a and b of new-1, then a of new-2", s1, s2)
	}
	evs := h.events(store.EventListParams{Since: now})
	h.wantTypes("the batch", evs, store.EventRunCreated, store.EventRunDeduplicated, store.EventRunDeduplicated, store.EventRunCreated)
	for i, e := range evs {
		wantEqual(h.t, fmt.Sprintf("event %d run", i), e.RunID, res[i].Run.ID)
	}
	if d := h.detailOf(evs[1]); d["same_input"] != true {
		h.t.Errorf("known key, same input: detail %s", evs[1].Detail)
	}
	if d := h.detailOf(evs[2]); d["same_input"] != false {
		h.t.Errorf("repeated key, other input: detail %s", evs[2].Detail)
	}
}

// testBatchRecordMixed: one StepRecord call with a success, a record whose lease was lost,
// an invalid entry and a retry applies the valid ones and reports the others.
func testBatchRecordMixed(h *harness) {
	r1 := h.run("r1", step("a"), step("b", "a"))
	r2 := h.run("r2", step("a"))
	r3 := h.run("r3", step("a"))
	res := h.claim(store.StepClaimParams{})
	if len(res.Claimed) != 3 {
		h.t.Fatalf("claim: %d claimed, want 3", len(res.Claimed))
	}
	byRun := map[int64]*store.ClaimedStep{}
	for _, c := range res.Claimed {
		byRun[c.Run.ID] = c
	}
	// r2's lease expires and another worker takes it.
	if n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(45 * time.Second), Decide: retryAt(at(45 * time.Second))}); err != nil || n != 3 {
		h.t.Fatalf("StepReapExpired = %d, %v; want 3", n, err)
	}
	again := h.claim(store.StepClaimParams{Now: at(46 * time.Second), Owner: "w2"})
	if len(again.Claimed) != 3 {
		h.t.Fatalf("re-claim: %d claimed, want 3", len(again.Claimed))
	}
	for _, c := range again.Claimed {
		if c.Run.ID != r2.ID {
			byRun[c.Run.ID] = c // r1 and r3 are recorded by w2; r2 by w1, who lost it
		}
	}
	invalid := succeed(byRun[r3.ID], at(47*time.Second), `1`)
	invalid.NextState = store.StateProcessing
	errs := h.record(
		succeed(byRun[r1.ID], at(47*time.Second), `{"ok": true}`),
		succeed(byRun[r2.ID], at(47*time.Second), `"late"`),
		invalid,
		retry(byRun[r3.ID], at(47*time.Second), at(time.Hour)),
	)
	if errs[0] != nil || errs[3] != nil {
		h.t.Errorf("valid entries: %v, %v; want nil", errs[0], errs[3])
	}
	if !errors.Is(errs[1], store.ErrLeaseLost) {
		h.t.Errorf("lost lease entry: %v, want ErrLeaseLost", errs[1])
	}
	if errs[2] == nil || errors.Is(errs[2], store.ErrLeaseLost) {
		h.t.Errorf("invalid entry: %v, want its own error", errs[2])
	}
	h.wantStep(r1.ID, "a", store.StateCompleted, 2, "")
	if b := h.step(r1.ID, "b"); b.Waiting != 0 {
		h.t.Errorf("r1 b waiting %d, want 0 (released)", b.Waiting)
	}
	h.wantStep(r2.ID, "a", store.StateProcessing, 2, "")
	h.wantStep(r3.ID, "a", store.StateRetrying, 2, store.ReasonRetryableError)
	// The lost success is kept in the ledger so the effect is not repeated.
	h.wantEffect(keyOf(r2, "a"), store.EffectCompleted, h.step(r2.ID, "a"))
	evs := h.runEvents(r2.ID)
	if len(ofType(evs, store.EventLeaseLost)) != 1 || len(ofType(evs, store.EventLeaseLostRecorded)) != 1 {
		h.t.Errorf("r2 events %v, want one lease.lost and one lease.lost_result_kept", types(evs))
	}
}

// testBatchRecordEveryKind: one StepRecord call with every kind of record, in an order that
// mixes them: two steps of one run completed (their common dependent released by both), a
// record whose lease was lost (its success kept in the ledger), a failure that frees its key
// and cancels its dependent, a record of a step cancelled with its run, and one record
// given twice (the second finds its lease lost). Each gets its own result and leaves the
// rows one record at a time would.
func testBatchRecordEveryKind(h *harness) {
	// lost: claimed by w1, whose lease expires; w2 claims it again.
	lost := h.run("lost", step("a"))
	first := h.claimOne(base, "w1")
	if n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(45 * time.Second), Decide: retryAt(at(45 * time.Second))}); err != nil || n != 1 {
		h.t.Fatalf("StepReapExpired = %d, %v; want 1", n, err)
	}
	h.claimOne(at(46*time.Second), "w2")

	join := h.run("join", step("a"), step("b"), step("c", "a", "b"))
	fail := h.run("fail", step("a"), step("b", "a"))
	cancel := h.run("cancel", step("a"))
	dup := h.run("dup", step("a"))
	res := h.claim(store.StepClaimParams{Now: at(46 * time.Second)})
	claimed := map[string]*store.ClaimedStep{}
	for _, c := range res.Claimed {
		claimed[h.getRun(c.Run.ID).RunKey+"/"+c.Step.Name] = c
	}
	if len(claimed) != 5 {
		h.t.Fatalf("claimed %d steps, want join/a, join/b, fail/a, cancel/a, dup/a", len(claimed))
	}
	h.cancel(cancel, at(46*time.Second))

	now := at(47 * time.Second)
	errs := h.record(
		succeed(claimed["join/a"], now, `"a"`),
		succeed(first, now, `"late"`),
		giveUp(claimed["fail/a"], now, store.OutcomePermanent, store.StateFailed, store.ReasonPermanentError),
		succeed(claimed["cancel/a"], now, `"cancelled"`),
		succeed(claimed["join/b"], now, `"b"`),
		succeed(claimed["dup/a"], now, `"dup"`),
		succeed(claimed["dup/a"], now, `"dup again"`),
	)
	for i, want := range []error{nil, store.ErrLeaseLost, nil, store.ErrStepCancelled, nil, nil, store.ErrLeaseLost} {
		if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
			h.t.Errorf("entry %d: %v, want %v", i, errs[i], want)
		}
	}

	// join: both completed, c released by both, the run still processing.
	for _, name := range []string{"a", "b"} {
		st := h.wantStep(join.ID, name, store.StateCompleted, 1, "")
		h.wantJSON("join "+name+" output", st.Output, `"`+name+`"`)
		h.wantJSON("join "+name+" ledger", h.wantEffect(keyOf(join, name), store.EffectCompleted, st).Result, `"`+name+`"`)
	}
	if c := h.step(join.ID, "c"); c.State != store.StatePending || c.Waiting != 0 {
		h.t.Errorf("join c: %s waiting %d, want pending waiting 0", c.State, c.Waiting)
	}
	h.wantRunState(join.ID, store.StateProcessing)
	h.wantTypes("join", h.runEvents(join.ID), store.EventRunCreated, store.EventStepClaimed, store.EventRunStateChanged,
		store.EventStepClaimed, store.EventStepCompleted, store.EventStepCompleted)

	// lost: w2 keeps the step; w1's attempt row says what happened; the ledger keeps it.
	h.wantStep(lost.ID, "a", store.StateProcessing, 2, "")
	h.wantJSON("lost ledger", h.wantEffect(keyOf(lost, "a"), store.EffectCompleted, h.step(lost.ID, "a")).Result, `"late"`)
	atts := h.attempts(lost.ID)
	if len(atts) != 2 || atts[0].Worker != "w1" || atts[0].Outcome != store.OutcomeSuccess || !atts[0].EndedAt.Equal(now) ||
		atts[1].Worker != "w2" || !atts[1].EndedAt.IsZero() {
		h.t.Errorf("lost attempts %+v, want w1's closed with success at 47 s and w2's in flight", atts)
	}
	h.wantTypes("lost", h.last("lost", h.runEvents(lost.ID), 2), store.EventLeaseLost, store.EventLeaseLostRecorded)

	// fail: the key is free again, b is cancelled, the run failed.
	h.wantStep(fail.ID, "a", store.StateFailed, 1, store.ReasonPermanentError)
	h.wantNoEffect(keyOf(fail, "a"))
	h.wantStep(fail.ID, "b", store.StateCancelled, 0, store.ReasonDependencyFailed)
	h.wantRunState(fail.ID, store.StateFailed)
	h.wantTypes("fail", h.runEvents(fail.ID), store.EventRunCreated, store.EventStepClaimed, store.EventRunStateChanged,
		store.EventStepFailed, store.EventStepCancelled, store.EventRunStateChanged)

	// cancel: the step stays cancelled, the ledger keeps the success.
	st := h.wantStep(cancel.ID, "a", store.StateCancelled, 1, store.ReasonRunCancelled)
	if st.LeaseOwner != "" {
		h.t.Errorf("cancelled step still leased to %q", st.LeaseOwner)
	}
	h.wantEffect(keyOf(cancel, "a"), store.EffectCompleted, st)
	h.wantTypes("cancel", h.last("cancel", h.runEvents(cancel.ID), 1), store.EventCancelledAttemptRecorded)

	// dup: the first record applied, the second found the lease gone (and the ledger
	// completed already).
	st = h.wantStep(dup.ID, "a", store.StateCompleted, 1, "")
	h.wantJSON("dup output", st.Output, `"dup"`)
	h.wantJSON("dup ledger", h.wantEffect(keyOf(dup, "a"), store.EffectCompleted, st).Result, `"dup"`)
	h.wantRunState(dup.ID, store.StateCompleted)
	h.wantTypes("dup", h.last("dup", h.runEvents(dup.ID), 3), store.EventStepCompleted, store.EventRunStateChanged,
		store.EventLeaseLost)
}
