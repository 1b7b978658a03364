package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store/postgres"
)

func benchNoop(context.Context, *onceflow.StepContext) (any, error) {
	return map[string]any{"ok": true}, nil
}

// benchNoopRuns starts b.N runs of a chain of steps no-op steps on a fresh schema and
// executes them with Serve (10 workers); it reports steps per second, starts included.
func benchNoopRuns(b *testing.B, steps int) {
	st := freshStore(b)
	c, err := onceflow.New(onceflow.Config{Store: st, PollInterval: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	w := onceflow.Workflow{Name: "noop"}
	for i := range steps {
		s := onceflow.Step{ID: fmt.Sprintf("s%d", i), Do: benchNoop}
		if i > 0 {
			s.Needs = []string{fmt.Sprintf("s%d", i-1)}
		}
		w.Steps = append(w.Steps, s)
	}
	if err := c.Register(w); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := c.Start(ctx, "noop", fmt.Sprintf("run-%d", i), nil); err != nil {
			b.Fatal(err)
		}
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for completedRuns(b, st) < b.N {
		<-tick.C
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(steps*b.N)/elapsed.Seconds(), "steps/s")
}

// completedRuns counts the completed runs.
func completedRuns(b *testing.B, st *postgres.Store) int {
	var n int
	if err := st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE state = 'completed'`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkOneStepNoop: runs of one no-op step on PostgreSQL.
func BenchmarkOneStepNoop(b *testing.B) { benchNoopRuns(b, 1) }

// BenchmarkThreeStepNoop: runs of a three-step chain of no-op steps on PostgreSQL, as the
// root package's BenchmarkThreeStepNoop does on SQLite.
func BenchmarkThreeStepNoop(b *testing.B) { benchNoopRuns(b, 3) }
