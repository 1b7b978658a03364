package sqlite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// TestTakeOfHeldKey: a claim takes a step as for a free key and consults the ledger only
// when the key is not free. Steps of other runs under a key held in flight, one completed,
// and one kept in effects after its holder was purged wait, reuse it, and reuse it; the
// audit trail has no gap where a take was tried and undone.
func TestTakeOfHeldKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start := func(key string, at time.Time) *store.Run {
		t.Helper()
		res, err := s.RunInsertMany(ctx, []store.RunInsertParams{{Workflow: "w", RunKey: key, Input: json.RawMessage(`{}`), InputHash: "h",
			Actor: "test", Now: at, Steps: []store.StepInsert{{Name: "a"}}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("start %s: %+v, %v", key, res, err)
		}
		return res[0].Run
	}
	claim := func(at time.Time, key string) *store.ClaimResult {
		t.Helper()
		res, err := s.WriteBatch(ctx, store.WriteBatchParams{Claim: store.StepClaimParams{Owner: "w1", Now: at, LeaseFor: time.Minute, Limit: 10,
			Workflows: []string{"w"}, WaitFor: time.Hour, Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
				return store.EffectSpec{Key: key, Fingerprint: "F"}, nil
			}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Claim
	}
	record := func(c *store.ClaimedStep, at time.Time) {
		t.Helper()
		res, err := s.WriteBatch(ctx, store.WriteBatchParams{Records: []store.StepRecordParams{{StepID: c.Step.ID, Owner: "w1",
			Attempt: c.Step.Attempt, Now: at, Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"n": 1}`), NextState: store.StateCompleted}}})
		if err != nil || res.Records[0] != nil {
			t.Fatalf("record: %+v, %v", res, err)
		}
	}

	noGaps := func() {
		t.Helper()
		evs, err := s.EventList(ctx, store.EventListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].ID != evs[i-1].ID+1 {
				t.Errorf("event %d (%s) follows event %d (%s): a gap in the audit sequence", evs[i].ID, evs[i].Type, evs[i-1].ID, evs[i-1].Type)
			}
		}
	}

	start("holder", now)
	held := claim(now, "K")
	if len(held.Claimed) != 1 {
		t.Fatalf("first claim of K: %+v", held)
	}
	start("waits", now)
	if res := claim(now, "K"); len(res.Claimed) != 0 || res.Waiting != 1 {
		t.Errorf("claim under K held in flight: %+v, want it waiting", res)
	}
	record(held.Claimed[0], now.Add(time.Second))
	later := now.Add(2 * time.Hour)
	start("reuses", later)
	if res := claim(later, "K"); len(res.Claimed) != 0 || res.Reused != 2 {
		t.Errorf("claim under K completed: %+v, want both waiting steps reusing it", res)
	}

	noGaps()

	// K's holder purged: its key is kept in effects, and a new step under it reuses it.
	if _, err := s.RetentionPurge(ctx, store.RetentionPurgeParams{Now: later.Add(time.Hour), RunsBefore: later.Add(time.Hour), Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	if eff, err := s.EffectGetByKey(ctx, "K"); err != nil || eff.State != store.EffectCompleted {
		t.Fatalf("K after its holder was purged: %+v, %v", eff, err)
	}
	last := later.Add(2 * time.Hour)
	start("after-purge", last)
	if res := claim(last, "K"); len(res.Claimed) != 0 || res.Reused != 1 {
		t.Errorf("claim under K kept in effects: %+v, want it reused", res)
	}

	noGaps()
}
