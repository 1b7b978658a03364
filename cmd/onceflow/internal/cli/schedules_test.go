package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

const nightlyYAML = `name: nightly-sync
schedule:
  cron: "30 2 * * *"
  timezone: America/New_York
  catch_up: none
steps:
  - id: sync
    kind: http
    http:
      method: POST
      url: "https://crm.example/sync"
`

// onceflow schedules list shows each schedule with its next ticks and the last one fired;
// trigger fires a tick by hand once: the same time again starts nothing.
func TestSchedulesListAndTrigger(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nightly.yaml"), []byte(nightlyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + filepath.Join(t.TempDir(), "onceflow.db")
	runOK(t, "migrate", "--db", db)
	r := runOK(t, "schedules", "list", "--db", db, "--workflows", dir)
	for _, want := range []string{"nightly-sync", "30 2 * * *", "America/New_York", "none", "02:30:00 E"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runOK(t, "schedules", "trigger", "nightly-sync", "--db", db, "--workflows", dir, "--time", "2026-11-01T02:30:00-05:00")
	if !strings.Contains(r.stdout, "started run 1 (nightly-sync, run key nightly-sync:2026-11-01T02:30:00-05:00)") {
		t.Errorf("trigger: %s", r.stdout)
	}
	r = runOK(t, "schedules", "trigger", "nightly-sync", "--db", db, "--workflows", dir, "--time", "2026-11-01T07:30:00Z", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out["created"] != false || out["run_id"] != float64(1) {
		t.Errorf("second trigger of the same tick: %s (%v)", r.stdout, err)
	}
	r = runOK(t, "schedules", "list", "--db", db, "--workflows", dir, "--json", "--next", "2")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || len(list[0]["next"].([]any)) != 2 {
		t.Errorf("list --json: %s (%v)", r.stdout, err)
	}
	// A process serving the file fires the next tick on its clock: list shows it as the last
	// tick fired, with its run (the manual triggers above are not ticks the scheduler fired).
	if strings.Contains(runOK(t, "schedules", "list", "--db", db, "--workflows", dir).stdout, "2026-11-01 02:30:00 EST") {
		t.Error("list shows a manual trigger as the last tick fired")
	}
	id := fireNightly(t, strings.TrimPrefix(db, "sqlite://"), time.Date(2026, 11, 2, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 7, 30, 5, 0, time.UTC))
	r = runOK(t, "schedules", "list", "--db", db, "--workflows", dir)
	if !strings.Contains(r.stdout, fmt.Sprintf("2026-11-02 02:30:00 EST  %d\n", id)) {
		t.Errorf("list after the scheduler fired 2026-11-02 02:30 EST (run %d):\n%s", id, r.stdout)
	}
	if r := run(t, "schedules", "trigger", "nope", "--db", db, "--workflows", dir); r.code != exitUsage {
		t.Errorf("unknown schedule: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, "schedules", "trigger", "nightly-sync", "--db", db, "--workflows", dir, "--time", "yesterday"); r.code != exitUsage {
		t.Errorf("bad --time: exit %d", r.code)
	}
	// A time the cron expression does not name would start the tick's work again under
	// another key: refused.
	r = run(t, "schedules", "trigger", "nightly-sync", "--db", db, "--workflows", dir, "--time", "2026-11-01T02:30:01-05:00")
	if r.code != exitUsage || !strings.Contains(r.stderr, "2026-11-01T02:30:01-05:00 is not a tick of \"nightly-sync\"") ||
		!strings.Contains(r.stderr, "the tick before is 2026-11-01T02:30:00-05:00") {
		t.Errorf("trigger off the tick: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "schedules", "list", "--db", db); r.code != exitUsage {
		t.Errorf("list without --workflows: exit %d", r.code)
	}
	// validate reports a bad schedule with its position.
	bad := strings.Replace(nightlyYAML, "America/New_York", "America/Gotham", 1)
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(strings.Replace(bad, "nightly-sync", "bad", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, "validate", filepath.Join(dir, "bad.yaml"))
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "bad.yaml:4:13: timezone \"America/Gotham\" is not an IANA time zone") {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// runs show says when a step waiting for its delay is due, and when the run goes on.
func TestRunsShowDelayedStep(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	if err := c.Register(onceflow.Workflow{Name: "follow", Steps: []onceflow.Step{
		{ID: "crm", Do: noop}, {ID: "call", Needs: []string{"crm"}, Delay: 24 * time.Hour, Do: noop},
	}}); err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(ctx, "follow", "lead-1", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n > 0; {
		if n, err = c.Work(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := runOK(t, "runs", "show", strconv.FormatInt(run.ID, 10), "--db", "sqlite://"+path)
	if !strings.Contains(r.stdout, "delayed until ") || !strings.Contains(r.stdout, "waiting  until ") {
		t.Errorf("runs show:\n%s", r.stdout)
	}
	r = runOK(t, "runs", "show", strconv.FormatInt(run.ID, 10), "--db", "sqlite://"+path, "--json")
	var d struct {
		WaitingUntil *time.Time `json:"waiting_until"`
		Steps        []struct {
			Name  string     `json:"name"`
			DueAt *time.Time `json:"due_at"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.WaitingUntil == nil || d.Steps[1].DueAt == nil || !d.WaitingUntil.Equal(*d.Steps[1].DueAt) || d.WaitingUntil.Sub(run.CreatedAt) < 24*time.Hour {
		t.Errorf("runs show --json: waiting_until %v, call due %v", d.WaitingUntil, d.Steps[1].DueAt)
	}
}

// fireNightly fires the nightly-sync schedule as the process that leads the scheduler does:
// first at seen (it starts from then), then at now. It returns the run of the tick of
// 2026-11-02.
func fireNightly(t *testing.T, path string, seen, now time.Time) int64 {
	t.Helper()
	st := openSQLite(t, path)
	defer st.Close()
	at := seen
	c, err := onceflow.New(onceflow.Config{Store: st, ScheduleClock: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	if err := c.Register(onceflow.Workflow{Name: "nightly-sync", Steps: []onceflow.Step{{ID: "sync", Do: noop}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterSchedule(onceflow.Schedule{Workflow: "nightly-sync", Cron: "30 2 * * *", Timezone: "America/New_York", CatchUp: onceflow.CatchUpNone}); err != nil {
		t.Fatal(err)
	}
	for _, at = range []time.Time{seen, now} {
		if err := c.FireSchedules(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.RunGetByKey(context.Background(), "nightly-sync", "nightly-sync:2026-11-02T02:30:00-05:00")
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}
