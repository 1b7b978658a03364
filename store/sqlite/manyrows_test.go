package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// TestStepRecordManyRows records more steps in one call than a multi-row insert of the
// write path holds (128 rows): every record applies and releases its run's next step.
func TestStepRecordManyRows(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 2*128 + 5
	var starts []store.RunInsertParams
	for i := range n {
		key := fmt.Sprintf("r%d", i)
		starts = append(starts, store.RunInsertParams{Workflow: "w", RunKey: key, Input: json.RawMessage(`{}`), Actor: "test", Now: now,
			Steps: []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}})
	}
	if _, err := s.RunInsertMany(t.Context(), starts); err != nil {
		t.Fatal(err)
	}
	res, err := s.StepClaim(t.Context(), store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: n, Workflows: []string{"w"},
		Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: c.Run.RunKey + "/" + c.Step.Name}, nil
		}})
	if err != nil || len(res.Claimed) != n {
		t.Fatalf("StepClaim: %d claimed, %v; want %d", len(res.Claimed), err, n)
	}
	var ps []store.StepRecordParams
	for i, c := range res.Claimed {
		p := store.StepRecordParams{StepID: c.Step.ID, Owner: "w1", Attempt: c.Step.Attempt, Now: now.Add(time.Second),
			Outcome: store.OutcomeSuccess, Output: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), NextState: store.StateCompleted}
		if i%100 == 7 {
			p.Owner = "w2" // not the lease holder
		}
		ps = append(ps, p)
	}
	errs, err := s.StepRecord(t.Context(), ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range res.Claimed {
		lost := i%100 == 7
		if got := errs[i] != nil; got != lost {
			t.Errorf("entry %d: %v, want lost lease %v", i, errs[i], lost)
		}
		steps, err := s.StepListByRun(t.Context(), c.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		a, b := steps[0], steps[1]
		wantA, wantWaiting := store.StateCompleted, 0
		if lost {
			wantA, wantWaiting = store.StateProcessing, 1
		}
		if a.State != wantA || b.Waiting != wantWaiting {
			t.Errorf("run %d: a %s, b waiting %d; want a %s, b waiting %d", c.Run.ID, a.State, b.Waiting, wantA, wantWaiting)
		}
		if !lost && string(a.Output) != fmt.Sprintf(`{"i": %d}`, i) {
			t.Errorf("run %d: a output %s", c.Run.ID, a.Output)
		}
	}
}
