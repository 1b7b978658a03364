package onceflowhttp

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

// GET /v1/schedules lists each schedule with its next ticks in its zone and the last tick
// fired with its run; it needs a read (or admin) token.
func TestListSchedules(t *testing.T) {
	b := setup(t)
	if err := b.client.Register(onceflow.Workflow{Name: "report", Steps: []onceflow.Step{{ID: "send",
		Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.client.RegisterSchedule(onceflow.Schedule{Name: "nightly", Workflow: "report", Cron: "30 2 * * *",
		Timezone: "Europe/Berlin", CatchUp: onceflow.CatchUpNone}); err != nil {
		t.Fatal(err)
	}
	if a := b.do(http.MethodGet, "/v1/schedules", ingestToken, nil, ""); a.status != http.StatusForbidden && a.status != http.StatusUnauthorized {
		t.Fatalf("ingest token: %d", a.status)
	}
	tick := time.Date(2026, 11, 30, 2, 30, 0, 0, time.FixedZone("CET", 3600))
	run, err := b.client.TriggerSchedule(t.Context(), "nightly", tick)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.client.FireSchedules(t.Context()); err != nil { // first sight: records the state
		t.Fatal(err)
	}
	a := b.do(http.MethodGet, "/v1/schedules?next=2", adminToken, nil, "")
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	list := a.json["schedules"].([]any)
	if len(list) != 1 {
		t.Fatalf("schedules %v", list)
	}
	s := list[0].(map[string]any)
	if s["name"] != "nightly" || s["timezone"] != "Europe/Berlin" || s["catch_up"] != "none" || s["run_key"] != onceflow.DefaultScheduleRunKey {
		t.Errorf("schedule %v", s)
	}
	next := s["next"].([]any)
	if len(next) != 2 {
		t.Fatalf("next %v", next)
	}
	for _, n := range next {
		at, err := time.Parse(time.RFC3339, n.(string))
		if err != nil || at.In(time.FixedZone("", 0)).IsZero() {
			t.Fatalf("next tick %v: %v", n, err)
		}
		if _, off := at.Zone(); off != 3600 && off != 7200 {
			t.Errorf("next tick %v is not in the schedule's zone", n)
		}
	}
	if run.RunKey != "nightly:2026-11-30T02:30:00+01:00" {
		t.Errorf("trigger run key %s", run.RunKey)
	}
	if s["last_tick"] != nil || s["last_run_id"] != nil {
		t.Errorf("before the scheduler fired a tick: last tick %v, run %v (a manual trigger is not one)", s["last_tick"], s["last_run_id"])
	}

	// Another process on the database, whose clock reaches the next tick, fires it: the list
	// shows that tick as the last one fired, with its run.
	due, err := time.Parse(time.RFC3339, next[0].(string))
	if err != nil {
		t.Fatal(err)
	}
	fired, err := onceflow.New(onceflow.Config{Store: b.store, WorkerID: "scheduler", ScheduleClock: func() time.Time { return due.Add(5 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := fired.Register(onceflow.Workflow{Name: "report", Steps: []onceflow.Step{{ID: "send",
		Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}); err != nil {
		t.Fatal(err)
	}
	if err := fired.RegisterSchedule(onceflow.Schedule{Name: "nightly", Workflow: "report", Cron: "30 2 * * *",
		Timezone: "Europe/Berlin", CatchUp: onceflow.CatchUpNone}); err != nil {
		t.Fatal(err)
	}
	if err := fired.FireSchedules(t.Context()); err != nil {
		t.Fatal(err)
	}
	tickRun, err := b.store.RunGetByKey(t.Context(), "report", "nightly:"+due.Format(time.RFC3339))
	if err != nil {
		t.Fatalf("the run of tick %s: %v", due.Format(time.RFC3339), err)
	}
	a = b.do(http.MethodGet, "/v1/schedules?next=1", readToken, nil, "")
	if a.status != http.StatusOK {
		t.Fatalf("read token: status %d: %s", a.status, a.body)
	}
	s = a.json["schedules"].([]any)[0].(map[string]any)
	if s["last_tick"] != due.Format(time.RFC3339) || s["last_run_id"] != float64(tickRun.ID) {
		t.Errorf("after the tick: last tick %v, run %v; want %s, run %d", s["last_tick"], s["last_run_id"], due.Format(time.RFC3339), tickRun.ID)
	}
	if a := b.do(http.MethodGet, "/v1/schedules?next=1000", adminToken, nil, ""); a.status != http.StatusBadRequest {
		t.Errorf("next=1000: %d", a.status)
	}
}

// A run that only waits for a delayed step says until when, and so does the step.
func TestRunWaitingForDelay(t *testing.T) {
	b := setup(t)
	noop := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	if err := b.client.Register(onceflow.Workflow{Name: "follow", Steps: []onceflow.Step{
		{ID: "crm", Do: noop}, {ID: "call", Needs: []string{"crm"}, Delay: 24 * time.Hour, Do: noop},
	}}); err != nil {
		t.Fatal(err)
	}
	run, err := b.client.Start(t.Context(), "follow", "lead-1", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := b.client.Work(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	a := b.do(http.MethodGet, "/v1/runs/"+strconv.FormatInt(run.ID, 10), adminToken, nil, "")
	if a.status != http.StatusOK {
		t.Fatalf("status %d", a.status)
	}
	until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(a.json["waiting_until"]))
	if err != nil || until.Sub(run.CreatedAt) < 24*time.Hour || until.Sub(run.CreatedAt) > 25*time.Hour {
		t.Fatalf("waiting_until %v (%v), run created %s", a.json["waiting_until"], err, run.CreatedAt)
	}
	call := a.json["steps"].([]any)[1].(map[string]any)
	if call["state"] != "pending" || call["reason"] != "delayed" || call["next_at"] != a.json["waiting_until"] {
		t.Errorf("call step %v", call)
	}
}

// GET /v1/workflows shows when a workflow file's schedule starts it.
func TestListWorkflowsShowsSchedule(t *testing.T) {
	b := setup(t, `name: invoices
schedule:
  name: monthly-invoices
  cron: "0 9 1 * *"
  timezone: Europe/Berlin
  run_key: "invoices:{schedule.period}"
steps:
  - id: issue
    kind: go
    func: noop
`)
	a := b.do(http.MethodGet, "/v1/workflows", ingestToken, nil, "")
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	for _, w := range a.json["workflows"].([]any) {
		w := w.(map[string]any)
		if w["name"] != "invoices" {
			if w["schedule"] != nil {
				t.Errorf("workflow %v has a schedule", w["name"])
			}
			continue
		}
		s, _ := w["schedule"].(map[string]any)
		if s["name"] != "monthly-invoices" || s["cron"] != "0 9 1 * *" || s["timezone"] != "Europe/Berlin" {
			t.Fatalf("schedule %v", w["schedule"])
		}
		return
	}
	t.Fatalf("invoices not listed: %s", a.body)
}
