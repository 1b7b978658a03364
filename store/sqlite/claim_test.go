package sqlite

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// TestTakeStepsReportsEach: the compare-and-set of a claim's steps, one statement for all,
// says which steps it took when one of them is no longer as the claim read it.
func TestTakeStepsReportsEach(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run, _, err := s.RunInsert(ctx, store.RunInsertParams{Workflow: "orders", RunKey: "r", Input: json.RawMessage(`{}`), InputHash: "h",
		Now: now, Steps: []store.StepInsert{{Name: "a"}, {Name: "b"}, {Name: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	steps, err := s.StepListByRun(ctx, run.ID)
	if err != nil || len(steps) != 3 {
		t.Fatalf("steps = %v, %v", steps, err)
	}
	lease := now.Add(time.Minute)
	takes := []*store.Step{
		{ID: steps[0].ID, Attempt: 1, EffectKey: "ka", LeaseExpiresAt: lease},
		{ID: steps[1].ID, Attempt: 2, EffectKey: "kb", LeaseExpiresAt: lease}, // expects attempt 1: not as read
		{ID: steps[2].ID, Attempt: 1, EffectKey: "kc", LeaseExpiresAt: lease},
	}
	var taken map[int64]bool
	err = s.write(ctx, "test", func(w *writeTx) error {
		taken, err = takeSteps(w, &store.StepClaimParams{Owner: "w1"}, takes, ts(now))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int64]bool{steps[0].ID: true, steps[2].ID: true}; len(taken) != 2 || !taken[steps[0].ID] || !taken[steps[2].ID] {
		t.Errorf("taken = %v, want %v", taken, want)
	}
	after, err := s.StepListByRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range after {
		want := store.StateProcessing
		if i == 1 {
			want = store.StatePending
		}
		if st.State != want || (want == store.StateProcessing && (st.LeaseOwner != "w1" || st.EffectKey != takes[i].EffectKey)) {
			t.Errorf("step %s: %s owner %q key %q, want %s", st.Name, st.State, st.LeaseOwner, st.EffectKey, want)
		}
	}
}

// TestKeysJSONCannotCarry: run keys and effect keys that are not valid UTF-8, which the
// statements reading a list of keys as JSON cannot match, are still found: a known run
// key gives its run, and a key held in the ledger makes the next step with it wait.
func TestKeysJSONCannotCarry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start := func(keys ...string) []store.RunInsertResult {
		t.Helper()
		var ps []store.RunInsertParams
		for _, k := range keys {
			ps = append(ps, store.RunInsertParams{Workflow: "orders", RunKey: k, Input: json.RawMessage(`{}`), InputHash: "h", Now: now,
				Steps: []store.StepInsert{{Name: "a"}}})
		}
		res, err := s.RunInsertMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Run == nil || r.Run.RunKey != keys[i] {
				t.Fatalf("start %q: %+v", keys[i], r)
			}
		}
		return res
	}
	first := start("bad\xff", "nul\x00x")
	again := start("bad\xff", "nul\x00x", "new")
	for i := range first {
		if again[i].Created || again[i].Run.ID != first[i].Run.ID {
			t.Errorf("known key %q: run %d created %v, want run %d not created", first[i].Run.RunKey, again[i].Run.ID, again[i].Created, first[i].Run.ID)
		}
	}
	if !again[2].Created {
		t.Errorf("new key: not created")
	}

	claim := func() *store.ClaimResult {
		t.Helper()
		res, err := s.StepClaim(ctx, store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: 1, Workflows: []string{"orders"},
			WaitFor: time.Second, Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
				return store.EffectSpec{Key: "key\xff"}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := claim(); len(res.Claimed) != 1 {
		t.Fatalf("first claim: %+v, want one step taken", res)
	}
	if res := claim(); len(res.Claimed) != 0 || res.Waiting != 1 {
		t.Errorf("second claim: %+v, want one step waiting for the key", res)
	}
}
