package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/cmd/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/duration"
)

type benchFlags struct {
	scenario      string
	quick         bool
	json          bool
	progress      bool
	cpuProfile    string
	runs          int
	steps         int
	starters      int
	workers       int
	clients       int
	repeatShare   float64
	ledgerEffects int
	backlog       int
	batch         int
	duration      time.Duration
}

// benchDefaults are the sizes of a full run and of --quick.
var benchDefaults = struct {
	runs, dedupeRuns, clients, ledgerEffects, backlog, batchRuns [2]int
	duration, backlogWindow                                      [2]time.Duration
}{
	runs:          [2]int{20000, 300},
	dedupeRuns:    [2]int{2000, 300},
	clients:       [2]int{64, 8},
	ledgerEffects: [2]int{1_000_000, 10_000},
	backlog:       [2]int{1_000_000, 5000},
	batchRuns:     [2]int{100_000, 2000},
	duration:      [2]time.Duration{10 * time.Second, time.Second},
	backlogWindow: [2]time.Duration{5 * time.Second, time.Second},
}

// backlogSteps is how many steps the backlog scenario waits for, at least.
const backlogSteps = 10_000

func newBenchCommand(g *globals) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure what one onceflow process carries on a database, to size a deployment",
		Long: `bench runs scenarios through the library's public API and prints one row per scenario:

  steps    R runs (--runs, 20000) of a K-step chain of no-op steps (--steps, 3), started by
           C goroutines (--starters, 16) while W workers (--workers, 100) execute them;
           steps per second until every run completed, and the latency of a start.
  ingest   the HTTP API as 'onceflow serve' assembles it, on 127.0.0.1: C clients
           (--clients, 64) POST runs of a one-step workflow with an Idempotency-Key for
           --duration (10s), or --runs requests if given; a share of them (--repeat-share,
           0.1) repeats a key already acknowledged and must get the first run back.
           Requests per second, their latency, and the steps executed meanwhile.
  dedupe   the latency of starting 2000 known run keys (--runs) again, in random order and
           at most 1000 a second, for --duration (and each key at least once), while C
           goroutines start new runs and W workers execute them.
  ledger   steps per second of a one-step chain with M completed effects in the ledger
           (--ledger-effects, 1000000), and the ratio to an empty database.
  backlog  N pending runs (--backlog, 1000000) loaded in bulk, then served by W workers
           for at least 5 s (--duration) and until 10000 steps completed: the peak
           resident memory and the steps per second.
  batch    an import of 100000 leads (--runs) started with StartMany in batches of
           --batch (500) by C goroutines while W workers execute their one step; starts
           and steps per second until every run completed, and the latency of StartMany.

--quick shrinks every size so that all scenarios take seconds (300 runs, 8 clients for
1 s, 10000 effects, 5000 pending runs, 2000 leads); flags given explicitly win.

Each scenario runs on databases of its own and removes them when it ends. Without --db
(ONCEFLOW_DB is not consulted) they are SQLite files in a new temporary directory. --db
may name a directory, which receives a temporary directory of its own, or a SQLite file
that does not exist yet, whose name the files are named after (bench.db gives
bench-steps.db, …); an existing file is refused. With a postgres:// URL, each scenario
creates a schema onceflow_bench_<random> in that database and drops it at the end.

The peak resident memory (max_rss_mb) is the process's, from getrusage; on Linux it is
reset when each scenario starts (for backlog: once the rows are loaded). A scenario whose
own checks fail (runs not completed, a repeated key answered with another run) lists
them, and bench exits with status 1.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scenario, "scenario", "all", "scenarios to run, comma-separated: "+strings.Join(bench.Scenarios, ",")+", or all")
	fl.BoolVar(&f.quick, "quick", false, "small sizes: all scenarios in seconds")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per scenario and line instead of a table")
	fl.BoolVar(&f.progress, "progress", false, "draw the progress line on stderr even when it is not a terminal")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the scenarios to this file (read it with 'go tool pprof')")
	fl.IntVar(&f.runs, "runs", benchDefaults.runs[0], "runs started by steps and ledger (quick 300); known runs of dedupe (default 2000); requests of ingest instead of --duration; leads of batch (default 100000, quick 2000)")
	fl.IntVar(&f.batch, "batch", 500, "items of each StartMany call of batch (at most 1000)")
	fl.IntVar(&f.steps, "steps", 3, "steps per run of the steps and dedupe chains")
	fl.IntVar(&f.starters, "starters", 16, "goroutines starting runs at once")
	fl.IntVar(&f.workers, "workers", 100, "steps executed at once")
	fl.IntVar(&f.clients, "clients", benchDefaults.clients[0], "HTTP clients of ingest (quick 8)")
	fl.Float64Var(&f.repeatShare, "repeat-share", 0.1, "share of ingest requests that repeat an acknowledged key, 0 to 1")
	fl.IntVar(&f.ledgerEffects, "ledger-effects", benchDefaults.ledgerEffects[0], "completed effects loaded before the ledger scenario (quick 10000)")
	fl.IntVar(&f.backlog, "backlog", benchDefaults.backlog[0], "pending runs loaded before the backlog scenario (quick 5000)")
	fl.Var(duration.NewFlag(&f.duration, benchDefaults.duration[0]), "duration", "how long ingest sends requests and dedupe repeats starts (quick 1s); how long backlog serves at least (default 5s, quick 1s)")
	return cmd
}

func runBench(cmd *cobra.Command, g *globals, f benchFlags) error {
	scenarios, err := bench.ParseScenarios(f.scenario)
	if err != nil {
		return usagef("--scenario: %v", err)
	}
	cfg, err := benchConfig(cmd, f)
	if err != nil {
		return err
	}
	target, cleanup, err := benchTarget(cmd, g)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.Target = target
	if target.PostgresURL != "" {
		outf(g.stderr, "onceflow bench: a schema of its own per scenario in %s, dropped at the end\n", dbLocation{Scheme: "postgres", ConnString: target.PostgresURL}.URL())
	} else {
		outf(g.stderr, "onceflow bench: SQLite files in %s, removed at the end\n", target.SQLiteDir)
	}
	if f.progress || isTerminal(g.stderr) {
		cfg.Progress = g.stderr
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}

	var reports []bench.Report
	var failed []string
	var runErr error
	for _, name := range scenarios {
		rep, err := bench.Run(cmd.Context(), cfg, name)
		if err != nil {
			runErr = err
			break
		}
		reports = append(reports, rep)
		for _, msg := range rep.Summary().Failures {
			failed = append(failed, name+": "+msg)
		}
		if f.json {
			if err := writeJSONLine(g.stdout, rep); err != nil {
				return err
			}
		}
	}
	if !f.json && len(reports) > 0 {
		if err := writeBenchTable(g.stdout, reports); err != nil {
			return err
		}
	}
	if runErr != nil {
		if cmd.Context().Err() != nil {
			return errors.New("bench interrupted; the databases it created are removed")
		}
		return runErr
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench: checks failed, the figures cannot be trusted: %s", strings.Join(failed, "; "))
	}
	return nil
}

// benchConfig checks the sizes and applies the defaults of --quick to the flags not given.
func benchConfig(cmd *cobra.Command, f benchFlags) (bench.Config, error) {
	changed := cmd.Flags().Changed
	q := 0
	if f.quick {
		q = 1
	}
	pick := func(flag string, v int, defaults [2]int) int {
		if changed(flag) {
			return v
		}
		return defaults[q]
	}
	cfg := bench.Config{
		Runs:          pick("runs", f.runs, benchDefaults.runs),
		Steps:         f.steps,
		Starters:      f.starters,
		Workers:       f.workers,
		Clients:       pick("clients", f.clients, benchDefaults.clients),
		RepeatShare:   f.repeatShare,
		DedupeRuns:    pick("runs", f.runs, benchDefaults.dedupeRuns),
		LedgerEffects: pick("ledger-effects", f.ledgerEffects, benchDefaults.ledgerEffects),
		Backlog:       pick("backlog", f.backlog, benchDefaults.backlog),
		BatchRuns:     pick("runs", f.runs, benchDefaults.batchRuns),
		BatchSize:     f.batch,
		BacklogSteps:  backlogSteps,
	}
	cfg.IngestDuration, cfg.DedupeDuration, cfg.BacklogWindow = benchDefaults.duration[q], benchDefaults.duration[q], benchDefaults.backlogWindow[q]
	if changed("duration") {
		cfg.IngestDuration, cfg.DedupeDuration, cfg.BacklogWindow = f.duration, f.duration, f.duration
	}
	if changed("runs") {
		cfg.IngestRequests = f.runs
	}
	for _, c := range []struct {
		flag     string
		v, least int
	}{
		{"runs", f.runs, 1}, {"steps", f.steps, 1}, {"starters", f.starters, 1}, {"workers", f.workers, 1},
		{"clients", f.clients, 1}, {"ledger-effects", f.ledgerEffects, 0}, {"backlog", f.backlog, 1},
	} {
		if c.v < c.least {
			return cfg, usagef("--%s must be at least %d, got %d", c.flag, c.least, c.v)
		}
	}
	const maxRows = 100_000_000
	for _, c := range []struct {
		flag string
		v    int
	}{{"runs", f.runs}, {"ledger-effects", f.ledgerEffects}, {"backlog", f.backlog}} {
		if c.v > maxRows {
			return cfg, usagef("--%s must be at most %d, got %d", c.flag, maxRows, c.v)
		}
	}
	if f.batch < 1 || f.batch > onceflow.DefaultMaxStartMany {
		return cfg, usagef("--batch must be between 1 and %d, got %d", onceflow.DefaultMaxStartMany, f.batch)
	}
	if f.steps > 100 {
		return cfg, usagef("--steps must be at most 100, got %d", f.steps)
	}
	if f.repeatShare < 0 || f.repeatShare > 1 || f.repeatShare != f.repeatShare {
		return cfg, usagef("--repeat-share must be between 0 and 1, got %v", f.repeatShare)
	}
	if f.duration <= 0 {
		return cfg, usagef("--duration must be positive, got %v", f.duration)
	}
	return cfg, nil
}

// benchTarget decides where the scenarios create their databases (see the command's
// help) and returns what removes what it created for them.
func benchTarget(cmd *cobra.Command, g *globals) (bench.Target, func(), error) {
	none := func() {}
	if !cmd.Flags().Changed("db") {
		dir, err := os.MkdirTemp("", "onceflow-bench-")
		if err != nil {
			return bench.Target{}, none, fmt.Errorf("bench: %w", err)
		}
		return bench.Target{SQLiteDir: dir}, func() { os.RemoveAll(dir) }, nil
	}
	loc, err := parseDBURL(g.db)
	if err != nil && strings.HasSuffix(g.db, "/") {
		// A directory, written with its slash, which the other commands refuse.
		if dir, derr := parseDBURL(strings.TrimRight(g.db, "/")); derr == nil && dir.Scheme == "sqlite" {
			loc, err = dir, nil
		}
	}
	if err != nil {
		return bench.Target{}, none, &usageError{err: err}
	}
	if loc.Scheme == "postgres" {
		if loc.Schema != "" {
			return bench.Target{}, none, usagef("--db: bench creates and drops a schema of its own for each scenario; remove ?schema=%s", loc.Schema)
		}
		return bench.Target{PostgresURL: loc.ConnString}, none, nil
	}
	fi, err := os.Stat(loc.Path)
	switch {
	case err == nil && fi.IsDir():
		dir, err := os.MkdirTemp(loc.Path, "onceflow-bench-")
		if err != nil {
			return bench.Target{}, none, fmt.Errorf("bench: %w", err)
		}
		return bench.Target{SQLiteDir: dir}, func() { os.RemoveAll(dir) }, nil
	case err == nil:
		return bench.Target{}, none, fmt.Errorf("bench: %s already exists; bench never opens an existing database: name a new file, or a directory to create its databases in", loc.Path)
	case !errors.Is(err, os.ErrNotExist):
		return bench.Target{}, none, fmt.Errorf("bench: %w", err)
	}
	dir := filepath.Dir(loc.Path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return bench.Target{}, none, fmt.Errorf("bench: --db %s: directory %s does not exist", g.db, dir)
	}
	return bench.Target{SQLiteDir: dir, SQLiteName: filepath.Base(loc.Path)}, none, nil
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeBenchTable writes one row per report.
func writeBenchTable(w io.Writer, reports []bench.Report) error {
	tw := newTable(w)
	outf(tw, "SCENARIO\tDB\tRUNS\tSTEPS\tSECONDS\tSTEPS/S\tP50 MS\tP99 MS\tMAX RSS MB\tWORKERS\tNOTES\n")
	for _, r := range reports {
		s := r.Summary()
		note := r.Note()
		if len(s.Failures) > 0 {
			note = "CHECKS FAILED: " + strings.Join(s.Failures, "; ")
		}
		outf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.0f\t%.2f\t%.2f\t%.0f\t%d\t%s\n",
			s.Scenario, s.DB, s.Runs, s.Steps, s.Seconds, s.StepsPerSecond, s.P50Ms, s.P99Ms, s.MaxRSSMB, s.Workers, note)
	}
	return tw.Flush()
}

// isTerminal reports whether w is a terminal: a character device other than /dev/null.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// startCPUProfile writes a CPU profile to path until the returned function is called.
func startCPUProfile(path string) (func(), error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		out.Close()
	}, nil
}
