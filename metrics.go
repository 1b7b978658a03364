package onceflow

import (
	"time"

	"github.com/onceflow/onceflow/store"
)

// Metrics receives measurements of the engine's work as it happens (Config.Metrics).
// Package metrics implements it for Prometheus; the engine itself depends on no metrics
// library. Observe is called from many goroutines, on the engine's hot path: it must be
// safe for concurrent use, quick, and must not block.
//
// Counts of what is in the store (runs and steps by state, the review queue, due steps)
// are not measurements: read them with the store's StatsGet.
type Metrics interface {
	Observe(Measurement)
}

// MeasurementKind says what a Measurement is about.
type MeasurementKind string

// Measurement kinds. New kinds may be added; implementations ignore kinds they do not know.
const (
	// MeasureRunStart: Start or StartTx found or created a run. Workflow is set; Outcome
	// is RunCreated, RunDeduplicated (the run key was known, with the same input) or
	// RunConflict (known, with another input).
	MeasureRunStart MeasurementKind = "run_start"
	// MeasureStepClaim: a step was claimed for an attempt. Workflow and Step are set;
	// Duration is the claim lag, how long after the step became due it was claimed.
	MeasureStepClaim MeasurementKind = "step_claim"
	// MeasureEffectReuse: a step completed from the effect ledger without acting, since
	// its effect key was already completed. Workflow and Step are set.
	MeasureEffectReuse MeasurementKind = "effect_reuse"
	// MeasureAttempt: an attempt finished. Workflow and Step are set; Outcome is its
	// outcome class (success, retryable, permanent, unknown); Duration is how long the
	// step function ran.
	MeasureAttempt MeasurementKind = "attempt"
	// MeasureLeaseReap: the lease reaper took back Count steps whose worker vanished.
	MeasureLeaseReap MeasurementKind = "lease_reap"
	// MeasureCommit: one transaction of the write path committed (or failed, Outcome
	// "error") Count items of one kind, named by Step: CommitStarts, CommitRecords or
	// CommitClaims. Duration is how long it took. The batch sizes show how much group
	// commit gathers.
	MeasureCommit MeasurementKind = "commit"
	// MeasureClockSkew: the database's clock was measured (on a store.ClockSource such as
	// PostgreSQL, every Config.ClockSync while Serve runs). Duration is the skew,
	// Config.Clock minus the database's clock: positive when this machine's clock is ahead.
	// The engine's decisions use the database's clock whatever it is.
	MeasureClockSkew MeasurementKind = "clock_skew"
)

// Kinds of MeasureCommit, in its Step field.
const (
	CommitStarts  = "starts"
	CommitRecords = "records"
	CommitClaims  = "claims"
)

// Outcomes of MeasureRunStart.
const (
	RunCreated      = "created"
	RunDeduplicated = "deduplicated"
	RunConflict     = "conflict"
)

// Measurement is one observation. Its fields name workflows, steps and outcome classes
// only, never keys, entities or ids, so that metrics built from them stay bounded.
type Measurement struct {
	Kind     MeasurementKind
	Workflow string
	Step     string
	Outcome  string
	Duration time.Duration
	Count    int
}

// noMetrics is the Metrics of a client configured without any.
type noMetrics struct{}

func (noMetrics) Observe(Measurement) {}

// observeCommit reports a write-path transaction of kind holding items.
func (c *Client) observeCommit(kind string, items int, took time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	c.metrics.Observe(Measurement{Kind: MeasureCommit, Step: kind, Outcome: outcome, Count: items, Duration: took})
}

func (c *Client) observeStart(p store.RunInsertParams, run *store.Run, created bool) {
	outcome := RunCreated
	switch {
	case created:
	case run.InputHash == p.InputHash:
		outcome = RunDeduplicated
	default:
		outcome = RunConflict
	}
	c.metrics.Observe(Measurement{Kind: MeasureRunStart, Workflow: p.Workflow, Outcome: outcome})
}

// claimed reports what a claim at now did: the lag of each claimed step, and each step
// completed from the ledger.
func (c *Client) claimed(now time.Time, res *store.ClaimResult) {
	for _, cs := range res.Claimed {
		lag := now.Sub(cs.Step.NextAt)
		if cs.Step.NextAt.IsZero() || lag < 0 {
			lag = 0
		}
		c.metrics.Observe(Measurement{Kind: MeasureStepClaim, Workflow: cs.Step.Workflow, Step: cs.Step.Name, Duration: lag})
	}
	for _, cs := range res.ReusedSteps {
		c.metrics.Observe(Measurement{Kind: MeasureEffectReuse, Workflow: cs.Step.Workflow, Step: cs.Step.Name})
		c.stepLog(cs.Run, cs.Step).Debug("step completed from the effect ledger without acting; its effect key was already completed")
	}
}

func (c *Client) observeAttempt(st *store.Step, outcome store.Outcome, d time.Duration) {
	c.metrics.Observe(Measurement{Kind: MeasureAttempt, Workflow: st.Workflow, Step: st.Name, Outcome: string(outcome), Duration: d})
}
