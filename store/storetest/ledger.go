package storetest

import (
	"time"

	"github.com/onceflow/onceflow/store"
)

// A backend may keep the ledger row of a key in the row of the step that holds it. These
// cases pin what must not change when that step goes: a key it completed keeps its
// answer as its retention says, and one it held when it was given another key stays held.
var ledgerTests = []subtest{
	{"PurgedHolderStillDone", testLedgerPurgedKeyStillDone},
	{"PurgedHolderExpires", testLedgerPurgedKeyExpires},
	{"RekeyedStepKeepsItsOldKey", testLedgerRekeyed},
}

// testLedgerPurgedKeyStillDone: a key completed by a step whose run is purged still
// answers "done" (EffectGetByKey: completed, with the result and the run that completed
// it), and a run that produces it again reuses it, never acting again.
func testLedgerPurgedKeyStillDone(h *harness) {
	done := h.completeRun("done", "K", base, time.Time{}) // kept forever
	h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff})
	if runs := h.listRuns(); len(runs) != 0 {
		h.t.Fatalf("runs after the purge = %d, want 0", len(runs))
	}
	eff := h.effect("K")
	if eff.State != store.EffectCompleted || eff.RunID != done.ID || eff.StepName != "send" || eff.Fingerprint != "F" {
		h.t.Errorf("effect of a purged holder = %+v, want completed by run %d step send with fingerprint F", eff, done.ID)
	}
	h.wantJSON("result of a purged holder's key", eff.Result, `{"ok": true}`)
	h.wantTime("completed at", eff.CompletedAt, at(time.Second))

	again := h.runWithKeys("again", purgeNow, map[string]string{"send": "K", "send.fp": "F"}, step("send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: purgeNow, Owner: "w2"}), 1, 0, 0)
	st := h.wantStep(again.ID, "send", store.StateCompleted, 0, store.ReasonEffectReused)
	h.wantJSON("reused output", st.Output, `{"ok": true}`)
	reused := h.only(h.runEvents(again.ID), store.EventEffectReused)
	h.wantCompletedBy(reused, done)
	// Still the first one's, as often as it is asked.
	if eff := h.effect("K"); eff.State != store.EffectCompleted || eff.RunID != done.ID {
		h.t.Errorf("effect after the reuse = %+v, want completed by run %d", eff, done.ID)
	}
	// A different request under the key is a conflict, as it was before the purge.
	h.runWithKeys("conflict", purgeNow, map[string]string{"send": "K", "send.fp": "G"}, step("send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: purgeNow, Owner: "w2"}), 0, 1, 0)
}

// testLedgerPurgedKeyExpires: a key completed by a purged step with a retention is freed
// by the purge once the retention ended, not before.
func testLedgerPurgedKeyExpires(h *harness) {
	retain := at(50 * 24 * time.Hour)
	h.completeRun("done", "K", base, retain)
	h.purge(store.RetentionPurgeParams{Now: at(10 * 24 * time.Hour), RunsBefore: purgeCutoff})
	h.wantTime("retention of a purged holder's key", h.effect("K").RetainUntil, retain)
	r := h.purge(store.RetentionPurgeParams{Now: at(20 * 24 * time.Hour)})
	wantEqual(h.t, "keys purged before the retention ended", r.Effects.Count, 0)
	wantEqual(h.t, "key before its retention ended", h.effect("K").State, store.EffectCompleted)
	r = h.purge(store.RetentionPurgeParams{Now: retain})
	wantEqual(h.t, "keys purged once the retention ended", r.Effects.Count, 1)
	h.wantNoEffect("K")
}

// testLedgerRekeyed: a step that held a key in flight (its outcome unknown) and is given
// another key by a replay with a corrected input keeps the old one held: a step of another
// run under the old key waits, the old key is never freed by retention, the new key is
// taken as usual and the audit trail of each key lists its own attempts.
func testLedgerRekeyed(h *harness) {
	run := h.runWithKeys("r1", base, map[string]string{"send": "K-old", "send.fp": "F"}, step("send"))
	c := h.claimOne(base, "w1")
	h.mustRecord(giveUp(c, at(time.Second), store.OutcomeUnknown, store.StateFailed, store.ReasonOutcomeUnknown))
	h.wantEffect("K-old", store.EffectInFlight, h.step(run.ID, "send"))
	in := []byte(`{"send":"K-new","send.fp":"F"}`)
	if _, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Input: in, BaseInput: run.Input, Entity: run.Entity,
		Diff: []byte(`{"send":"K-new"}`), Actor: "alice", Now: at(time.Minute)}); err != nil {
		h.t.Fatal(err)
	}
	c = h.claimOne(at(time.Minute), "w1")
	if c.Step.EffectKey != "K-new" {
		h.t.Fatalf("replayed step acts under %q, want K-new", c.Step.EffectKey)
	}
	h.wantEffect("K-new", store.EffectInFlight, h.step(run.ID, "send"))
	old := h.effect("K-old")
	if old.State != store.EffectInFlight || old.StepID != c.Step.ID || old.RunID != run.ID {
		h.t.Errorf("old key after the step was given another = %+v, want still in flight, held by step %d", old, c.Step.ID)
	}
	h.mustRecord(succeed(c, at(time.Minute+time.Second), `{}`))
	h.wantEffect("K-new", store.EffectCompleted, h.step(run.ID, "send"))
	wantEqual(h.t, "old key once the step completed under the new one", h.effect("K-old").State, store.EffectInFlight)

	other := h.runWithKeys("r2", at(2*time.Minute), map[string]string{"send": "K-old", "send.fp": "F"}, step("send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(2 * time.Minute), Owner: "w2"}), 0, 0, 1)
	h.wantStep(other.ID, "send", store.StatePending, 0, store.ReasonEffectInFlight)
	h.wantTypes("events of K-old", h.events(store.EventListParams{EffectKey: "K-old"}),
		store.EventStepClaimed, store.EventStepFailed, store.EventReviewReplayed, store.EventEffectWaiting)
	h.wantTypes("events of K-new", h.events(store.EventListParams{EffectKey: "K-new"}), store.EventStepClaimed, store.EventStepCompleted)

	// The step's run finished and is purged; the old key stays held all the same.
	r := h.purge(store.RetentionPurgeParams{Now: purgeNow, RunsBefore: purgeCutoff})
	wantEqual(h.t, "runs purged", r.Runs.Count, 1)
	wantEqual(h.t, "old key after a purge", h.effect("K-old").State, store.EffectInFlight)
	wantEqual(h.t, "new key after a purge", h.effect("K-new").State, store.EffectCompleted)
}
