package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/onceflow/onceflow/store"
)

// The combined write of a store.BatchWriter: starts, records and a claim in one
// transaction, each with the results and events its own method gives, the claim seeing
// what the starts and records wrote.

var writeBatchTests = []subtest{
	{"Mixed", testWriteBatchMixed},
	{"FailedCommitsNothing", testWriteBatchFailed},
	{"NoClaim", testWriteBatchNoClaim},
}

// batchWriter returns the store as a store.BatchWriter, or skips the test.
func (h *harness) batchWriter() store.BatchWriter {
	h.t.Helper()
	bw, ok := h.s.(store.BatchWriter)
	if !ok {
		h.t.Skip("the store does not implement store.BatchWriter")
	}
	return bw
}

// testWriteBatchMixed: a new start, a repeated start, a record that completes a step and
// releases the next one, a record whose lease is lost and an invalid one, with a claim
// of up to three steps: the claim takes the released step (with the output recorded in
// the same transaction among its outputs) and the new run's first step, and nothing else.
func testWriteBatchMixed(h *harness) {
	bw := h.batchWriter()
	old := h.run("old", step("a"), step("b", "a"))
	ca := h.claimOne(base, "w1")
	if ca.Run.ID != old.ID || ca.Step.Name != "a" {
		h.t.Fatalf("claimed %s of run %d, want a of run %d", ca.Step.Name, ca.Run.ID, old.ID)
	}
	now := at(time.Second)
	lost := succeed(ca, now, `{}`)
	lost.Attempt = ca.Step.Attempt + 1
	invalid := succeed(ca, now, `{}`)
	invalid.NextState = "bogus"
	res, err := bw.WriteBatch(h.ctx, store.WriteBatchParams{
		Starts: []store.RunInsertParams{insertParams("new", step("a")), insertParams("old", step("a"), step("b", "a"))},
		Records: []store.StepRecordParams{
			succeed(ca, now, `{"n": 1}`),
			lost,
			invalid,
		},
		Claim: claimDefaults(store.StepClaimParams{Now: now, Owner: "w2", Limit: 3}),
	})
	if err != nil {
		h.t.Fatalf("WriteBatch: %v", err)
	}
	if len(res.Starts) != 2 || len(res.Records) != 3 || res.Claim == nil {
		h.t.Fatalf("WriteBatch returned %d start results, %d record results, claim %v; want 2, 3 and a claim", len(res.Starts), len(res.Records), res.Claim)
	}
	if r := res.Starts[0]; r.Err != nil || !r.Created || r.Run == nil {
		h.t.Errorf("new start: %+v, want created", r)
	}
	if r := res.Starts[1]; r.Err != nil || r.Created || r.Run == nil || r.Run.ID != old.ID {
		h.t.Errorf("repeated start: %+v, want run %d, not created", r, old.ID)
	}
	if res.Records[0] != nil {
		h.t.Errorf("record of a: %v, want applied", res.Records[0])
	}
	if !errors.Is(res.Records[1], store.ErrLeaseLost) {
		h.t.Errorf("record under another attempt: %v, want ErrLeaseLost", res.Records[1])
	}
	if res.Records[2] == nil {
		h.t.Error("record with an unknown next state: applied, want its validation error")
	}

	got := map[string]*store.ClaimedStep{}
	for _, c := range res.Claim.Claimed {
		got[c.Run.RunKey+"/"+c.Step.Name] = c
		if c.Step.State != store.StateProcessing || c.Step.LeaseOwner != "w2" || c.Step.Attempt != 1 {
			h.t.Errorf("claimed %s/%s: state %s owner %q attempt %d, want processing under w2, attempt 1",
				c.Run.RunKey, c.Step.Name, c.Step.State, c.Step.LeaseOwner, c.Step.Attempt)
		}
	}
	if len(got) != 2 || got["old/b"] == nil || got["new/a"] == nil {
		h.t.Fatalf("claimed %v, want old/b and new/a", got)
	}
	h.wantJSON("outputs of old/b: a", got["old/b"].Outputs["a"], `{"n": 1}`)

	h.wantStep(old.ID, "a", store.StateCompleted, 1, "")
	h.wantStep(old.ID, "b", store.StateProcessing, 1, "")
	h.wantStep(res.Starts[0].Run.ID, "a", store.StateProcessing, 1, "")
	h.wantEffect(keyOf(old, "a"), store.EffectCompleted, ca.Step)
	h.wantTypes("old", h.runEvents(old.ID),
		store.EventRunCreated, store.EventStepClaimed, store.EventRunStateChanged,
		store.EventRunDeduplicated, store.EventStepCompleted, store.EventLeaseLost, store.EventStepClaimed)
	h.wantTypes("new", h.runEvents(res.Starts[0].Run.ID), store.EventRunCreated, store.EventStepClaimed, store.EventRunStateChanged)
}

// testWriteBatchFailed: a call that fails as a whole commits none of its items.
func testWriteBatchFailed(h *harness) {
	bw := h.batchWriter()
	h.run("old", step("a"))
	ca := h.claimOne(base, "w1")
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	res, err := bw.WriteBatch(ctx, store.WriteBatchParams{
		Starts:  []store.RunInsertParams{insertParams("new", step("a"))},
		Records: []store.StepRecordParams{succeed(ca, at(time.Second), `{}`)},
		Claim:   claimDefaults(store.StepClaimParams{Now: at(time.Second), Limit: 5}),
	})
	if err == nil {
		h.t.Fatalf("WriteBatch with a cancelled context = %+v, nil; want an error", res)
	}
	if _, err := h.s.RunGetByKey(h.ctx, defaultWorkflow, "new"); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("run new after a failed batch: %v, want ErrNotFound", err)
	}
	h.wantStep(ca.Run.ID, "a", store.StateProcessing, 1, "")
}

// testWriteBatchNoClaim: a claim limit of 0 claims nothing, though steps are due.
func testWriteBatchNoClaim(h *harness) {
	bw := h.batchWriter()
	res, err := bw.WriteBatch(h.ctx, store.WriteBatchParams{Starts: []store.RunInsertParams{insertParams("new", step("a"))}})
	if err != nil {
		h.t.Fatalf("WriteBatch: %v", err)
	}
	if res.Claim == nil || len(res.Claim.Claimed) != 0 {
		h.t.Errorf("claim result %+v, want nothing claimed", res.Claim)
	}
	h.wantStep(res.Starts[0].Run.ID, "a", store.StatePending, 0, "")
}
