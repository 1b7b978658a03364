package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// The writer's cache (writecache.go) is given up whenever something else may have changed
// what it holds: a write of another connection to the same file, or a write of the same
// store that changes steps with its own SQL. Each test claims a step (its run is then in
// the cache), changes the step behind the claims and records, and records the attempt:
// the record must see the change, as it would have read it.

// cacheRun starts a run of two steps on s and claims its first step for "w1" with
// WriteBatch, as the engine does; it returns the claimed step.
func cacheRun(t *testing.T, s *Store, now time.Time) *store.ClaimedStep {
	t.Helper()
	ctx := t.Context()
	if _, err := s.RunInsertMany(ctx, []store.RunInsertParams{{Workflow: "w", RunKey: "r1", Input: json.RawMessage(`{}`), InputHash: "h",
		Actor: "test", Now: now, Steps: []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.WriteBatch(ctx, store.WriteBatchParams{Claim: store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: 1,
		Workflows: []string{"w"}, Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: c.Run.RunKey + "/" + c.Step.Name}, nil
		}}})
	if err != nil || len(res.Claim.Claimed) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if s.cache == nil || s.cache.steps[res.Claim.Claimed[0].Step.ID] == nil {
		t.Fatalf("the claimed step's run is not in the writer's cache")
	}
	return res.Claim.Claimed[0]
}

// recordDone records c's attempt as a success with WriteBatch and returns the entry's
// error.
func recordDone(t *testing.T, s *Store, c *store.ClaimedStep, now time.Time) error {
	t.Helper()
	res, err := s.WriteBatch(t.Context(), store.WriteBatchParams{Records: []store.StepRecordParams{{StepID: c.Step.ID, Owner: "w1",
		Attempt: c.Step.Attempt, Now: now, Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{}`), NextState: store.StateCompleted}}})
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	return res.Records[0]
}

// TestWriteCacheOtherConnection: another store on the same file reaps the lease of a step
// this store claimed; this store's record of it then loses the lease, as when it read
// the step.
func TestWriteCacheOtherConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	a, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := cacheRun(t, a, now)
	later := now.Add(2 * time.Minute)
	n, err := b.StepReapExpired(ctx, store.StepReapParams{Now: later, Limit: 10, Decide: func(*store.Step) store.ReapDecision {
		return store.ReapDecision{State: store.StateRetrying, NextAt: later, Reason: "lease_expired"}
	}})
	if err != nil || n != 1 {
		t.Fatalf("reap from the other store: %d, %v", n, err)
	}
	if err := recordDone(t, a, c, later); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("record after the other store reaped the step: %v, want %v", err, store.ErrLeaseLost)
	}
	steps, err := a.StepListByRun(ctx, c.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].State != store.StateRetrying || steps[1].Waiting != 1 {
		t.Errorf("after the lost record: a %s, b waiting %d; want a retrying, b waiting 1", steps[0].State, steps[1].Waiting)
	}
}

// TestWriteCacheOwnSQL: a cancel of the run, which changes its steps with its own SQL,
// between the claim and the record: the record finds the step cancelled.
func TestWriteCacheOwnSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := cacheRun(t, s, now)
	if _, err := s.RunCancel(ctx, store.RunCancelParams{RunID: c.Run.ID, Actor: "test", Now: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := recordDone(t, s, c, now.Add(2*time.Second)); !errors.Is(err, store.ErrStepCancelled) {
		t.Errorf("record after the run was cancelled: %v, want %v", err, store.ErrStepCancelled)
	}
	run, err := s.RunGetByID(ctx, c.Run.ID)
	if err != nil || run.State != store.StateCancelled {
		t.Errorf("run after the cancel and the record: %+v, %v; want cancelled", run, err)
	}
}

// TestWriteCacheKept: the cache carries a claimed run from the claim to the record and
// forgets it once the run has no step left to run.
func TestWriteCacheKept(t *testing.T) {
	t.Parallel()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := cacheRun(t, s, now)
	if err := recordDone(t, s, c, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.cache == nil || s.cache.runs[c.Run.ID] == nil {
		t.Fatalf("run %d with a step to run left the cache", c.Run.ID)
	}
	b := s.cache.runs[c.Run.ID].steps[1]
	if b.state != store.StatePending || b.waiting != 0 {
		t.Errorf("cached step b: %s waiting %d, want pending waiting 0", b.state, b.waiting)
	}
}

// TestWriteCacheBounded: claims of more runs than the cache holds leave no cache once the
// runs with a step in flight alone are too many, and records of some of them start it
// again with their runs only.
func TestWriteCacheBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := maxCachedRuns + 10
	for i := 0; i < n; i += 500 {
		var ps []store.RunInsertParams
		for j := i; j < min(i+500, n); j++ {
			ps = append(ps, store.RunInsertParams{Workflow: "w", RunKey: fmt.Sprintf("r%d", j), Input: json.RawMessage(`{}`), InputHash: "h",
				Actor: "test", Now: now, Steps: []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}})
		}
		if _, err := s.RunInsertMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	var claimed []*store.ClaimedStep
	for len(claimed) < n {
		res, err := s.StepClaim(ctx, store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: 1000, Workflows: []string{"w"},
			Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
				return store.EffectSpec{Key: c.Run.RunKey + "/" + c.Step.Name}, nil
			}})
		if err != nil || len(res.Claimed) == 0 {
			t.Fatalf("claim after %d: %+v, %v", len(claimed), res, err)
		}
		claimed = append(claimed, res.Claimed...)
		if s.cache != nil && len(s.cache.runs) > maxCachedRuns {
			t.Fatalf("the cache holds %d runs, more than %d", len(s.cache.runs), maxCachedRuns)
		}
	}
	if s.cache != nil {
		t.Fatalf("the cache holds %d runs with a step in flight each, want none kept beyond %d", len(s.cache.runs), maxCachedRuns)
	}
	var ps []store.StepRecordParams
	for _, c := range claimed[:10] {
		ps = append(ps, store.StepRecordParams{StepID: c.Step.ID, Owner: "w1", Attempt: c.Step.Attempt, Now: now, Outcome: store.OutcomeSuccess,
			Output: json.RawMessage(`{}`), NextState: store.StateCompleted})
	}
	if _, err := s.WriteBatch(ctx, store.WriteBatchParams{Records: ps}); err != nil {
		t.Fatal(err)
	}
	if s.cache == nil || len(s.cache.runs) != 10 {
		t.Errorf("cache after 10 records: %+v, want their 10 runs", s.cache)
	}
}
