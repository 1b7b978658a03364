package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/cmd/onceflow/internal/demo"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

func TestMain(m *testing.M) {
	// A test that needs the command as a process of its own (to send it signals) runs this
	// test binary with ONCEFLOW_TEST_COMMAND set to the command's arguments, as JSON.
	if args := os.Getenv("ONCEFLOW_TEST_COMMAND"); args != "" {
		var list []string
		if err := json.Unmarshal([]byte(args), &list); err != nil {
			fmt.Fprintln(os.Stderr, "ONCEFLOW_TEST_COMMAND:", err)
			os.Exit(2)
		}
		os.Args = append([]string{"onceflow"}, list...)
		setFileLimit(os.Getenv("ONCEFLOW_TEST_NOFILE"))
		mainWith(checkAPIInCommand())
	}
	checkAPI() // every API request of these tests is checked against the OpenAPI document
	goleak.VerifyTestMain(testsvc.Report(m), goleak.Cleanup(func(code int) { os.Exit(reportAPIProblems(code)) }))
}

// result is what one in-process invocation produced.
type result struct {
	stdout, stderr string
	code           int
}

// run executes the command tree with args.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(context.Background(), args, &out, &errOut, apiMiddleware)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// runOK executes args and fails the test unless the exit status is 0.
func runOK(t *testing.T, args ...string) result {
	t.Helper()
	r := run(t, args...)
	if r.code != 0 {
		t.Fatalf("onceflow %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// fixture is a database holding one run of a two-step workflow: "notify" completed and
// "charge" parked in needs_review after a permanent error.
type fixture struct {
	db    string // --db value
	runID int64
}

func setup(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "test-worker"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Register(onceflow.Workflow{
		Name:   "order-paid",
		Entity: "order:{input.order_id}",
		Steps: []onceflow.Step{
			{ID: "notify", EffectKey: "notify:{input.order_id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return map[string]any{"sent": true}, nil
			}},
			{ID: "charge", Needs: []string{"notify"}, EffectKey: "charge:{input.order_id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return nil, onceflow.PermanentError(errors.New("card declined"))
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Start(ctx, "order-paid", "evt-1001", map[string]any{"order_id": 1001})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	return fixture{db: "sqlite://" + path, runID: r.ID}
}

// compact returns raw without insignificant white space.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	migrations, err := filepath.Glob("../../../../store/sqlite/migrations/*.sql")
	if err != nil || len(migrations) == 0 {
		t.Fatalf("migrations: %v", err)
	}
	want := fmt.Sprintf("schema version %d of %d (up to date)", len(migrations), len(migrations))
	for range 2 { // the second time changes nothing
		r := runOK(t, "migrate", "--db", "sqlite://"+path)
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("migrate printed %q", r.stdout)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("migrate did not create the database: %v", err)
	}
}

func TestRunsListJSON(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := runOK(t, "runs", "list", "--db", f.db, "--json")
	var runs []runView
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("runs list --json: %v\n%s", err, r.stdout)
	}
	if len(runs) != 1 {
		t.Fatalf("got %d runs, want 1", len(runs))
	}
	got := runs[0]
	if got.ID != f.runID || got.Workflow != "order-paid" || got.RunKey != "evt-1001" || got.Entity != "order:1001" || got.State != store.StateNeedsReview {
		t.Fatalf("run = %+v", got)
	}
	if compact(t, got.Input) != `{"order_id":1001}` {
		t.Fatalf("input = %s", got.Input)
	}
}

func TestRunsListTableAndFilters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := runOK(t, "runs", "list", "--db", f.db)
	for _, want := range []string{"ID", "WORKFLOW", "RUN KEY", "ENTITY", "STATE", "CREATED", "evt-1001", "order:1001", "needs_review"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"--state", "needs_review"}, 1},
		{[]string{"--state", "completed"}, 0},
		{[]string{"--workflow", "order-paid"}, 1},
		{[]string{"--workflow", "other"}, 0},
		{[]string{"--entity", "order:1001"}, 1},
		{[]string{"--key", "evt-1001"}, 1},
		{[]string{"--key", "evt-9"}, 0},
	}
	for _, tt := range tests {
		r := runOK(t, append([]string{"runs", "list", "--db", f.db, "--json"}, tt.args...)...)
		var runs []runView
		if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if len(runs) != tt.want {
			t.Errorf("runs list %v: %d runs, want %d", tt.args, len(runs), tt.want)
		}
	}
	if r := runOK(t, "runs", "list", "--db", f.db, "--state", "completed"); !strings.Contains(r.stdout, "no runs match") {
		t.Errorf("empty table printed %q", r.stdout)
	}
}

func TestRunsListFromEnvironment(t *testing.T) {
	f := setup(t)
	t.Setenv("ONCEFLOW_DB", f.db)
	r := runOK(t, "runs", "list", "--json")
	if !strings.Contains(r.stdout, "evt-1001") {
		t.Fatalf("ONCEFLOW_DB was not used:\n%s", r.stdout)
	}
}

func TestRunsShowJSON(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := runOK(t, "runs", "show", "--db", f.db, "--json", "1")
	var d runDetail
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("runs show --json: %v\n%s", err, r.stdout)
	}
	if d.Run.ID != f.runID || d.Run.State != store.StateNeedsReview {
		t.Fatalf("run = %+v", d.Run)
	}
	if len(d.Steps) != 2 {
		t.Fatalf("steps = %+v", d.Steps)
	}
	notify, charge := d.Steps[0], d.Steps[1]
	if notify.Name != "notify" || notify.State != store.StateCompleted || notify.EffectKey != "notify:1001" || compact(t, notify.Output) != `{"sent":true}` {
		t.Errorf("notify = %+v", notify)
	}
	if charge.Name != "charge" || charge.State != store.StateNeedsReview || charge.Reason != string(store.ReasonPermanentError) ||
		charge.Attempt != 1 || !strings.Contains(charge.LastError, "card declined") {
		t.Errorf("charge = %+v", charge)
	}
	if len(d.Attempts) != 2 {
		t.Fatalf("attempts = %+v", d.Attempts)
	}
	a := d.Attempts[1]
	if a.Step != "charge" || a.Number != 1 || a.Worker != "test-worker" || a.Outcome != store.OutcomePermanent || a.EndedAt == nil {
		t.Errorf("attempt = %+v", a)
	}
	types := map[store.EventType]bool{}
	for _, e := range d.Events {
		types[store.EventType(e.Type)] = true
	}
	for _, want := range []store.EventType{store.EventRunCreated, store.EventStepClaimed, store.EventStepCompleted, store.EventStepNeedsReview} {
		if !types[want] {
			t.Errorf("events lack %s: %+v", want, d.Events)
		}
	}
}

