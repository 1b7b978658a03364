package onceflow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

// The preview of a tick fired by hand names the tick, the workflow and the run key the
// trigger then uses, and the run holding that key once there is one; the trigger names
// the person who fired it in the audit trail.
func TestTriggerSchedulePreview(t *testing.T) {
	b := setup(t)
	b.register(t, reportWorkflow("report"))
	if err := b.client.RegisterSchedule(onceflow.Schedule{Name: "monthly", Workflow: "report", Cron: "@monthly", Timezone: "Europe/Berlin",
		RunKey: "report:{schedule.period}"}); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(time.Date(2026, 11, 17, 12, 0, 0, 0, time.UTC))
	plan, err := b.client.TriggerSchedulePreview(b.ctx, "monthly", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if !plan.Tick.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, berlin)) || plan.Tick.Location().String() != "Europe/Berlin" ||
		plan.Workflow != "report" || plan.RunKey != "report:2026-11" || plan.ExistingRunID != 0 || plan.Schedule != "monthly" {
		t.Fatalf("preview of the latest tick: %+v", plan)
	}
	if keys := b.runKeys(t, "report"); len(keys) != 0 {
		t.Fatalf("the preview started %v", keys)
	}
	run, err := b.client.TriggerScheduleBy(b.ctx, onceflow.ScheduleTrigger{Name: "monthly", At: plan.Tick, Actor: "token:ops"})
	if err != nil {
		t.Fatal(err)
	}
	if run.RunKey != plan.RunKey || run.Duplicate {
		t.Fatalf("the trigger started %+v, want run key %s as previewed", run, plan.RunKey)
	}
	again, err := b.client.TriggerSchedulePreview(b.ctx, "monthly", plan.Tick.UTC())
	if err != nil {
		t.Fatal(err)
	}
	if again.ExistingRunID != run.ID || again.RunKey != plan.RunKey {
		t.Fatalf("preview once the tick ran: %+v, want run %d", again, run.ID)
	}
	evs, err := b.client.Audit(b.ctx, onceflow.AuditQuery{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].Type != "run.created" || evs[0].Actor != "token:ops" {
		t.Fatalf("the run's first event %+v, want run.created by token:ops", evs)
	}
	if _, err := b.client.TriggerSchedulePreview(b.ctx, "monthly", plan.Tick.Add(time.Hour)); !errors.Is(err, onceflow.ErrNotATick) {
		t.Errorf("preview of a time that is not a tick: %v", err)
	}
	if _, err := b.client.TriggerSchedulePreview(b.ctx, "nope", time.Time{}); !errors.Is(err, onceflow.ErrScheduleNotFound) {
		t.Errorf("preview of an unknown schedule: %v", err)
	}
}
