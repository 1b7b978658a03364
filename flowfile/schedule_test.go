package flowfile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

const scheduleBase = `name: invoices
steps:
  - id: issue
    kind: go
    func: f
`

// Every schedule and delay mistake is reported at its place, file:line:col.
func TestScheduleLoadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"invalid cron", scheduleBase + "schedule:\n  cron: \"61 9 * * *\"\n",
			`invoices.yaml:7:9: cron expression "61 9 * * *"`},
		{"unknown timezone", scheduleBase + "schedule:\n  cron: \"@daily\"\n  timezone: Europe/Atlantis\n",
			`invoices.yaml:8:13: timezone "Europe/Atlantis" is not an IANA time zone`},
		{"run key without the tick", scheduleBase + "schedule:\n  cron: \"@monthly\"\n  run_key: \"invoices:{schedule.name}\"\n",
			`invoices.yaml:8:12: run key "invoices:{schedule.name}" does not read {schedule.time} or {schedule.period}`},
		{"fan-out run key without an item field", scheduleBase + "schedule:\n  cron: \"@monthly\"\n  run_key: \"invoice:{schedule.period}\"\n  for_each:\n    url: https://billing.example/customers\n",
			`invoices.yaml:8:12: run key "invoice:{schedule.period}" reads no {item.…} field`},
		{"fan-out without a run key", scheduleBase + "schedule:\n  cron: \"@monthly\"\n  for_each:\n    url: https://billing.example/customers\n",
			`invoices.yaml:7:7: a schedule with for_each needs a run_key that reads an item field`},
		{"catch_up", scheduleBase + "schedule:\n  cron: \"@monthly\"\n  catch_up: sometimes\n",
			`invoices.yaml:8:13: catch_up "sometimes" is not latest, all or none`},
		{"@every", scheduleBase + "schedule:\n  cron: \"@every 1h\"\n",
			`invoices.yaml:7:9: @every is not a calendar schedule`},
		{"list url template", scheduleBase + "schedule:\n  cron: \"@monthly\"\n  run_key: \"i:{item.id}:{schedule.period}\"\n  for_each:\n    url: \"https://b.example/{input.x}\"\n",
			`invoices.yaml:10:10: {input.x}: the list request may read`},
		{"negative delay", strings.Replace(scheduleBase, "func: f\n", "func: f\n    delay: -5m\n", 1),
			`invoices.yaml:6:12: step "issue": delay "-5m" is negative`},
		{"unparseable delay", strings.Replace(scheduleBase, "func: f\n", "func: f\n    delay: tomorrow\n", 1),
			`invoices.yaml:6:12: step "issue": delay "tomorrow": write it as 30s, 15m, 24h or 7d`},
		{"not_before reads a later step", strings.Replace(scheduleBase, "func: f\n", "func: f\n    not_before: \"{steps.other.output.at} - 1h\"\n", 1),
			`invoices.yaml:6:17: step "issue": not_before: {steps.other.output.at}: "other" is not a step this step needs`},
		{"not_before offset", strings.Replace(scheduleBase, "func: f\n", "func: f\n    not_before: \"{input.at} - soon\"\n", 1),
			`invoices.yaml:6:17: step "issue": not_before: "{input.at} - soon": write one field holding a time`},
	}
	for _, tc := range cases {
		_, ps := testReader.Parse("invoices.yaml", []byte(tc.src))
		if !strings.Contains(ps.Error(), tc.want) {
			t.Errorf("%s: problems\n%v\nwant one containing\n%s", tc.name, ps, tc.want)
		}
	}
}

func TestDelayAndNotBeforeBuild(t *testing.T) {
	t.Parallel()
	src := `name: lead
steps:
  - id: crm
    kind: go
    func: f
  - id: follow-up
    kind: go
    func: f
    needs: [crm]
    delay: 24h
  - id: reminder
    kind: go
    func: f
    needs: [crm]
    not_before: "{steps.crm.output.appointment_at} - 2h"
`
	fn := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	def, ps := withFuncs(t, map[string]onceflow.StepFunc{"f": fn}).Parse("lead.yaml", []byte(src))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	ws, err := NewBuilder(BuildOptions{}).Workflows([]*Definition{def})
	if err != nil {
		t.Fatal(err)
	}
	if d := ws[0].Steps[1].Delay; d != 24*time.Hour {
		t.Errorf("follow-up delay %v", d)
	}
	nb := ws[0].Steps[2].NotBefore
	at, err := nb(&onceflow.StepContext{Input: json.RawMessage(`{}`), Outputs: map[string]json.RawMessage{"crm": json.RawMessage(`{"appointment_at": "2026-12-03T15:00:00+01:00"}`)}})
	if err != nil || !at.Equal(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("not_before = %v, %v; want 13:00+01:00", at, err)
	}
	if _, err := nb(&onceflow.StepContext{Input: json.RawMessage(`{}`), Outputs: map[string]json.RawMessage{"crm": json.RawMessage(`{"appointment_at": "soon"}`)}}); err == nil {
		t.Error("not_before of a value that is no time: no error")
	}
}

func TestScheduleNamesUnique(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := "name: a\nschedule:\n  name: nightly\n  cron: \"@daily\"\nsteps:\n  - id: s\n    kind: go\n    func: f\n"
	b := strings.Replace(strings.Replace(a, "name: a", "name: b", 1), "@daily", "@hourly", 1)
	for n, src := range map[string]string{"a.yaml": a, "b.yaml": b} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := testReader.LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "b.yaml:3:7: schedule \"nightly\" is also defined in "+filepath.Join(dir, "a.yaml")) {
		t.Fatalf("LoadDir: %v", err)
	}
}
