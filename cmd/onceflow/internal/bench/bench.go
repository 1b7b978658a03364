// Package bench measures, end to end and through the library's public API only, what one
// onceflow process carries on a given database, so that a deployment can be sized: the
// figures `onceflow bench` prints.
//
// Each scenario runs on databases of its own, created fresh for it and removed when it
// ends (a new SQLite file, or a new schema in a PostgreSQL database; see Target), and
// reports one Report:
//
//   - steps: a K-step chain of no-op steps; C goroutines start R runs with unique keys
//     while Serve executes them with W workers; steps per second from the first start
//     until every run is completed, and the latency of Start.
//   - ingest: the HTTP API exactly as `onceflow serve` assembles it, on 127.0.0.1; C
//     clients POST runs of a one-step workflow with an Idempotency-Key, a share of them
//     repeating a key already acknowledged; requests per second, their latency, and
//     whether the steps keep up.
//   - dedupe: the latency of starting a known run key again while a steps-like load runs.
//   - ledger: steps per second with M completed effects already in the ledger, against an
//     empty database in the same invocation.
//   - backlog: the memory and the throughput of serving N pending runs, loaded in bulk.
//   - batch: an import of R leads started with StartMany in batches of B by C goroutines
//     while Serve executes their one step with W workers; starts and steps per second
//     until every run is completed, and the latency of StartMany.
//
// Bulk loads write rows with SQL of the backend's own dialect (bulk_sqlite.go,
// bulk_postgres.go) into the tables the store's migrations created; everything else goes
// through onceflow.Client, the store's constructors and onceflowhttp.
//
// A scenario also checks what it measured: every run it started completed, every repeated
// key answered with the run it first started and no other, the database holds one run per
// key. A check that fails is listed in Result.Failures.
package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Scenarios lists the scenario names in the order "all" runs them.
var Scenarios = []string{"steps", "ingest", "dedupe", "ledger", "backlog", "batch"}

// Config says what to measure and where. The CLI fills every field; zero values are not
// defaults.
type Config struct {
	// Target is where the scenarios' databases are created.
	Target Target

	// Runs is how many runs the steps and ledger scenarios start.
	Runs int
	// Steps is the length of the chain the steps and dedupe scenarios run (K).
	Steps int
	// Starters is how many goroutines start runs at once (C).
	Starters int
	// Workers is how many steps Serve executes at once (W).
	Workers int

	// Clients is how many HTTP clients the ingest scenario runs at once.
	Clients int
	// IngestRequests, when positive, is how many requests the ingest scenario sends;
	// otherwise it sends them for IngestDuration.
	IngestRequests int
	IngestDuration time.Duration
	// RepeatShare is the share of ingest requests that repeat an acknowledged key, in [0, 1].
	RepeatShare float64

	// DedupeRuns is how many runs the dedupe scenario creates and then starts again, for
	// DedupeDuration (at least once each).
	DedupeRuns     int
	DedupeDuration time.Duration

	// LedgerEffects is how many completed effects the ledger scenario loads first.
	LedgerEffects int

	// Backlog is how many pending runs the backlog scenario loads.
	Backlog int
	// BacklogWindow is how long the backlog scenario serves at least; it also waits for
	// the first BacklogSteps steps (or all of them, if fewer) to complete.
	BacklogWindow time.Duration
	BacklogSteps  int

	// BatchRuns is how many runs the batch scenario imports, BatchSize how many items each
	// StartMany call holds.
	BatchRuns, BatchSize int

	// Progress, when set, receives a progress line rewritten in place with '\r'.
	Progress io.Writer
}

// Report is what one scenario measured.
type Report interface {
	// Summary returns the fields every scenario reports.
	Summary() *Result
	// Note is a short text of the scenario's own figures, for the table.
	Note() string
}

// Result holds the fields every scenario reports. Scenario reports embed it, so that
// their JSON form is one flat object.
type Result struct {
	Scenario string `json:"scenario"`
	// DB is the backend: "sqlite" or "postgres".
	DB string `json:"db"`
	// Runs is how many runs the scenario started (or loaded) and saw completed.
	Runs int64 `json:"runs"`
	// Steps is how many steps completed.
	Steps int64 `json:"steps"`
	// Seconds is the measured window.
	Seconds        float64 `json:"seconds"`
	StepsPerSecond float64 `json:"steps_per_second"`
	// P50Ms and P99Ms are latencies of the scenario's requests, in milliseconds: Start for
	// steps, ledger and dedupe, the HTTP request for ingest, StartMany for batch; 0 for
	// backlog.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// MaxRSSMB is the process's peak resident set in MiB (getrusage). On Linux the peak is
	// reset when the scenario starts (RSSPeakReset); elsewhere it is the peak since the
	// process started.
	MaxRSSMB     float64 `json:"max_rss_mb"`
	RSSPeakReset bool    `json:"rss_peak_reset"`
	Workers      int     `json:"workers"`
	// Failures lists the checks that failed; empty when the figures can be trusted.
	Failures []string `json:"failures,omitempty"`
}

// Summary implements Report.
func (r *Result) Summary() *Result { return r }

func (r *Result) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// ParseScenarios turns a comma-separated list of scenario names (or "all") into the
// names to run, without repeats, in the order given.
func ParseScenarios(s string) ([]string, error) {
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch {
		case name == "":
			continue
		case name == "all":
			for _, n := range Scenarios {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		case slices.Contains(Scenarios, name):
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		default:
			return nil, fmt.Errorf("unknown scenario %q; choose from %s, or all", name, strings.Join(Scenarios, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario named; choose from %s, or all", strings.Join(Scenarios, ", "))
	}
	return out, nil
}

// Run runs one scenario and returns its report. The report comes back with a nil error
// even when some of its checks failed (see Result.Failures); an error means the scenario
// could not be measured.
func Run(ctx context.Context, cfg Config, scenario string) (Report, error) {
	var (
		rep Report
		err error
	)
	reset := rssBegin()
	switch scenario {
	case "steps":
		rep, err = runSteps(ctx, cfg)
	case "ingest":
		rep, err = runIngest(ctx, cfg)
	case "dedupe":
		rep, err = runDedupe(ctx, cfg)
	case "ledger":
		rep, err = runLedger(ctx, cfg)
	case "backlog":
		rep, err = runBacklog(ctx, cfg)
	case "batch":
		rep, err = runBatch(ctx, cfg)
	default:
		return nil, fmt.Errorf("bench: unknown scenario %q", scenario)
	}
	if err != nil {
		return nil, fmt.Errorf("bench %s: %w", scenario, err)
	}
	if s := rep.Summary(); s.MaxRSSMB == 0 {
		s.MaxRSSMB, s.RSSPeakReset = rssPeak(), reset
	}
	return rep, nil
}

// result is the common part of a report of scenario name.
func (c Config) result(name string) Result {
	return Result{Scenario: name, DB: c.Target.Kind(), Workers: c.Workers}
}

// progress is the progress line of scenario name on d.
func (c Config) progress(name string, d *database) progress {
	return progress{w: c.Progress, label: name + " " + d.kind}
}
