package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/store"
)

// StepsReport is what the steps scenario measured: R runs of a K-step no-op chain
// started by C goroutines and executed by W workers, timed from the first start until
// every run completed.
type StepsReport struct {
	Result
	StepsPerRun int `json:"steps_per_run"`
	Starters    int `json:"starters"`
	// StartsPerSecond is R over the time from the first start until the last returned.
	StartsPerSecond float64 `json:"starts_per_second"`
}

// Note implements Report.
func (r *StepsReport) Note() string {
	return fmt.Sprintf("%d-step chain, %d starters, %.0f starts/s", r.StepsPerRun, r.Starters, r.StartsPerSecond)
}

func runSteps(ctx context.Context, cfg Config) (Report, error) {
	rep := &StepsReport{Result: cfg.result("steps"),
		StepsPerRun: cfg.Steps, Starters: cfg.Starters}
	err := withDatabase(ctx, cfg.Target, "steps", func(d *database) error {
		m, err := measureChain(ctx, d, cfg.progress("steps", d),
			chainParams{workflow: "bench-steps", runs: cfg.Runs, k: cfg.Steps, starters: cfg.Starters, workers: cfg.Workers})
		if err != nil {
			return err
		}
		m.report(&rep.Result, cfg.Runs, cfg.Steps)
		rep.StartsPerSecond = perSecond(int64(cfg.Runs), m.startElapsed)
		return nil
	})
	return rep, err
}

// chainRun is what measureChain measured.
type chainRun struct {
	// elapsed runs from the first start until every run was seen completed; startElapsed
	// until the last start returned.
	elapsed, startElapsed time.Duration
	// starts holds the latency of every Start.
	starts latencies
	// final are the workflow's counts at the end.
	final counts
}

// chainParams say what measureChain measures: runs runs of a k-step no-op chain called
// workflow, started from starters goroutines and executed by workers workers. phase names
// the measurement on the progress line.
type chainParams struct {
	phase, workflow            string
	runs, k, starters, workers int
}

// measureChain starts the runs of p on d while Serve executes them, and waits until all
// of them completed.
func measureChain(ctx context.Context, d *database, prog progress, p chainParams) (*chainRun, error) {
	runs, k := p.runs, p.k
	var executed, started atomic.Int64
	c, _, err := newClient(d.st, p.workers, p.workflow, k, &executed)
	if err != nil {
		return nil, err
	}
	srv := serve(ctx, c)
	m := &chainRun{}
	t0 := time.Now()
	total := int64(runs) * int64(k)
	stop := prog.phase(p.phase, func() (float64, string) {
		e := executed.Load()
		return float64(e) / float64(total), fmt.Sprintf("started %d/%d runs, executed %d/%d steps, %.0f steps/s",
			started.Load(), runs, e, total, perSecond(e, time.Since(t0)))
	})
	_, err = startMany(ctx, c, p.workflow, runs, p.starters, func(i int) string { return fmt.Sprintf("run-%d", i) }, &started, &m.starts)
	m.startElapsed = time.Since(t0)
	var end time.Time
	if err == nil {
		end, m.final, err = awaitCompleted(ctx, d.st, p.workflow, int64(runs), &executed, total)
		m.elapsed = end.Sub(t0)
	}
	stop()
	return m, errors.Join(err, srv.stop())
}

// report fills the fields of res that a chain measures, and checks that runs runs of k
// steps completed.
func (m *chainRun) report(res *Result, runs, k int) {
	res.Runs = m.final.runs[store.StateCompleted]
	res.Steps = m.final.steps[store.StateCompleted]
	res.Seconds = secs(m.elapsed)
	res.StepsPerSecond = perSecond(int64(runs)*int64(k), m.elapsed)
	res.P50Ms, res.P99Ms, _ = m.starts.quantiles()
	if n := m.final.totalRuns(); res.Runs != int64(runs) || n != int64(runs) {
		res.fail("%d runs started, %d in the database, %d of them completed", runs, n, res.Runs)
	}
	if res.Steps != int64(runs)*int64(k) {
		res.fail("%d steps completed, expected %d runs × %d steps = %d", res.Steps, runs, k, runs*k)
	}
}
