package onceflow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

func benchClient(b *testing.B) (*onceflow.Client, *sqlite.Store) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	c, err := onceflow.New(onceflow.Config{Store: st, PollInterval: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "noop3", Steps: []onceflow.Step{
		{ID: "a", Do: noop},
		{ID: "b", Needs: []string{"a"}, Do: noop},
		{ID: "c", Needs: []string{"b"}, Do: noop},
	}}); err != nil {
		b.Fatal(err)
	}
	return c, st
}

// BenchmarkThreeStepNoop starts b.N runs of a three-step chain of no-op steps on a SQLite
// file (synchronous=FULL) and executes them with Serve; it reports steps per second,
// starts included.
func BenchmarkThreeStepNoop(b *testing.B) {
	c, st := benchClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := c.Start(ctx, "noop3", fmt.Sprintf("run-%d", i), nil); err != nil {
			b.Fatal(err)
		}
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !completed(b, st, b.N) {
		<-tick.C
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(3*b.N)/elapsed.Seconds(), "steps/s")
}

// completed reports whether n runs have completed.
func completed(b *testing.B, st *sqlite.Store, n int) bool {
	runs, err := st.RunList(context.Background(), store.RunListParams{State: store.StateCompleted, Limit: n})
	if err != nil {
		b.Fatal(err)
	}
	return len(runs) == n
}
