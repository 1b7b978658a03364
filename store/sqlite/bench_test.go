package sqlite_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// The write path in the batch sizes the engine's committer uses, on a SQLite file with
// synchronous=FULL: starts in batches of 500, claims of up to 100 steps, records of the
// claimed steps in one call. Each reports items per second.

const benchWorkflow = "bench"

var benchSteps = []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}, {Name: "c", Needs: []string{"b"}}}

func benchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	sqlite.CheckDerived(false)
	b.Cleanup(func() { sqlite.CheckDerived(true) })
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchStart inserts n runs of benchSteps in batches of batch, keys from prefix.
func benchStart(b *testing.B, s *sqlite.Store, prefix string, n, batch int) {
	b.Helper()
	for i := 0; i < n; i += batch {
		var ps []store.RunInsertParams
		for j := i; j < min(i+batch, n); j++ {
			key := fmt.Sprintf("%s-%d", prefix, j)
			ps = append(ps, store.RunInsertParams{Workflow: benchWorkflow, RunKey: key, Entity: "order:" + key,
				Input: json.RawMessage(`{"n": 1}`), InputHash: "h", Steps: benchSteps, Actor: "bench", Now: base})
		}
		res, err := s.RunInsertMany(b.Context(), ps)
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

// benchRun claims and records (as completed) steps in batches of limit until steps steps
// completed.
func benchRun(b *testing.B, s *sqlite.Store, steps, limit int) {
	b.Helper()
	now := base.Add(time.Minute)
	prepare := func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		return store.EffectSpec{Key: fmt.Sprintf("%s:%s", c.Run.RunKey, c.Step.Name)}, nil
	}
	for done := 0; done < steps; {
		res, err := s.StepClaim(b.Context(), store.StepClaimParams{Owner: "w", Now: now, LeaseFor: time.Minute, Limit: limit,
			Workflows: []string{benchWorkflow}, Prepare: prepare})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Claimed) == 0 {
			b.Fatalf("nothing to claim after %d of %d steps", done, steps)
		}
		ps := make([]store.StepRecordParams, len(res.Claimed))
		for i, c := range res.Claimed {
			ps[i] = store.StepRecordParams{StepID: c.Step.ID, Owner: "w", Attempt: c.Step.Attempt, Now: now,
				Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"ok": true}`), NextState: store.StateCompleted}
		}
		errs, err := s.StepRecord(b.Context(), ps)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		done += len(res.Claimed)
	}
}

// cpuTime is the CPU time (user and system) the process used so far: on a loaded machine
// it varies less than the elapsed time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs fn and reports items per second and CPU microseconds per item.
func measure(b *testing.B, items int, unit string, fn func()) {
	b.Helper()
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime(b)
	fn()
	b.ReportMetric(float64(items)/time.Since(start).Seconds(), unit+"/s")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(items), "cpu-µs/"+unit)
}

func BenchmarkRunInsertMany(b *testing.B) {
	for _, batch := range []int{1, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := benchStore(b)
			measure(b, b.N, "runs", func() { benchStart(b, s, "run", b.N, batch) })
		})
	}
}

func BenchmarkClaimRecord(b *testing.B) {
	for _, history := range []int{0, 20000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			s := benchStore(b)
			if history > 0 {
				benchStart(b, s, "old", history, 500)
				benchRun(b, s, 3*history, 100)
			}
			benchStart(b, s, "run", b.N, 500)
			measure(b, 3*b.N, "steps", func() { benchRun(b, s, 3*b.N, 100) })
		})
	}
}

// benchRunBatched is benchRun with the claim of the next steps in the records'
// transaction (WriteBatch), as the engine does on SQLite.
func benchRunBatched(b *testing.B, s *sqlite.Store, steps, limit int) {
	b.Helper()
	now := base.Add(time.Minute)
	cp := store.StepClaimParams{Owner: "w", Now: now, LeaseFor: time.Minute, Limit: limit, Workflows: []string{benchWorkflow},
		Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: fmt.Sprintf("%s:%s", c.Run.RunKey, c.Step.Name)}, nil
		}}
	res, err := s.StepClaim(b.Context(), cp)
	if err != nil {
		b.Fatal(err)
	}
	claimed := res.Claimed
	for done := 0; done < steps; {
		if len(claimed) == 0 {
			b.Fatalf("nothing to claim after %d of %d steps", done, steps)
		}
		ps := make([]store.StepRecordParams, len(claimed))
		for i, c := range claimed {
			ps[i] = store.StepRecordParams{StepID: c.Step.ID, Owner: "w", Attempt: c.Step.Attempt, Now: now,
				Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"ok": true}`), NextState: store.StateCompleted}
		}
		done += len(claimed)
		p := store.WriteBatchParams{Records: ps}
		if done < steps {
			p.Claim = cp
		}
		wr, err := s.WriteBatch(b.Context(), p)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range wr.Records {
			if err != nil {
				b.Fatal(err)
			}
		}
		claimed = wr.Claim.Claimed
	}
}

// BenchmarkWriteBatch is BenchmarkClaimRecord's history=0 case with the claims in the
// records' transactions.
func BenchmarkWriteBatch(b *testing.B) {
	s := benchStore(b)
	benchStart(b, s, "run", b.N, 500)
	measure(b, 3*b.N, "steps", func() { benchRunBatched(b, s, 3*b.N, 100) })
}
