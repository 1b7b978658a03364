// Package demo is the scenario behind `onceflow demo`: a website-lead workflow run
// against simulated destinations that misbehave on purpose, to show that every effect
// happens once.
//
// Run starts three local HTTP services on 127.0.0.1 (a CRM, a mailer and a chat notifier)
// that honour Idempotency-Key and inject faults chosen by a seed: 503 and 429 answers with
// Retry-After, connections dropped after the effect was applied, answers that come only
// after the caller gave up, and, for some phone numbers, permanent 422 refusals. It posts
// every form twice (a double click), some concurrently, and posts a few forms again under
// new request ids; it serves the runs with onceflow until each one is completed or waits
// for review, and then checks, from the destinations' own counts, that no business action
// was applied twice and none was lost.
//
// The package does not depend on the command line: internal/cli wires it to `onceflow
// demo`, and its test runs the same scenario.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Config configures Run. Only DBPath is required.
type Config struct {
	// DBPath is the SQLite file to use; it should not exist yet.
	DBPath string
	// Runs is how many runs to start (default 40).
	Runs int
	// Workers is how many steps execute at once (default 8).
	Workers int
	// Seed chooses which requests fail (default 1). The same seed injects the same faults.
	Seed uint64
	// Progress receives a progress line every ProgressEvery (default: none).
	Progress io.Writer
	// ProgressEvery is the interval of progress lines (default 500 ms).
	ProgressEvery time.Duration
	// Deadline bounds the whole scenario (default 60 s); runs still in progress then are an
	// invariant failure.
	Deadline time.Duration
	// ClientTimeout is how long a step waits for a destination's answer (default 250 ms).
	ClientTimeout time.Duration
	// Logger receives the engine's logs (default: none).
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.DBPath == "" {
		return errors.New("demo: Config.DBPath is required")
	}
	if c.Runs <= 0 {
		c.Runs = 40
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 500 * time.Millisecond
	}
	if c.Deadline <= 0 {
		c.Deadline = 60 * time.Second
	}
	if c.ClientTimeout <= 0 {
		c.ClientTimeout = 250 * time.Millisecond
	}
	return nil
}

