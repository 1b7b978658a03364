package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/store"
)

// BacklogReport is what the backlog scenario measured: Serve with W workers started on a
// database holding N pending runs of a one-step workflow (loaded in bulk), for at least
// the window and until the first steps (10,000 by default, or all) completed. MaxRSSMB is
// the process's peak from the moment the store was opened on the loaded database until
// the window ended; Runs is N; Steps the steps completed in the window.
type BacklogReport struct {
	Result
	Backlog int64 `json:"backlog"`
	// LoadSeconds is how long the bulk load took.
	LoadSeconds float64 `json:"load_seconds"`
	// Remaining is how many runs were still waiting at the end.
	Remaining int64 `json:"remaining"`
}

// Note implements Report.
func (r *BacklogReport) Note() string {
	return fmt.Sprintf("%d pending runs loaded in %.1f s; %d left after %.1f s of serving", r.Backlog, r.LoadSeconds, r.Remaining, r.Seconds)
}

const (
	backlogWorkflow = "bench-backlog"
	backlogStep     = "s1" // the step chain(backlogWorkflow, 1, …) defines
)

func runBacklog(ctx context.Context, cfg Config) (Report, error) {
	rep := &BacklogReport{Result: cfg.result("backlog"), Backlog: int64(cfg.Backlog)}
	err := withDatabase(ctx, cfg.Target, "backlog", func(d *database) error {
		return backlog(ctx, cfg, d, rep, cfg.progress("backlog", d))
	})
	return rep, err
}

func backlog(ctx context.Context, cfg Config, d *database, rep *BacklogReport, prog progress) (err error) {
	n := int64(cfg.Backlog)
	var rows atomic.Int64
	t0 := time.Now()
	stop := prog.phase("load", counted(rows.Load, n, "runs", t0))
	err = d.load(ctx, func(b bulkLoader) error { return b.backlog(ctx, backlogWorkflow, backlogStep, cfg.Backlog, t0, &rows) })
	stop()
	if err != nil {
		return err
	}
	rep.LoadSeconds = secs(time.Since(t0))

	// From here on the process is what `onceflow serve` would be on this database.
	rep.RSSPeakReset = rssBegin()
	if err := d.open(ctx); err != nil {
		return err
	}
	before, err := countWorkflow(ctx, d.st, backlogWorkflow)
	if err != nil {
		return err
	}
	if got := before.runs[store.StatePending]; got != n || before.steps[store.StatePending] != n {
		return fmt.Errorf("loaded %d runs, but the store counts %d pending runs and %d pending steps", n, got, before.steps[store.StatePending])
	}

	var executed atomic.Int64
	c, _, err := newClient(d.st, cfg.Workers, backlogWorkflow, 1, &executed)
	if err != nil {
		return err
	}
	first := min(n, int64(cfg.BacklogSteps))
	t1 := time.Now()
	eng := serve(ctx, c)
	stop = prog.phase("serve", func() (float64, string) {
		e := executed.Load()
		frac := min(time.Since(t1).Seconds()/cfg.BacklogWindow.Seconds(), float64(e)/float64(max(first, 1)))
		return frac, fmt.Sprintf("%d/%d steps executed, %.0f steps/s", e, n, perSecond(e, time.Since(t1)))
	})
	tick := time.NewTicker(20 * time.Millisecond)
	for e := executed.Load(); e < n && (e < first || time.Since(t1) < cfg.BacklogWindow) && ctx.Err() == nil; e = executed.Load() {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	rep.MaxRSSMB = rssPeak()
	err = eng.stop()
	elapsed := time.Since(t1)
	stop()
	if err = errors.Join(err, ctx.Err()); err != nil {
		return err
	}

	after, err := countWorkflow(ctx, d.st, backlogWorkflow)
	if err != nil {
		return err
	}
	rep.Runs = after.totalRuns()
	rep.Steps = after.steps[store.StateCompleted]
	rep.Remaining = rep.Runs - after.runs[store.StateCompleted]
	rep.Seconds = secs(elapsed)
	rep.StepsPerSecond = perSecond(rep.Steps, elapsed)
	if rep.Runs != n {
		rep.fail("loaded %d runs, the database holds %d", n, rep.Runs)
	}
	if rep.Steps < first {
		rep.fail("%d steps completed, fewer than the %d waited for", rep.Steps, first)
	}
	if s := after.stuck(); s > 0 {
		rep.fail("%d runs ended in review, failed or cancelled", s)
	}
	return nil
}
