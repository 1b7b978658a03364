package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow"
)

// BatchReport is what the batch scenario measured: an import of R leads, started with
// StartMany in batches of B items by C goroutines while Serve executes their one step with
// W workers, timed from the first call until every run completed. P50Ms and P99Ms are those
// of the StartMany calls.
type BatchReport struct {
	Result
	BatchSize int `json:"batch_size"`
	Starters  int `json:"starters"`
	// Batches is how many StartMany calls were made.
	Batches int64 `json:"batches"`
	// StartsPerSecond is R over the time from the first call until the last returned.
	StartsPerSecond float64 `json:"starts_per_second"`
}

// Note implements Report.
func (r *BatchReport) Note() string {
	return fmt.Sprintf("batches of %d from %d starters, %.0f starts/s", r.BatchSize, r.Starters, r.StartsPerSecond)
}

const batchWorkflow = "bench-import"

func runBatch(ctx context.Context, cfg Config) (Report, error) {
	rep := &BatchReport{Result: cfg.result("batch"), BatchSize: cfg.BatchSize, Starters: cfg.Starters}
	err := withDatabase(ctx, cfg.Target, "batch", func(d *database) (err error) {
		var executed, started atomic.Int64
		c, _, err := newClient(d.st, cfg.Workers, batchWorkflow, 1, &executed)
		if err != nil {
			return err
		}
		srv := serve(ctx, c)
		defer func() { err = errors.Join(err, srv.stop()) }()
		n := cfg.BatchRuns
		t0 := time.Now()
		stop := cfg.progress("batch", d).phase("", func() (float64, string) {
			e := executed.Load()
			return float64(e) / float64(n), fmt.Sprintf("started %d/%d leads, executed %d, %.0f steps/s", started.Load(), n, e, perSecond(e, time.Since(t0)))
		})
		defer stop()
		var lat latencies
		batches, err := importLeads(ctx, c, n, cfg.BatchSize, cfg.Starters, &started, &lat)
		startElapsed := time.Since(t0)
		if err != nil {
			return err
		}
		end, final, err := awaitCompleted(ctx, d.st, batchWorkflow, int64(n), &executed, int64(n))
		if err != nil {
			return err
		}
		elapsed := end.Sub(t0)
		rep.Batches = batches
		rep.Runs, rep.Steps = final.runs[onceflow.StateCompleted], final.steps[onceflow.StateCompleted]
		rep.Seconds, rep.StepsPerSecond = secs(elapsed), perSecond(int64(n), elapsed)
		rep.StartsPerSecond = perSecond(int64(n), startElapsed)
		rep.P50Ms, rep.P99Ms, _ = lat.quantiles()
		if all := final.totalRuns(); rep.Runs != int64(n) || all != int64(n) {
			rep.fail("%d leads imported, %d runs in the database, %d of them completed", n, all, rep.Runs)
		}
		if rep.Steps != int64(n) {
			rep.fail("%d steps completed, expected %d", rep.Steps, n)
		}
		return nil
	})
	return rep, err
}

// importLeads starts n runs of the import workflow, keys lead-0…lead-(n-1) with {"n": i}
// as input, in StartMany calls of size items from starters goroutines, and returns how many
// calls it made. An item that is not created (the keys are new) is an error.
func importLeads(ctx context.Context, c *onceflow.Client, n, size, starters int, started *atomic.Int64, lat *latencies) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, calls atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, starters)
	for g := range starters {
		wg.Go(func() {
			var mine []time.Duration
			defer func() { lat.add(mine) }()
			items := make([]onceflow.StartItem, 0, size)
			for ctx.Err() == nil {
				lo := int(next.Add(int64(size)) - int64(size))
				if lo >= n {
					return
				}
				items = items[:0]
				for i := lo; i < min(lo+size, n); i++ {
					items = append(items, onceflow.StartItem{RunKey: fmt.Sprintf("lead-%d", i), Input: map[string]any{"n": i}})
				}
				t := time.Now()
				res, err := c.StartMany(ctx, batchWorkflow, items)
				mine = append(mine, time.Since(t))
				calls.Add(1)
				for j := 0; err == nil && j < len(res); j++ {
					if res[j].Status != onceflow.StartCreated {
						err = fmt.Errorf("lead %s: %s (%v); the keys are new", items[j].RunKey, res[j].Status, res[j].Err)
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						errs[g] = err
					}
					cancel()
					return
				}
				started.Add(int64(len(items)))
			}
		})
	}
	wg.Wait()
	return calls.Load(), errors.Join(errs...)
}