// Run plays the scenario and returns its summary. An error means the scenario could not
// be played (a port or the database could not be opened, ctx ended); a broken invariant is
// reported in the summary, with InvariantsOK false.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "[%4.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
		}
	}

	ds, err := startDestinations(cfg.Seed, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer ds.close()
	p := newPoster(cfg.ClientTimeout)
	defer p.close()

	st, err := sqlite.Open(ctx, cfg.DBPath, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()

	client, err := onceflow.New(onceflow.Config{
		Store:          st,
		Workers:        cfg.Workers,
		WorkerID:       "demo-worker",
		LeaseFor:       5 * time.Second,
		HeartbeatEvery: time.Second,
		PollInterval:   50 * time.Millisecond,
		ReapInterval:   500 * time.Millisecond,
		EffectWait:     50 * time.Millisecond,
		ShutdownGrace:  3 * time.Second,
		Logger:         cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	if err := client.Register(leadWorkflow(ds, p)); err != nil {
		return nil, err
	}

	sum := &Summary{DBPath: cfg.DBPath, DBURL: sqliteURL(cfg.DBPath), Seed: cfg.Seed, Runs: cfg.Runs}
	for _, d := range ds.all() {
		sum.Destinations = append(sum.Destinations, DestinationStats{Name: d.name, URL: d.url})
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- client.Serve(serveCtx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopServe()
		return <-served
	}
	defer stop()

	// Post the forms while the engine is already working.
	subs := submissions(cfg.Runs)
	tally := submitAll(ctx, client, subs, 4)
	if len(tally.errs) > 0 && ctx.Err() == nil {
		return nil, fmt.Errorf("demo: %s", strings.Join(tally.errs, "; "))
	}
	sum.Submissions = tally.calls
	sum.DuplicateSubmissions = tally.dups
	for _, s := range subs {
		if s.Resubmits >= 0 {
			sum.ResubmittedForms++
		}
	}
	progress("%d form posts: %d runs created, %d double submissions answered with the run they had already started",
		tally.calls, len(tally.created), tally.dups)

	// Wait until every run is settled: completed, or parked for review with nothing else
	// of it still able to move.
	settled, lastCount, err := waitSettled(ctx, st, cfg, progress, ds)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	if err := stop(); err != nil {
		return nil, fmt.Errorf("demo: serve: %w", err)
	}
	if settled {
		progress("all %d runs settled", lastCount)
	} else {
		progress("deadline of %v reached with runs still in progress", cfg.Deadline)
	}
	sum.Elapsed = time.Since(began).Round(time.Millisecond)

	// The database is closed by the deferred calls; read everything now with a fresh
	// context, since ctx may have reached its deadline.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	if err := collect(rctx, st, ds, sum); err != nil {
		return nil, err
	}
	check(sum, ds, tally, subs, settled)
	return sum, nil
}

// waitSettled polls the store until every run has settled or ctx ends, printing progress.
func waitSettled(ctx context.Context, st store.Store, cfg Config, progress func(string, ...any), ds *destinations) (bool, int, error) {
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	lastProgress := time.Now()
	for {
		runs, err := st.RunList(ctx, store.RunListParams{Workflow: WorkflowName, Limit: cfg.Runs + 1})
		if err != nil {
			return false, 0, err
		}
		open := 0
		byState := map[store.State]int{}
		for _, r := range runs {
			byState[r.State]++
			ok, err := runSettled(ctx, st, r)
			if err != nil {
				return false, 0, err
			}
			if !ok {
				open++
			}
		}
		if open == 0 && len(runs) == cfg.Runs {
			return true, len(runs), nil
		}
		if time.Since(lastProgress) >= cfg.ProgressEvery {
			lastProgress = time.Now()
			var req, faults int
			for _, d := range ds.all() {
				s := d.Stats()
				req, faults = req+s.Requests, faults+s.FaultsInjected
			}
			done, review := byState[store.StateCompleted], byState[store.StateNeedsReview]
			progress("runs: %d completed, %d needs_review, %d in progress · destinations: %d requests, %d faults injected",
				done, review, len(runs)-done-review, req, faults)
		}
		select {
		case <-ctx.Done():
			return false, len(runs), ctx.Err()
		case <-poll.C:
		}
	}
}

// runSettled reports whether a run can no longer move without a person: it is completed,
// or it waits for review and none of its steps is running, retrying or ready to run.
func runSettled(ctx context.Context, st store.Store, r *store.Run) (bool, error) {
	switch r.State {
	case store.StateCompleted:
		return true, nil
	case store.StateNeedsReview:
	default:
		return false, nil
	}
	steps, err := st.StepListByRun(ctx, r.ID)
	if err != nil {
		return false, err
	}
	for _, s := range steps {
		switch {
		case s.State == store.StateProcessing, s.State == store.StateRetrying:
			return false, nil
		case s.State == store.StatePending && s.Waiting == 0:
			return false, nil
		}
	}
	return true, nil
}

// collect reads the final state of runs, steps, events and destinations into sum.
func collect(ctx context.Context, st store.Store, ds *destinations, sum *Summary) error {
	sum.Destinations = sum.Destinations[:0]
	for _, d := range ds.all() {
		sum.Destinations = append(sum.Destinations, d.Stats())
	}
	runs, err := st.RunList(ctx, store.RunListParams{Workflow: WorkflowName, Limit: sum.Runs + 1})
	if err != nil {
		return err
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID < runs[j].ID })
	sum.RunsByState = map[string]int{}
	sum.ReviewReasons = map[string]int{}
	sum.runs = runs
	sum.steps = map[int64][]*store.Step{}
	for _, r := range runs {
		sum.RunsByState[string(r.State)]++
		steps, err := st.StepListByRun(ctx, r.ID)
		if err != nil {
			return err
		}
		sum.steps[r.ID] = steps
		for _, s := range steps {
			if s.State != store.StateNeedsReview {
				continue
			}
			sum.ReviewReasons[s.Reason]++
			sum.ReviewItems = append(sum.ReviewItems, ReviewItem{RunID: r.ID, RunKey: r.RunKey, Entity: r.Entity,
				Step: s.Name, EffectKey: s.EffectKey, Reason: s.Reason, Error: s.LastError})
		}
	}
	const page = 1000
	for after := int64(0); ; {
		evs, err := st.EventList(ctx, store.EventListParams{AfterID: after, Limit: page})
		if err != nil {
			return err
		}
		for _, e := range evs {
			switch e.Type {
			case store.EventStepClaimed:
				sum.Engine.Attempts++
			case store.EventStepRetryPlanned:
				if e.Reason == store.ReasonOutcomeUnknown || e.Reason == store.ReasonLeaseExpired {
					sum.Engine.UnknownOutcomesRetried++
				} else {
					sum.Engine.RetriesScheduled++
				}
			case store.EventEffectReused:
				sum.Engine.EffectsReused++
			case store.EventEffectWaiting:
				sum.Engine.EffectWaits++
			case store.EventEffectConflict:
				sum.Engine.KeyConflicts++
			}
		}
		if len(evs) < page {
			break
		}
		after = evs[len(evs)-1].ID
	}
	return nil
}

// sqliteURL is the --db value that names path from any directory.
func sqliteURL(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return "sqlite://" + filepath.ToSlash(path)
}
