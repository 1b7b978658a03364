package onceflow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// BenchmarkThreeStepNoop starts b.N runs of a three-step chain of no-op steps on a SQLite
// file (synchronous=FULL) from 16 concurrent starters and executes them with Serve and 100
// workers; it reports steps per second, starts included. `onceflow bench` measures the same
// and more from the command line.
func BenchmarkThreeStepNoop(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	c, err := onceflow.New(onceflow.Config{Store: st, Workers: 100})
	if err != nil {
		b.Fatal(err)
	}
	// The last step counts its executions, so the benchmark knows when to look at the
	// database without polling it all along.
	var lastDone atomic.Int64
	allDone := make(chan struct{})
	last := func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
		if lastDone.Add(1) == int64(b.N) {
			close(allDone)
		}
		return noop(ctx, sc)
	}
	if err := c.Register(onceflow.Workflow{Name: "noop3", Steps: []onceflow.Step{
		{ID: "a", Do: noop},
		{ID: "b", Needs: []string{"a"}, Do: noop},
		{ID: "c", Needs: []string{"b"}, Do: last},
	}}); err != nil {
		b.Fatal(err)
	}
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Serve(serveCtx) }()
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if _, err := c.Start(ctx, "noop3", fmt.Sprintf("run-%d", i), nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	<-allDone
	tick := time.NewTicker(time.Millisecond)
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

// onEachStore runs fn as a sub-benchmark on a new client of each store, SQLite and
// PostgreSQL.
func onEachStore(b *testing.B, fn func(b *testing.B, c *onceflow.Client)) {
	ctx := context.Background()
	open := map[string]func() (store.Store, error){
		"sqlite": func() (store.Store, error) {
			return sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
		},
		"postgres": func() (store.Store, error) {
			u, schema := testsvc.PostgresSchema(b, "onceflow_bench_")
			return postgres.Open(ctx, u, postgres.Options{Schema: schema})
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			st, err := open[name]()
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			c, err := onceflow.New(onceflow.Config{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			fn(b, c)
		})
	}
}

// BenchmarkClientNow reads the engine's clock, as every claim, record and start does: on
// SQLite this machine's clock watched for jumps, on PostgreSQL the database's extrapolated
// from the last measurement — no round trip either way.
func BenchmarkClientNow(b *testing.B) {
	onEachStore(b, func(b *testing.B, c *onceflow.Client) {
		c.Now() // the first reading measures the database's clock
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Now()
			}
		})
	})
}

// BenchmarkRepeatedStart starts a key the client remembers again, as a webhook delivered
// twice does: answered in process on both stores, with no round trip and no wait for the
// writer (its run.deduplicated event is written in the background).
func BenchmarkRepeatedStart(b *testing.B) {
	ctx := context.Background()
	onEachStore(b, func(b *testing.B, c *onceflow.Client) {
		if err := c.Register(onceflow.Workflow{Name: "form", Entity: "lead:{input.id}", Steps: []onceflow.Step{{ID: "crm", Do: noop}}}); err != nil {
			b.Fatal(err)
		}
		input := map[string]any{"id": 8812, "email": "ada@example.com", "name": "Ada"}
		if _, err := c.Start(ctx, "form", "form-8812", input); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			r, err := c.Start(ctx, "form", "form-8812", input)
			if err != nil || !r.Duplicate {
				b.Fatalf("repeated start: %+v, %v", r, err)
			}
		}
		b.StopTimer()
		if err := c.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	})
}
