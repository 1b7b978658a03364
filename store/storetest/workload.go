package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/store"
)

// Workload is the write path's reference load, the one the counting tests of each backend
// measure (statements, rows and index entries per step): Runs runs of a chain of Steps
// no-op steps, started in batches of StartBatch (as the engine's starters do), then
// claimed ClaimBatch at a time and recorded successful, each batch of records written
// together with the claim of as many steps (WriteBatch, as the engine's committer does on
// a BatchWriter). Everything happens at one instant, so the counts do not depend on time.
type Workload struct {
	Runs, Steps            int
	StartBatch, ClaimBatch int
	// Now is the time of every write (default: 2026-03-01 09:00 UTC).
	Now time.Time
}

func (w Workload) now() time.Time {
	if w.Now.IsZero() {
		return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	}
	return w.Now
}

func (w Workload) workflow() string { return fmt.Sprintf("chain%d", w.Steps) }

// Start starts the runs.
func (w Workload) Start(ctx context.Context, s store.Store) error {
	var steps []store.StepInsert
	for i := range w.Steps {
		st := store.StepInsert{Name: fmt.Sprintf("s%d", i+1)}
		if i > 0 {
			st.Needs = []string{steps[i-1].Name}
		}
		steps = append(steps, st)
	}
	for i := 0; i < w.Runs; i += w.StartBatch {
		var ps []store.RunInsertParams
		for j := i; j < min(i+w.StartBatch, w.Runs); j++ {
			key := fmt.Sprintf("run-%d", j)
			ps = append(ps, store.RunInsertParams{Workflow: w.workflow(), RunKey: key, Entity: "order:" + key,
				Input: json.RawMessage(`{"n": 1}`), InputHash: "h", Steps: steps, Actor: "api", Now: w.now()})
		}
		res, err := s.RunInsertMany(ctx, ps)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil || !r.Created {
				return fmt.Errorf("start: %+v", r)
			}
		}
	}
	return nil
}

func (w Workload) claim(limit int) store.StepClaimParams {
	return store.StepClaimParams{Owner: "w1", Now: w.now(), LeaseFor: time.Minute, Limit: limit, Workflows: []string{w.workflow()},
		Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: c.Run.RunKey + ":" + c.Step.Name}, nil
		}}
}

// Finish claims and records every step of the started runs, and fails unless each step
// was done once.
func (w Workload) Finish(ctx context.Context, s store.Store) error {
	res, err := s.StepClaim(ctx, w.claim(w.ClaimBatch))
	if err != nil {
		return err
	}
	claimed, done := res.Claimed, 0
	bw, batches := s.(store.BatchWriter)
	for len(claimed) > 0 {
		ps := make([]store.StepRecordParams, len(claimed))
		for i, c := range claimed {
			ps[i] = store.StepRecordParams{StepID: c.Step.ID, Owner: "w1", Attempt: c.Step.Attempt, Now: w.now(), Actor: "w1",
				Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"ok": true}`), NextState: store.StateCompleted}
		}
		done += len(claimed)
		var errs []error
		if batches {
			wr, err := bw.WriteBatch(ctx, store.WriteBatchParams{Records: ps, Claim: w.claim(len(claimed))})
			if err != nil {
				return err
			}
			errs, claimed = wr.Records, wr.Claim.Claimed
		} else {
			if errs, err = s.StepRecord(ctx, ps); err != nil {
				return err
			}
			res, err := s.StepClaim(ctx, w.claim(len(claimed)))
			if err != nil {
				return err
			}
			claimed = res.Claimed
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	if done != w.Runs*w.Steps {
		return fmt.Errorf("workload: %d steps done, want %d", done, w.Runs*w.Steps)
	}
	return nil
}
