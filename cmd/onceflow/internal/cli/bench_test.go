package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/testsvc"

	"github.com/jackc/pgx/v5"
)

// benchLine is one line of `onceflow bench --json`.
type benchLine struct {
	Scenario       string   `json:"scenario"`
	DB             string   `json:"db"`
	Runs           int64    `json:"runs"`
	Steps          int64    `json:"steps"`
	Seconds        float64  `json:"seconds"`
	StepsPerSecond float64  `json:"steps_per_second"`
	P50Ms          float64  `json:"p50_ms"`
	P99Ms          float64  `json:"p99_ms"`
	MaxRSSMB       float64  `json:"max_rss_mb"`
	Workers        int      `json:"workers"`
	Failures       []string `json:"failures"`

	StepsPerRun int `json:"steps_per_run"`
	Starters    int `json:"starters"`

	Clients           int     `json:"clients"`
	Requests          int64   `json:"requests"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	Keys              int64   `json:"keys"`
	RunsInDB          int64   `json:"runs_in_db"`
	Repeats           int64   `json:"repeats"`
	Replayed          int64   `json:"replayed"`
	Conflicts         int64   `json:"conflicts"`
	Errors            int64   `json:"errors"`

	KnownRuns  int64 `json:"known_runs"`
	Probes     int64 `json:"probes"`
	Duplicates int64 `json:"duplicates"`

	LedgerEffects       int64   `json:"ledger_effects"`
	EmptyStepsPerSecond float64 `json:"empty_steps_per_second"`
	RatioToEmpty        float64 `json:"ratio_to_empty"`

	Backlog   int64 `json:"backlog"`
	Remaining int64 `json:"remaining"`

	BatchSize       int     `json:"batch_size"`
	Batches         int64   `json:"batches"`
	StartsPerSecond float64 `json:"starts_per_second"`
}

// Sizes of the bench runs of the tests: --quick, smaller still, so that every scenario on
// both databases takes seconds.
const (
	testBenchRuns    = 60
	testBenchSteps   = 2
	testBenchEffects = 3000
	testBenchBacklog = 600
)

var testBenchArgs = []string{"bench", "--quick", "--json",
	"--runs", "60", "--steps", "2", "--ledger-effects", "3000", "--backlog", "600",
	"--starters", "4", "--workers", "16", "--clients", "4", "--repeat-share", "0.3", "--duration", "300ms", "--batch", "7"}

// benchAll runs every scenario on db, checks what each line reports and returns stderr.
func benchAll(t *testing.T, db, kind string) (stderr string) {
	t.Helper()
	r := runOK(t, append(slices.Clone(testBenchArgs), "--db", db)...)
	var lines []benchLine
	for _, s := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var l benchLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("not a JSON line: %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	var names []string
	for _, l := range lines {
		names = append(names, l.Scenario)
	}
	if want := []string{"steps", "ingest", "dedupe", "ledger", "backlog", "batch"}; !slices.Equal(names, want) {
		t.Fatalf("scenarios %v, want %v", names, want)
	}
	for _, l := range lines {
		t.Run(l.Scenario, func(t *testing.T) {
			if len(l.Failures) > 0 {
				t.Errorf("failures: %v", l.Failures)
			}
			if l.DB != kind {
				t.Errorf("db %q, want %q", l.DB, kind)
			}
			if l.StepsPerSecond <= 0 || l.Seconds <= 0 || l.MaxRSSMB <= 0 || l.Workers != 16 {
				t.Errorf("steps/s %v, seconds %v, max RSS %v MB, workers %d: want all positive, 16 workers", l.StepsPerSecond, l.Seconds, l.MaxRSSMB, l.Workers)
			}
			switch l.Scenario {
			case "steps":
				if l.Runs != testBenchRuns || l.Steps != testBenchRuns*testBenchSteps || l.StepsPerRun != testBenchSteps {
					t.Errorf("runs %d, steps %d of %d: want %d runs of %d steps completed", l.Runs, l.Steps, l.StepsPerRun, testBenchRuns, testBenchSteps)
				}
				if l.P50Ms <= 0 || l.P99Ms < l.P50Ms {
					t.Errorf("start latency p50 %v ms, p99 %v ms", l.P50Ms, l.P99Ms)
				}
			case "ingest":
				// --runs makes ingest send that many requests; each new key starts one
				// run, and a repeated key starts none.
				if l.Requests != testBenchRuns || l.Keys+l.Repeats != l.Requests {
					t.Errorf("%d requests: %d new keys and %d repeats; want %d requests", l.Requests, l.Keys, l.Repeats, testBenchRuns)
				}
				if l.RunsInDB != l.Keys || l.Runs != l.Keys || l.Steps != l.Keys {
					t.Errorf("%d distinct keys sent; the database holds %d runs, %d completed, %d steps", l.Keys, l.RunsInDB, l.Runs, l.Steps)
				}
				if l.Errors != 0 || l.Replayed+l.Conflicts != l.Repeats {
					t.Errorf("%d errors; %d repeats: %d replayed, %d conflicts", l.Errors, l.Repeats, l.Replayed, l.Conflicts)
				}
				if l.RequestsPerSecond <= 0 || l.Clients != 4 || l.P50Ms <= 0 {
					t.Errorf("requests/s %v, clients %d, p50 %v ms", l.RequestsPerSecond, l.Clients, l.P50Ms)
				}
			case "dedupe":
				if l.KnownRuns != testBenchRuns || l.Probes < l.KnownRuns || l.Duplicates != l.Probes {
					t.Errorf("%d known runs, %d repeated starts, %d returned the known run", l.KnownRuns, l.Probes, l.Duplicates)
				}
				if l.Runs < testBenchRuns || l.Steps != l.Runs*testBenchSteps {
					t.Errorf("runs %d, steps %d: want every run started completed", l.Runs, l.Steps)
				}
			case "ledger":
				if l.Runs != testBenchRuns || l.Steps != testBenchRuns || l.LedgerEffects != testBenchEffects {
					t.Errorf("runs %d, steps %d, ledger effects %d", l.Runs, l.Steps, l.LedgerEffects)
				}
				if l.EmptyStepsPerSecond <= 0 || l.RatioToEmpty <= 0 {
					t.Errorf("empty database %v steps/s, ratio %v", l.EmptyStepsPerSecond, l.RatioToEmpty)
				}
			case "batch":
				// --runs leads in calls of --batch items: 60 = 8 × 7 + 4.
				if l.Runs != testBenchRuns || l.Steps != testBenchRuns || l.BatchSize != 7 || l.Batches != 9 || l.StartsPerSecond <= 0 {
					t.Errorf("runs %d, steps %d, batch size %d, %d calls, %v starts/s; want %d runs in 9 calls of at most 7",
						l.Runs, l.Steps, l.BatchSize, l.Batches, l.StartsPerSecond, testBenchRuns)
				}
				if l.P50Ms <= 0 || l.P99Ms < l.P50Ms {
					t.Errorf("StartMany latency p50 %v ms, p99 %v ms", l.P50Ms, l.P99Ms)
				}
			case "backlog":
				// Fewer than 10,000 pending runs: the scenario waits for all of them.
				if l.Backlog != testBenchBacklog || l.Runs != testBenchBacklog || l.Steps != testBenchBacklog || l.Remaining != 0 {
					t.Errorf("backlog %d: runs %d, steps %d, remaining %d", l.Backlog, l.Runs, l.Steps, l.Remaining)
				}
			}
		})
	}
	return r.stderr
}

// Every scenario measures and checks itself on a SQLite file named by --db, and removes
// every file it created.
func TestBenchSQLite(t *testing.T) {
	dir := t.TempDir()
	stderr := benchAll(t, filepath.Join(dir, "bench.db"), "sqlite")
	if !strings.Contains(stderr, "SQLite files in "+dir+",") {
		t.Errorf("stderr does not say the databases are in %s: %q", dir, stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("bench left %d files in %s, first %s", len(left), dir, left[0].Name())
	}
}

// Every scenario on PostgreSQL, each in a schema of its own that is dropped at the end
// (in a database of the test's own, where no other test makes schemas meanwhile).
func TestBenchPostgres(t *testing.T) {
	url := testsvc.PostgresDatabase(t, "onceflow_cli_bench_")
	benchAll(t, url, "postgres")
	if left := benchSchemas(t, url); len(left) > 0 {
		t.Errorf("bench left schemas behind: %v", left)
	}
}

func benchSchemas(t *testing.T, url string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'onceflow\_bench\_%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// --db naming a directory gets a temporary directory of its own inside, removed at the
// end; the progress line can be forced on; --cpuprofile writes a profile pprof reads.
func TestBenchDirectoryAndProgress(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	r := runOK(t, "bench", "--scenario", "steps", "--runs", "10", "--starters", "2", "--workers", "4", "--progress", "--db", dir+"/", "--cpuprofile", prof)
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("--cpuprofile %s: not a gzipped profile (%d bytes, %v)", prof, len(b), err)
	}
	if !strings.Contains(r.stdout, "SCENARIO") || !strings.Contains(r.stdout, "steps") {
		t.Errorf("no table:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "SQLite files in "+dir+"/onceflow-bench-") {
		t.Errorf("stderr does not say the databases are in %s: %q", dir, r.stderr)
	}
	if !strings.Contains(r.stderr, "\r[") {
		t.Errorf("no progress line on stderr: %q", r.stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("bench left %s in %s", left[0].Name(), dir)
	}
}

// bench never opens a database that exists.
func TestBenchRefusesExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prod.db")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "bench", "--quick", "--scenario", "steps", "--db", path)
	if r.code != exitError || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("exit %d, stderr %q: want 1 and a refusal", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Errorf("the file was changed: %q", b)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "steps,nope"}, `unknown scenario "nope"`},
		{[]string{"--scenario", ","}, "no scenario"},
		{[]string{"--runs", "-5"}, "--runs must be at least 1"},
		{[]string{"--steps", "0"}, "--steps must be at least 1"},
		{[]string{"--workers", "-1"}, "--workers must be at least 1"},
		{[]string{"--ledger-effects", "-1"}, "--ledger-effects must be at least 0"},
		{[]string{"--backlog", "-3"}, "--backlog must be at least 1"},
		{[]string{"--repeat-share", "1.5"}, "--repeat-share must be between 0 and 1"},
		{[]string{"--repeat-share", "-0.1"}, "--repeat-share must be between 0 and 1"},
		{[]string{"--duration", "0s"}, "--duration must be positive"},
		{[]string{"--runs", "many"}, "invalid argument"},
		{[]string{"--db", "postgres://u@127.0.0.1:1/db?schema=mine"}, "remove ?schema=mine"},
		{[]string{"extra"}, "takes no arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := run(t, append([]string{"bench"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q: want %d and %q", r.code, r.stderr, exitUsage, tc.want)
			}
		})
	}
}
