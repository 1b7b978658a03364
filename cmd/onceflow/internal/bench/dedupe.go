package bench

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/store"
)

// DedupeReport is what the dedupe scenario measured: the latency of starting N known run
// keys again, one after the other, while C goroutines start new runs of the K-step chain
// and Serve executes them with W workers. P50Ms and P99Ms are those of the repeated starts.
type DedupeReport struct {
	Result
	StepsPerRun int `json:"steps_per_run"`
	Starters    int `json:"starters"`
	// KnownRuns is how many runs were created first; Probes how many repeated starts were
	// timed, and Duplicates how many of them returned the known run, marked Duplicate.
	KnownRuns  int64   `json:"known_runs"`
	Probes     int64   `json:"probes"`
	Duplicates int64   `json:"duplicates"`
	MaxMs      float64 `json:"max_ms"`
	// BackgroundRuns is how many new runs the load started during the probes; the steps
	// executed meanwhile give StepsPerSecond. DrainSeconds is how long every run then took
	// to complete.
	BackgroundRuns int64   `json:"background_runs"`
	DrainSeconds   float64 `json:"drain_seconds"`
}

// Note implements Report.
func (r *DedupeReport) Note() string {
	return fmt.Sprintf("%d repeated starts, max %.1f ms, under a load of %d new runs", r.Probes, r.MaxMs, r.BackgroundRuns)
}

const dedupeWorkflow = "bench-dedupe"

// probeRate is the most repeated starts the dedupe scenario makes per second: a stream
// of duplicates among the load, not a load of its own.
const probeRate = 1000

func runDedupe(ctx context.Context, cfg Config) (Report, error) {
	rep := &DedupeReport{Result: cfg.result("dedupe"),
		StepsPerRun: cfg.Steps, Starters: cfg.Starters}
	err := withDatabase(ctx, cfg.Target, "dedupe", func(d *database) error {
		return dedupe(ctx, cfg, d, rep, cfg.progress("dedupe", d))
	})
	return rep, err
}

func dedupe(ctx context.Context, cfg Config, d *database, rep *DedupeReport, prog progress) (err error) {
	var executed, started atomic.Int64
	c, _, err := newClient(d.st, cfg.Workers, dedupeWorkflow, cfg.Steps, &executed)
	if err != nil {
		return err
	}
	eng := serve(ctx, c)
	defer func() { err = errors.Join(err, eng.stop()) }()

	n := cfg.DedupeRuns
	known := func(i int) string { return fmt.Sprintf("known-%d", i) }
	t0 := time.Now()
	stop := prog.phase("create", counted(started.Load, int64(n), "runs", t0))
	ids, err := startMany(ctx, c, dedupeWorkflow, n, cfg.Starters, known, &started, &latencies{})
	stop()
	if err != nil {
		return err
	}

	// The load: new runs, started until the probes are done.
	done := make(chan struct{})
	var bg sync.WaitGroup
	var bgNext atomic.Int64
	bgErrs := make([]error, cfg.Starters)
	// underway is closed once the load has started as many runs as it has starters (or
	// failed).
	underway := make(chan struct{})
	var once sync.Once
	for g := range cfg.Starters {
		bg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				i := bgNext.Add(1) - 1
				if _, err := c.Start(ctx, dedupeWorkflow, fmt.Sprintf("load-%d", i), map[string]any{"n": i}); err != nil {
					bgErrs[g] = err
					once.Do(func() { close(underway) }) // the probes go on, and the error is returned after them
					return
				}
				if started.Add(1)-int64(n) >= int64(cfg.Starters) {
					once.Do(func() { close(underway) })
				}
			}
		})
	}

	// The probes, once the load is under way: the known keys again, with the same input,
	// in random order, pass after pass for the window (at least one pass), at most
	// probeRate a second.
	select {
	case <-underway:
	case <-ctx.Done():
	}
	var lat latencies
	var probes, dups atomic.Int64
	t1 := time.Now()
	base := executed.Load()
	stop = prog.phase("probe", func() (float64, string) {
		p := probes.Load()
		frac := min(float64(p)/float64(n), time.Since(t1).Seconds()/cfg.DedupeDuration.Seconds())
		return frac, fmt.Sprintf("%d repeated starts; %d new runs started, %d steps executed", p, bgNext.Load(), executed.Load()-base)
	})
	var perr error
	var mine []time.Duration
	pace := time.NewTicker(time.Second / probeRate)
probing:
	for pass := 0; pass == 0 || time.Since(t1) < cfg.DedupeDuration; pass++ {
		for _, i := range mrand.Perm(n) {
			if pass > 0 && time.Since(t1) >= cfg.DedupeDuration {
				break probing
			}
			select {
			case <-ctx.Done():
				perr = ctx.Err()
				break probing
			case <-pace.C:
			}
			t := time.Now()
			r, err := c.Start(ctx, dedupeWorkflow, known(i), map[string]any{"n": i})
			mine = append(mine, time.Since(t))
			probes.Add(1)
			if err != nil {
				perr = err
				break probing
			}
			if r.Duplicate && r.ID == ids[i] {
				dups.Add(1)
			} else if len(rep.Failures) < 5 {
				rep.fail("starting known key %s again returned run %d (duplicate %v); it started run %d", known(i), r.ID, r.Duplicate, ids[i])
			}
		}
	}
	pace.Stop()
	window := time.Since(t1)
	stepsInWindow := executed.Load() - base
	close(done)
	bg.Wait()
	stop()
	lat.add(mine)
	if err := errors.Join(perr, errors.Join(bgErrs...)); err != nil {
		return err
	}

	total := started.Load()
	stop = prog.phase("drain", counted(executed.Load, total*int64(cfg.Steps), "steps", t0))
	at, final, err := awaitCompleted(ctx, d.st, dedupeWorkflow, total, &executed, total*int64(cfg.Steps))
	stop()
	if err != nil {
		return err
	}
	rep.KnownRuns, rep.Probes, rep.Duplicates = int64(n), probes.Load(), dups.Load()
	rep.BackgroundRuns = total - int64(n)
	rep.Seconds = secs(window)
	rep.StepsPerSecond = perSecond(stepsInWindow, window)
	rep.P50Ms, rep.P99Ms, rep.MaxMs = lat.quantiles()
	rep.DrainSeconds = secs(at.Sub(t1.Add(window)))
	rep.Runs = final.runs[store.StateCompleted]
	rep.Steps = final.steps[store.StateCompleted]
	if rep.Duplicates != rep.Probes {
		rep.fail("%d known keys started again, %d returned the known run", rep.Probes, rep.Duplicates)
	}
	if all := final.totalRuns(); rep.Runs != total || all != total {
		rep.fail("%d runs started, %d in the database, %d completed", total, all, rep.Runs)
	}
	if want := total * int64(cfg.Steps); rep.Steps != want {
		rep.fail("%d steps completed, expected %d", rep.Steps, want)
	}
	return nil
}
