package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// The store's write path on its own, without the engine: starts, claims and records in the
// batch sizes the engine's committer sends, each batch one transaction. Each benchmark
// reports items per second.

func benchStartParams(i int) store.RunInsertParams {
	return store.RunInsertParams{Workflow: "bench", RunKey: fmt.Sprintf("run-%d", i), Entity: fmt.Sprintf("order:%d", i),
		Input: json.RawMessage(`{"n": 1}`), InputHash: "h", Steps: []store.StepInsert{{Name: "a"}}, Actor: "bench", Now: time.Now()}
}

// startRuns inserts n one-step runs in batches of size.
func startRuns(b *testing.B, s *postgres.Store, from, n, size int) {
	b.Helper()
	for i := from; i < from+n; i += size {
		var ps []store.RunInsertParams
		for j := i; j < min(i+size, from+n); j++ {
			ps = append(ps, benchStartParams(j))
		}
		res, err := s.RunInsertMany(context.Background(), ps)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || !r.Created {
				b.Fatalf("start: %+v", r)
			}
		}
	}
}

// BenchmarkStoreStart: runs started in batches of 500 (RunInsertMany).
func BenchmarkStoreStart(b *testing.B) {
	s := freshStore(b)
	b.ResetTimer()
	startRuns(b, s, 0, b.N, 500)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

// BenchmarkStoreStartOne: runs started one per transaction (RunInsert).
func BenchmarkStoreStartOne(b *testing.B) {
	s := freshStore(b)
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := s.RunInsert(context.Background(), benchStartParams(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

func benchClaimParams(owner string, limit int) store.StepClaimParams {
	return store.StepClaimParams{Owner: owner, Now: time.Now(), LeaseFor: time.Minute, Limit: limit, Workflows: []string{"bench"},
		Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: fmt.Sprintf("bench:%d:%s", c.Run.ID, c.Step.Name), Fingerprint: "fp"}, nil
		}}
}

// claimRecord claims up to limit steps and records them as successes, in batches of limit;
// it returns how many it completed.
func claimRecord(b *testing.B, s *postgres.Store, owner string, limit int) int {
	res, err := s.StepClaim(context.Background(), benchClaimParams(owner, limit))
	if err != nil {
		b.Error(err)
		return 0
	}
	if len(res.Claimed) == 0 {
		return 0
	}
	ps := make([]store.StepRecordParams, len(res.Claimed))
	for i, c := range res.Claimed {
		ps[i] = store.StepRecordParams{StepID: c.Step.ID, Owner: owner, Attempt: c.Step.Attempt, Now: time.Now(),
			Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"ok": true}`), NextState: store.StateCompleted}
	}
	errs, err := s.StepRecord(context.Background(), ps)
	if err != nil {
		b.Error(err)
		return 0
	}
	for _, e := range errs {
		if e != nil {
			b.Error(e)
		}
	}
	return len(ps)
}

// benchClaimRecord completes b.N one-step runs started beforehand, with workers claiming
// limit steps at a time and recording them in one call.
func benchClaimRecord(b *testing.B, workers, limit int) {
	s := freshStore(b)
	startRuns(b, s, 0, b.N, 500)
	b.ResetTimer()
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for done.Load() < int64(b.N) && !b.Failed() {
				done.Add(int64(claimRecord(b, s, fmt.Sprintf("w%d", w), limit)))
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkStoreClaimRecord: one worker, claims of 100, records of 100.
func BenchmarkStoreClaimRecord(b *testing.B) { benchClaimRecord(b, 1, 100) }

// BenchmarkStoreClaimRecordParallel: four workers, claims of 100, records of 100.
func BenchmarkStoreClaimRecordParallel(b *testing.B) { benchClaimRecord(b, 4, 100) }

// BenchmarkStoreClaimRecordOne: one worker, one step per claim and per record.
func BenchmarkStoreClaimRecordOne(b *testing.B) { benchClaimRecord(b, 1, 1) }