func TestRunsShowText(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := runOK(t, "runs", "show", "1", "--db", f.db)
	for _, want := range []string{"run 1  order-paid", "STEPS (2)", "ATTEMPTS (2)", "EVENTS", "charge:1001", "permanent_error", "card declined", "step.needs_review"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("runs show lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	missing := "sqlite://" + filepath.Join(t.TempDir(), "missing.db")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown run", []string{"runs", "show", "42", "--db", f.db}, 1, "onceflow: run 42 not found\n"},
		{"non-numeric id", []string{"runs", "show", "abc", "--db", f.db}, 2, `run ID "abc" is not a positive number`},
		{"missing id", []string{"runs", "show", "--db", f.db}, 2, "needs ID"},
		{"bad state", []string{"runs", "list", "--state", "done", "--db", f.db}, 2, `--state "done" is not a state; use one of pending, processing, retrying, completed, failed, needs_review, skipped, cancelled`},
		{"bad limit", []string{"runs", "list", "--limit", "0", "--db", f.db}, 2, "--limit must be at least 1"},
		{"postgres unreachable", []string{"runs", "list", "--db", "postgres://127.0.0.1:1/onceflow?connect_timeout=1"}, 1, "postgres: open"},
		{"bad scheme", []string{"migrate", "--db", "mysql://localhost/x"}, 2, "accepted forms are sqlite:///abs/path.db"},
		{"missing database", []string{"runs", "list", "--db", missing}, 1, "no database at"},
		{"unknown command", []string{"runz"}, 2, `unknown command "runz" for "onceflow"; did you mean runs?`},
		{"unknown subcommand", []string{"runs", "delete"}, 2, `unknown command "delete" for "onceflow runs"`},
		{"unknown flag", []string{"runs", "list", "--colour"}, 2, "unknown flag: --colour"},
		{"bad flag value", []string{"demo", "--runs", "many"}, 2, "invalid argument"},
		{"extra argument", []string{"migrate", "now"}, 2, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tt.code, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "onceflow: ") || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr = %q; want it to start with \"onceflow: \" and contain %q", r.stderr, tt.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q; want nothing", r.stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"--help"}, {"runs"}, {"runs", "list", "--help"}} {
		r := runOK(t, args...)
		if !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("onceflow %v printed no usage:\n%s", args, r.stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runOK(t, "version")
	if !strings.HasPrefix(r.stdout, "onceflow ") || !strings.Contains(r.stdout, "go1.") {
		t.Fatalf("version printed %q", r.stdout)
	}
}

func TestDemoCommand(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "demo.db")
	r := runOK(t, "demo", "--forms", "8", "--orders", "6", "--json", "--db", "sqlite://"+path)
	var sum struct {
		DB           string         `json:"db_url"`
		InvariantsOK bool           `json:"invariants_ok"`
		Runs         int            `json:"runs"`
		RunsByState  map[string]int `json:"runs_by_state"`
		Destinations []demo.DestinationStats
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("demo --json printed invalid JSON: %v\n%s", err, r.stdout)
	}
	if !sum.InvariantsOK || sum.DB != "sqlite://"+path || len(sum.Destinations) != 5 {
		t.Fatalf("summary = %+v", sum)
	}
	for _, d := range sum.Destinations {
		if d.DuplicateEffects != 0 {
			t.Errorf("%s: %d duplicate effects", d.Name, d.DuplicateEffects)
		}
	}
	// 8 forms, 6 orders' events and a second event about one payment.
	if sum.Runs != 15 || sum.RunsByState["completed"]+sum.RunsByState["needs_review"] != 15 {
		t.Fatalf("%d runs by state %v", sum.Runs, sum.RunsByState)
	}
	if !strings.Contains(r.stderr, "all 15 form and payment runs completed or waiting for review") {
		t.Errorf("progress did not go to stderr with --json:\n%s", r.stderr)
	}

	// The database it left behind is readable by the other commands.
	runOK(t, "runs", "list", "--db", "sqlite://"+path, "--state", "needs_review")

	// A second demo refuses to reuse it.
	again := run(t, "demo", "--forms", "2", "--db", path)
	if again.code != 1 || !strings.Contains(again.stderr, "demo needs a fresh database") {
		t.Fatalf("second demo on the same file: exit %d, stderr %q", again.code, again.stderr)
	}
}

// openSQLite opens (creating if needed) the SQLite store at path; the caller closes it.
func openSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// countingDest is an HTTP destination that answers {} to every request and counts the
// requests to each path. It is closed when the test ends.
type countingDest struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newCountingDest(t *testing.T) *countingDest {
	t.Helper()
	d := &countingDest{hits: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.hits[r.URL.Path]++
		d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(d.Close)
	return d
}

// count returns how many requests path received.
func (d *countingDest) count(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hits[path]
}

// String lists the requests per path.
func (d *countingDest) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fmt.Sprint(d.hits)
}
