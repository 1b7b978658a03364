package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/store"
)

// orderPaidYAML is the fixture's workflow as a file, for the commands that need the
// definition (replay, and show with a preview).
const orderPaidYAML = `name: order-paid
entity: "order:{input.order_id}"
input:
  required: [order_id]
steps:
  - id: notify
    kind: go
    func: notify
    effect_key: "notify:{input.order_id}"
  - id: charge
    kind: go
    func: charge
    needs: [notify]
    effect_key: "charge:{input.order_id}"
`

func workflowsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "order-paid.yaml"), []byte(orderPaidYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixtureSteps reads the fixture run's steps by name.
func fixtureSteps(t *testing.T, f fixture) map[string]*store.Step {
	t.Helper()
	st := openSQLite(t, strings.TrimPrefix(f.db, "sqlite://"))
	defer st.Close()
	list, err := st.StepListByRun(context.Background(), f.runID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*store.Step{}
	for _, s := range list {
		out[s.Name] = s
	}
	return out
}

func TestReviewListAndShow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := strconv.FormatInt(f.runID, 10)
	r := runOK(t, "review", "list", "--db", f.db)
	for _, want := range []string{"RUN", "REASON", id, "charge", "order-paid", "order:1001", "permanent_error", "card declined"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("review list lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runOK(t, "review", "list", "--db", f.db, "--reason", "outcome_unknown")
	if !strings.Contains(r.stdout, "no steps wait for review") {
		t.Errorf("filtered list: %s", r.stdout)
	}
	r = runOK(t, "review", "list", "--db", f.db, "--json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 1 || items[0]["step"] != "charge" ||
		items[0]["reason"] != "permanent_error" || items[0]["attempts"] != float64(1) || items[0]["effect_may_exist"] != false {
		t.Errorf("review list --json: %v %s", err, r.stdout)
	}

	r = runOK(t, "review", "show", id, "charge", "--db", f.db, "--workflows", workflowsDir(t))
	for _, want := range []string{"reason      permanent_error", "ATTEMPTS (1)", "card declined", "parked for review after attempt 1 (permanent error: the destination refused for good)",
		"Decide with: onceflow review retry|replay|resolve|abandon", "A REPLAY WOULD", "notify  completed     skip", "charge  needs_review  run"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("review show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, "review", "show", id, "nope", "--db", f.db)
	if r.code != exitError || !strings.Contains(r.stderr, `has no step "nope"`) {
		t.Errorf("show of an unknown step: exit %d, %s", r.code, r.stderr)
	}
}

func TestReviewReplayCommand(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dir := workflowsDir(t)
	id := strconv.FormatInt(f.runID, 10)

	r := runOK(t, "review", "replay", id, "charge", "--db", f.db, "--workflows", dir, "--patch", `{"card":"4242"}`, "--dry-run")
	for _, want := range []string{`with the corrected input {"card":"4242"} would:`, "notify  completed     kept", "charge  needs_review  run", "charge:1001",
		"run 1, kept 1", "dry run: nothing was changed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("replay --dry-run lacks %q:\n%s", want, r.stdout)
		}
	}
	if st := fixtureSteps(t, f)["charge"]; st.State != store.StateNeedsReview {
		t.Fatalf("the dry run changed charge to %s", st.State)
	}

	// Usage mistakes and refusals change nothing.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"review", "replay", id}, exitUsage, "needs --workflows DIR"},
		{[]string{"review", "replay", id, "--workflows", dir, "--patch", "{}", "--input-file", "x"}, exitUsage, "give one of --patch"},
		{[]string{"review", "replay", id, "--workflows", dir, "--patch", `["x"]`}, exitError, "merge patch: it must be a JSON object"},
		{[]string{"review", "replay", id, "--workflows", dir, "--patch", `{"order_id":null}`}, exitError, "lacks a required field: order_id"},
		{[]string{"review", "replay", id, "notify", "--workflows", dir}, exitError, "not needs_review"},
		{[]string{"review", "replay", "999", "--workflows", dir}, exitError, "run 999 does not exist"},
		{[]string{"review", "retry"}, exitUsage, "needs RUN STEP, or filter flags"},
		{[]string{"review", "retry", id}, exitUsage, "takes RUN STEP"},
		{[]string{"review", "retry", id, "charge", "--workflow", "x"}, exitUsage, "not both"},
		{[]string{"review", "retry", "999", "charge"}, exitError, "run 999 does not exist"},
		{[]string{"review", "abandon", id, "charge", "--dry-run"}, exitUsage, "--dry-run applies to replay and to bulk actions"},
		{[]string{"review", "resolve", id, "notify"}, exitError, "the step is completed, not in review"},
		{[]string{"review", "resolve", id, "charge", "--output", "{"}, exitUsage, "--output is not JSON"},
		{[]string{"review", "list", "--older-than", "soon"}, exitUsage, "--older-than"},
	} {
		res := run(t, append(tc.args, "--db", f.db)...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.says) {
			t.Errorf("onceflow %s: exit %d, stderr %q; want exit %d saying %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.code, tc.says)
		}
	}
	if st := fixtureSteps(t, f)["charge"]; st.State != store.StateNeedsReview {
		t.Fatalf("refusals changed charge to %s", st.State)
	}

	r = runOK(t, "review", "replay", id, "--db", f.db, "--workflows", dir, "--patch", `{"card":"4242"}`, "--note", "new card", "--actor", "cli:tester", "--json")
	var out struct {
		Revision int      `json:"revision"`
		Reset    []string `json:"reset"`
		RunState string   `json:"run_state"`
		Actor    string   `json:"actor"`
		Plan     struct {
			Counts map[string]int `json:"counts"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Revision != 1 || len(out.Reset) != 1 || out.Reset[0] != "charge" ||
		out.Actor != "cli:tester" || out.Plan.Counts["run"] != 1 || out.Plan.Counts["kept"] != 1 {
		t.Fatalf("replay --json: %v %s", err, r.stdout)
	}
	if st := fixtureSteps(t, f)["charge"]; st.State != store.StatePending || st.Reason != store.ReasonReplay {
		t.Errorf("charge after replay: %s %s", st.State, st.Reason)
	}

	r = runOK(t, "audit", "--run", id, "--db", f.db)
	for _, want := range []string{"TIME", "WHY", "run.input_corrected", "input corrected by cli:tester (revision 1; fields card) — note: \"new card\"",
		"review.replayed", "cli:tester"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("audit --run lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestReviewResolveAndKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := strconv.FormatInt(f.runID, 10)
	r := runOK(t, "review", "resolve", id, "charge", "--output", `{"id": 77}`, "--note", "charged by phone", "--actor", "cli:tester", "--db", f.db)
	if !strings.Contains(r.stdout, "resolved run "+id+" step charge: step completed, run completed, key completed in the ledger (by cli:tester)") {
		t.Errorf("resolve: %s", r.stdout)
	}
	r = runOK(t, "keys", "show", "charge:1001", "--db", f.db)
	for _, want := range []string{"key charge:1001: completed", "run " + id + " (order-paid) step charge", `{"id":77}`, "USED BY (1)",
		"resolved by hand by cli:tester: step completed, key recorded completed so it is never acted on again — note: \"charged by phone\""} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("keys show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runOK(t, "keys", "show", "charge:1001", "--db", f.db, "--json")
	var k struct {
		State  string `json:"state"`
		Effect struct {
			RunID  int64           `json:"run_id"`
			Result json.RawMessage `json:"result"`
		} `json:"effect"`
		Events []struct {
			Type, Actor, Why string
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &k); err != nil || k.State != "completed" || k.Effect.RunID != f.runID || compact(t, k.Effect.Result) != `{"id":77}` || len(k.Events) == 0 {
		t.Errorf("keys show --json: %v %s", err, r.stdout)
	}
	r = run(t, "keys", "show", "never:1", "--db", f.db)
	if r.code != keyNeverSeen || !strings.Contains(r.stdout, "key never:1: never seen") || !strings.Contains(r.stdout, "EVENTS (0)") {
		t.Errorf("unknown key: exit %d, %s", r.code, r.stdout)
	}

	r = runOK(t, "audit", "--entity", "order:1001", "--db", f.db, "--json")
	var evs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &evs); err != nil || len(evs) == 0 {
		t.Fatalf("audit --json: %v %s", err, r.stdout)
	}
	found := false
	for _, e := range evs {
		if e["type"] == string(store.EventReviewResolved) && e["actor"] == "cli:tester" && strings.Contains(e["why"].(string), "charged by phone") {
			found = true
		}
	}
	if !found {
		t.Errorf("audit --entity has no review.resolved by cli:tester: %s", r.stdout)
	}
	r = runOK(t, "audit", "--entity", "order:1001", "--since", "2999-01-01T00:00:00Z", "--db", f.db)
	if !strings.Contains(r.stdout, "no events match") {
		t.Errorf("audit in the future: %s", r.stdout)
	}
	if res := run(t, "audit", "--since", "yesterday", "--db", f.db); res.code != exitUsage || !strings.Contains(res.stderr, "RFC 3339") {
		t.Errorf("bad --since: exit %d %s", res.code, res.stderr)
	}
}

func TestReviewBulkCommands(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := runOK(t, "review", "abandon", "--workflow", "order-paid", "--dry-run", "--db", f.db)
	if !strings.Contains(r.stdout, "would abandon") || !strings.Contains(r.stdout, "dry run: nothing was changed") {
		t.Errorf("bulk dry run: %s", r.stdout)
	}
	if st := fixtureSteps(t, f)["charge"]; st.State != store.StateNeedsReview {
		t.Fatalf("the dry run changed charge to %s", st.State)
	}
	r = runOK(t, "review", "retry", "--all", "--note", "provider fixed", "--db", f.db, "--json")
	var out struct {
		Matched, OK, Refused int
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Matched != 1 || out.OK != 1 || out.Refused != 0 {
		t.Errorf("bulk retry: %v %s", err, r.stdout)
	}
	if st := fixtureSteps(t, f)["charge"]; st.State != store.StateRetrying || st.AttemptBase != 1 {
		t.Errorf("charge after the bulk retry: %s base %d", st.State, st.AttemptBase)
	}
	r = runOK(t, "review", "abandon", "--all", "--db", f.db)
	if !strings.Contains(r.stdout, "no review item matches") {
		t.Errorf("bulk on an empty queue: %s", r.stdout)
	}
}
