package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

func TestRunsCancelCommand(t *testing.T) {
	t.Parallel()
	f := setup(t) // charge waits for review
	id := strconv.FormatInt(f.runID, 10)
	r := runOK(t, "runs", "cancel", id, "--note", "order withdrawn", "--actor", "cli:ada", "--db", f.db)
	if !strings.Contains(r.stdout, "cancelled run "+id+" (order-paid): run cancelled; steps cancelled: charge (by cli:ada)") {
		t.Errorf("cancel: %s", r.stdout)
	}
	r = runOK(t, "audit", "--run", id, "--db", f.db, "--json")
	var evs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &evs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || e["type"] == string(store.EventRunCancelled) && e["actor"] == "cli:ada"
	}
	if !found {
		t.Errorf("no run.cancelled by cli:ada in %s", r.stdout)
	}
	if r := run(t, "runs", "cancel", id, "--db", f.db); r.code != exitError || !strings.Contains(r.stderr, "no step is left to cancel") {
		t.Errorf("second cancel: exit %d %s", r.code, r.stderr)
	}
	if r := run(t, "runs", "cancel", "abc", "--db", f.db); r.code != exitUsage {
		t.Errorf("bad id: exit %d", r.code)
	}
}

func TestPauseCommands(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := runOK(t, "pause", "order-paid", "--note", "stock sync broken", "--actor", "cli:ada", "--db", f.db)
	if !strings.Contains(r.stdout, "workflow order-paid paused (by cli:ada)") {
		t.Errorf("pause: %s", r.stdout)
	}
	if r := runOK(t, "pause", "order-paid", "--db", f.db); !strings.Contains(r.stdout, "was already paused") {
		t.Errorf("second pause: %s", r.stdout)
	}
	r = runOK(t, "paused", "--db", f.db)
	if !strings.Contains(r.stdout, "order-paid") || !strings.Contains(r.stdout, "stock sync broken") || !strings.Contains(r.stdout, "cli:ada") {
		t.Errorf("paused: %s", r.stdout)
	}
	runOK(t, "resume", "order-paid", "--db", f.db)
	if r := runOK(t, "paused", "--db", f.db); !strings.Contains(r.stdout, "no workflow is paused") {
		t.Errorf("paused after resume: %s", r.stdout)
	}
	if r := run(t, "pause", "bad name", "--db", f.db); r.code != exitUsage {
		t.Errorf("bad name: exit %d", r.code)
	}
}

// A name that is not registered, has no runs and is not paused — a typo — is a usage
// error that says what to do, and nothing is paused; one defined in a file without runs
// yet is paused with --workflows.
func TestPauseUnknownWorkflowCommand(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, verb := range []string{"pause", "resume"} {
		r := run(t, verb, "does-not-exist", "--db", f.db)
		if r.code != exitUsage || !strings.Contains(r.stderr, `no workflow "does-not-exist" has runs, is paused or is defined in --workflows; nothing was changed`) ||
			!strings.Contains(r.stderr, "give --workflows to "+verb) {
			t.Errorf("%s does-not-exist: exit %d\nstdout %s\nstderr %s", verb, r.code, r.stdout, r.stderr)
		}
	}
	if r := runOK(t, "paused", "--db", f.db); !strings.Contains(r.stdout, "no workflow is paused") {
		t.Errorf("paused after refused pauses: %s", r.stdout)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fresh.yaml"), []byte("name: fresh\nsteps:\n  - id: s\n    kind: http\n    http: {url: \"https://example.com\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runOK(t, "pause", "fresh", "--workflows", dir, "--db", f.db); !strings.Contains(r.stdout, "workflow fresh paused") {
		t.Errorf("pause with --workflows: %s", r.stdout)
	}
}

// On PostgreSQL a pause made by one process applies to a worker running in another: the
// worker stops claiming the paused workflow's steps (while it goes on with the others) and
// takes them up again after the resume. The worker is a real process.
func TestPauseAcrossProcessesOnPostgres(t *testing.T) {
	db := withSchema(t, postgresURL(t))
	dest := newCountingDest(t)
	count := dest.count
	dir := t.TempDir()
	for _, name := range []string{"leads", "orders"} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(strings.ReplaceAll(strings.ReplaceAll(workflowFile(name), "RELOAD_DEST", "PAUSE_DEST"), "%s", name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runOK(t, "migrate", "--db", db)
	w := startCommand(t, []string{"PAUSE_DEST=" + dest.URL}, "worker", "--db", db, "--workflows", dir, "--allow-net", "127.0.0.1/32")
	w.waitLog("onceflow worker running", 1)

	runOK(t, "pause", "leads", "--note", "CRM down", "--db", db, "--workflows", dir) // leads has no runs yet
	l := w.waitLog("workflow paused: its steps are not claimed until it is resumed", 1)
	if l["workflow"] != "leads" {
		t.Fatalf("pause log line %v", l)
	}

	ctx := context.Background()
	st := openPostgres(t, db)
	defer st.Close()
	start := func(workflow string) *store.Run {
		t.Helper()
		r, _, err := st.RunInsert(ctx, store.RunInsertParams{Workflow: workflow, RunKey: "k1", Input: json.RawMessage(`{"id":"1"}`), InputHash: "h",
			Steps: []store.StepInsert{{Name: "call"}}, Actor: "test", Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	lead := start("leads")
	order := start("orders")
	waitFor(t, "the orders run to complete", func() bool { return runState(t, st, order.ID) == store.StateCompleted })
	// The worker claimed after the pause took effect there: the lead is still untouched.
	if runState(t, st, lead.ID) != store.StatePending || count("/leads") != 0 {
		t.Fatalf("a paused workflow's step ran: state %s, %d requests", runState(t, st, lead.ID), count("/leads"))
	}
	runOK(t, "resume", "leads", "--db", db)
	waitFor(t, "the leads run to complete after the resume", func() bool { return runState(t, st, lead.ID) == store.StateCompleted })
	if count("/leads") != 1 || count("/orders") != 1 {
		t.Errorf("requests %v", dest)
	}
}

func runState(t *testing.T, st store.Store, id int64) store.State {
	t.Helper()
	r, err := st.RunGetByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// waitFor polls an observable condition until it holds, for at most 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
