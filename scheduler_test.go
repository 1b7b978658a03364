package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

func reportWorkflow(name string) onceflow.Workflow {
	return onceflow.Workflow{Name: name, Steps: []onceflow.Step{{ID: "send", Do: noop}}}
}

// runKeys returns the run keys of a workflow's runs, sorted.
func (b *bundle) runKeys(t *testing.T, workflow string) []string {
	t.Helper()
	runs, err := b.store.RunList(b.ctx, store.RunListParams{Workflow: workflow, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(runs))
	for i, r := range runs {
		keys[i] = r.RunKey
	}
	sort.Strings(keys)
	return keys
}

func (b *bundle) fire(t *testing.T) {
	t.Helper()
	if err := b.client.FireSchedules(b.ctx); err != nil {
		t.Fatal(err)
	}
}

// fireNovember fires the schedules first at 07:00 UTC on 2026-11-01, then just after the
// monthly tick of 09:00 Berlin, and executes what that started until nothing is due.
func (b *bundle) fireNovember(t *testing.T) {
	t.Helper()
	b.clock.Set(time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC))
	b.fire(t)
	b.clock.Set(time.Date(2026, 11, 1, 8, 0, 5, 0, time.UTC))
	b.fire(t)
	for b.work(t) > 0 {
	}
}

// After downtime across five hourly ticks, catch_up all starts the five (each audited as
// late), latest the newest (the other four audited as skipped), none none (five skipped);
// max_catch_up caps all. Firing again starts nothing more.
func TestScheduleCatchUp(t *testing.T) {
	cases := []struct {
		policy         onceflow.CatchUp
		max            int
		runs, late     int
		skipped        int
		skippedReasons store.Reason
	}{
		{onceflow.CatchUpAll, 0, 5, 5, 0, ""},
		{onceflow.CatchUpAll, 3, 3, 3, 2, "max_catch_up"},
		{onceflow.CatchUpLatest, 0, 1, 1, 4, "catch_up_latest"},
		{onceflow.CatchUpNone, 0, 0, 0, 5, "catch_up_none"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d", tc.policy, tc.max), func(t *testing.T) {
			b := setup(t)
			b.register(t, reportWorkflow("report"))
			if err := b.client.RegisterSchedule(onceflow.Schedule{Workflow: "report", Cron: "0 * * * *", Timezone: "Europe/Berlin",
				CatchUp: tc.policy, MaxCatchUp: tc.max}); err != nil {
				t.Fatal(err)
			}
			b.clock.Set(time.Date(2026, 11, 2, 8, 30, 0, 0, time.UTC))
			b.fire(t) // first sight: starts from now
			if keys := b.runKeys(t, "report"); len(keys) != 0 {
				t.Fatalf("first sight started %v", keys)
			}
			b.clock.Set(time.Date(2026, 11, 2, 9, 0, 20, 0, time.UTC))
			b.fire(t) // on time (20 s late)
			wantKeys := []string{"report:2026-11-02T10:00:00+01:00"}
			if keys := b.runKeys(t, "report"); !equal(keys, wantKeys) {
				t.Fatalf("on-time tick: runs %v, want %v", keys, wantKeys)
			}
			// Down from 09:00:20 to 14:30: ticks 10:00 … 14:00 UTC missed.
			b.clock.Set(time.Date(2026, 11, 2, 14, 30, 0, 0, time.UTC))
			b.fire(t)
			b.fire(t)
			keys := b.runKeys(t, "report")
			if len(keys) != 1+tc.runs {
				t.Fatalf("after downtime: %d runs %v, want %d", len(keys), keys, 1+tc.runs)
			}
			if tc.policy == onceflow.CatchUpLatest && keys[len(keys)-1] != "report:2026-11-02T15:00:00+01:00" {
				t.Errorf("latest started %v, want the 15:00 tick", keys)
			}
			evs := b.events(t, store.EventListParams{Entity: "schedule:report"})
			var late, skipped []*store.Event
			for _, e := range evs {
				switch e.Type {
				case store.EventScheduleTickLate:
					late = append(late, e)
				case store.EventScheduleTickSkipped:
					skipped = append(skipped, e)
				}
			}
			if len(late) != tc.late || len(skipped) != tc.skipped {
				t.Fatalf("events: %d late, %d skipped; want %d, %d", len(late), len(skipped), tc.late, tc.skipped)
			}
			t.Logf("catch_up %s (max %d), 5 ticks missed: %d runs, %d tick_late, %d tick_skipped", tc.policy, tc.max, len(keys)-1, len(late), len(skipped))
			for _, e := range skipped {
				if !strings.Contains(onceflow.Explain(e), "skipped by policy") {
					t.Errorf("explanation %q", onceflow.Explain(e))
				}
				if e.Reason != tc.skippedReasons || e.RunID != 0 {
					t.Errorf("skipped event reason %q run %d, want %q and no run", e.Reason, e.RunID, tc.skippedReasons)
				}
			}
			for _, e := range late {
				d := detailOf(t, e)
				if e.RunID == 0 || d["late_by"] == nil || !strings.HasPrefix(d["tick"].(string), "2026-11-02T") || d["timezone"] != "Europe/Berlin" {
					t.Errorf("late event %+v detail %v lacks its run, tick, zone or lateness", e, d)
				}
			}
			if tc.policy == onceflow.CatchUpAll && tc.max == 0 {
				d := detailOf(t, late[0])
				if d["late_by"] != "4h30m0s" {
					t.Errorf("first late tick late_by %v, want 4h30m0s", d["late_by"])
				}
				if x := onceflow.Explain(late[0]); !strings.Contains(x, "tick 2026-11-02T11:00:00+01:00 (Europe/Berlin) of schedule report started late by 4h30m0s") {
					t.Errorf("explanation %q", x)
				}
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Driven through the days the clocks change, with an injected clock stepping 7 minutes at a
// time, hourly and daily schedules at the affected wall times start one run per intended
// tick.
func TestScheduleDaylightSavingFires(t *testing.T) {
	cases := []struct {
		tz, day       string
		daily         string
		hourly        int
		dailyKey      string
		ofHourlyAfter string // a key the hourly schedule must have
	}{
		{"Europe/Berlin", "2026-03-29", "30 2 * * *", 23, "daily:2026-03-29T03:00:00+02:00", "hourly:2026-03-29T03:00:00+02:00"},
		{"Europe/Berlin", "2026-10-25", "30 2 * * *", 24, "daily:2026-10-25T02:30:00+02:00", "hourly:2026-10-25T02:00:00+02:00"},
		{"America/New_York", "2026-03-08", "30 2 * * *", 23, "daily:2026-03-08T03:00:00-04:00", "hourly:2026-03-08T03:00:00-04:00"},
		{"America/New_York", "2026-11-01", "30 1 * * *", 24, "daily:2026-11-01T01:30:00-04:00", "hourly:2026-11-01T01:00:00-04:00"},
	}
	for _, tc := range cases {
		t.Run(tc.tz+"/"+tc.day, func(t *testing.T) {
			b := setup(t, func(c *onceflow.Config) { c.ScheduleLate = 10 * time.Minute })
			b.register(t, reportWorkflow("report"))
			for name, expr := range map[string]string{"hourly": "0 * * * *", "daily": tc.daily} {
				if err := b.client.RegisterSchedule(onceflow.Schedule{Name: name, Workflow: "report", Cron: expr, Timezone: tc.tz}); err != nil {
					t.Fatal(err)
				}
			}
			loc, _ := time.LoadLocation(tc.tz)
			start, _ := time.ParseInLocation("2006-01-02", tc.day, loc)
			end := start.AddDate(0, 0, 1)
			b.clock.Set(start.Add(-time.Second))
			b.fire(t)
			for now := start; now.Before(end); now = now.Add(7 * time.Minute) {
				b.clock.Set(now)
				b.fire(t)
			}
			b.clock.Set(end.Add(-time.Second))
			b.fire(t)
			var hourly, daily []string
			for _, k := range b.runKeys(t, "report") {
				if strings.HasPrefix(k, "hourly:") {
					hourly = append(hourly, k)
				} else {
					daily = append(daily, k)
				}
			}
			if len(hourly) != tc.hourly {
				t.Errorf("hourly: %d runs, want %d: %v", len(hourly), tc.hourly, hourly)
			}
			if !equal(daily, []string{tc.dailyKey}) {
				t.Errorf("daily: runs %v, want [%s]", daily, tc.dailyKey)
			}
			// The intended hourly ticks, found without the schedule's clock: every whole
			// hour of real time through the day, each wall-clock hour once, at its first
			// occurrence.
			var want []string
			seen := map[string]bool{}
			for at := start; at.Before(end); at = at.Add(time.Hour) {
				if w := at.Format("2006-01-02T15"); !seen[w] {
					seen[w] = true
					want = append(want, "hourly:"+at.Format(time.RFC3339))
				}
			}
			sort.Strings(want)
			if !equal(hourly, want) {
				t.Errorf("hourly runs\n%v\nwant\n%v", hourly, want)
			}
			if !slices.Contains(hourly, tc.ofHourlyAfter) {
				t.Errorf("hourly runs %v lack %s", hourly, tc.ofHourlyAfter)
			}
			t.Logf("%s %s: hourly %d runs, daily %v", tc.tz, tc.day, len(hourly), daily)
			if evs := b.events(t, store.EventListParams{Entity: "schedule:hourly"}); len(evs) != 0 {
				t.Errorf("stepping through the day produced catch-up decisions: %v", eventTypes(evs, ""))
			}
		})
	}
}

// A manual trigger uses the same key as the tick: it cannot double a tick that already ran.
func TestScheduleTriggerUsesTheTickKey(t *testing.T) {
	b := setup(t)
	b.register(t, reportWorkflow("report"))
	if err := b.client.RegisterSchedule(onceflow.Schedule{Workflow: "report", Cron: "@monthly", Timezone: "Europe/Berlin",
		RunKey: "report:{schedule.period}"}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.FixedZone("", 3600))
	r1, err := b.client.TriggerSchedule(b.ctx, "report", at)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.client.TriggerSchedule(b.ctx, "report", at.UTC())
	if err != nil {
		t.Fatal(err)
	}
	if r1.RunKey != "report:2026-11" || r2.ID != r1.ID || !r2.Duplicate {
		t.Fatalf("triggers: %+v then %+v; want one run report:2026-11", r1, r2)
	}
	var in struct {
		Schedule map[string]string `json:"schedule"`
	}
	if err := json.Unmarshal(r1.Input, &in); err != nil {
		t.Fatal(err)
	}
	if in.Schedule["time"] != "2026-11-01T00:00:00+01:00" || in.Schedule["previous"] != "2026-10-01T00:00:00+02:00" || in.Schedule["period"] != "2026-11" {
		t.Errorf("run input %v", in.Schedule)
	}
	if _, err := b.client.TriggerSchedule(b.ctx, "nope", at); !errors.Is(err, onceflow.ErrScheduleNotFound) {
		t.Errorf("unknown schedule: %v", err)
	}
	// A time that is not a tick would render another key and start the tick's work again:
	// refused, naming the ticks around it.
	for _, off := range []time.Time{at.Add(time.Second), at.Add(500 * time.Millisecond), at.AddDate(0, 0, 14)} {
		r, err := b.client.TriggerSchedule(b.ctx, "report", off)
		if !errors.Is(err, onceflow.ErrNotATick) || r != nil {
			t.Errorf("trigger at %s: %+v, %v; want ErrNotATick", off.Format(time.RFC3339Nano), r, err)
		} else if !strings.Contains(err.Error(), "the tick before is 2026-11-01T00:00:00+01:00, the one after 2026-12-01T00:00:00+01:00") {
			t.Errorf("trigger at %s: %v", off.Format(time.RFC3339Nano), err)
		}
	}
	if keys := b.runKeys(t, "report"); !equal(keys, []string{"report:2026-11"}) {
		t.Errorf("runs %v, want the one of November", keys)
	}
}

func TestRegisterScheduleRefuses(t *testing.T) {
	b := setup(t)
	b.register(t, reportWorkflow("report"))
	fetch := func(context.Context, onceflow.Tick, string) (onceflow.FanOutPage, error) {
		return onceflow.FanOutPage{}, nil
	}
	for _, tc := range []struct {
		s     onceflow.Schedule
		field string
	}{
		{onceflow.Schedule{Workflow: "report", Cron: "99 * * * *"}, "schedule.cron"},
		{onceflow.Schedule{Workflow: "report", Cron: "@daily", Timezone: "Europe/Atlantis"}, "schedule.timezone"},
		{onceflow.Schedule{Workflow: "report", Cron: "@daily", RunKey: "report:{schedule.name}"}, "schedule.run_key"},
		{onceflow.Schedule{Workflow: "report", Cron: "@daily", RunKey: "inv:{schedule.period}", ForEach: &onceflow.FanOut{Fetch: fetch}}, "schedule.run_key"},
		{onceflow.Schedule{Workflow: "report", Cron: "@daily", CatchUp: "some"}, "schedule.catch_up"},
		{onceflow.Schedule{Workflow: "nope", Cron: "@daily"}, "schedule.workflow"},
	} {
		err := b.client.RegisterSchedule(tc.s)
		var de *onceflow.DefinitionError
		if !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("RegisterSchedule(%+v) = %v, want a problem with %s", tc.s, err, tc.field)
		}
	}
}

// customers is a paged list of n customers, size per page, cursor = index of the next
// page's first item.
func customers(n, size int, fail *atomic.Int32, bad *atomic.Bool) func(context.Context, onceflow.Tick, string) (onceflow.FanOutPage, error) {
	return func(_ context.Context, _ onceflow.Tick, cursor string) (onceflow.FanOutPage, error) {
		if fail != nil && fail.Load() > 0 {
			fail.Add(-1)
			return onceflow.FanOutPage{}, errors.New("billing API answered 503")
		}
		from := 0
		if cursor != "" {
			fmt.Sscan(cursor, &from)
		}
		var page onceflow.FanOutPage
		for i := from; i < n && i < from+size; i++ {
			page.Items = append(page.Items, json.RawMessage(fmt.Sprintf(`{"customer_id": "c%03d", "plan": "pro"}`, i)))
			if bad != nil && bad.Load() && i%10 == 0 {
				// Broken entries amid good ones: no customer id, not an object.
				page.Items = append(page.Items, json.RawMessage(`{"plan": "pro"}`), json.RawMessage(`"c999"`))
			}
		}
		if from+size < n {
			page.Next = fmt.Sprint(from + size)
		}
		return page, nil
	}
}

// A fan-out tick starts one run per item, keyed by item and period; walking the list again
// (a retry, a manual trigger) starts nothing twice. A list that cannot be fetched is
// retried with backoff and then waits for review.
func TestScheduleFanOut(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "invoice", Entity: "customer:{input.item.customer_id}", Steps: []onceflow.Step{{ID: "issue", Do: noop}}})
	var fail atomic.Int32
	var bad atomic.Bool
	if err := b.client.RegisterSchedule(onceflow.Schedule{Name: "invoices", Workflow: "invoice", Cron: "0 9 1 * *", Timezone: "Europe/Berlin",
		RunKey:  "invoice:{item.customer_id}:{schedule.period}:subscription",
		ForEach: &onceflow.FanOut{Fetch: customers(120, 50, &fail, &bad), Retry: onceflow.RetryPolicy{MaxAttempts: 3, Initial: time.Second}}}); err != nil {
		t.Fatal(err)
	}
	b.fireNovember(t)
	keys := b.runKeys(t, "invoices.for-each")
	if !equal(keys, []string{"invoices:2026-11-01T09:00:00+01:00"}) {
		t.Fatalf("fan-out runs %v", keys)
	}
	inv := b.runKeys(t, "invoice")
	if len(inv) != 120 || inv[0] != "invoice:c000:2026-11:subscription" {
		t.Fatalf("%d invoice runs, first %v", len(inv), inv[:min(1, len(inv))])
	}
	// A manual trigger of the same tick walks nothing again: its run exists.
	r, err := b.client.TriggerSchedule(b.ctx, "invoices", time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC))
	if err != nil || !r.Duplicate {
		t.Fatalf("trigger of a fired tick: %+v %v", r, err)
	}
	// The next month's list fails three times: retried, then parked for review.
	fail.Store(3)
	b.clock.Set(time.Date(2026, 12, 1, 8, 0, 5, 0, time.UTC))
	b.fire(t)
	for range 3 {
		b.work(t)
		b.clock.Advance(10 * time.Minute)
	}
	runs, _ := b.store.RunList(b.ctx, store.RunListParams{Workflow: "invoices.for-each", RunKey: "invoices:2026-12-01T09:00:00+01:00"})
	if len(runs) != 1 || runs[0].State != store.StateNeedsReview {
		t.Fatalf("failing fan-out: %+v", runs)
	}
	if n := len(b.runKeys(t, "invoice")); n != 120 {
		t.Fatalf("failing fan-out started runs: %d", n)
	}
	// A person retries it once the billing API is back: every customer gets December's run.
	if _, err := b.client.ReviewRetry(b.ctx, onceflow.ReviewAction{RunID: runs[0].ID, Step: "for-each", Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	for b.work(t) > 0 {
	}
	if n := len(b.runKeys(t, "invoice")); n != 240 {
		t.Fatalf("after the retry: %d invoice runs, want 240", n)
	}
	// A list with broken entries: every good item is started, and the walk waits for a
	// person with the bad ones named.
	bad.Store(true)
	b.clock.Set(time.Date(2027, 1, 1, 8, 0, 5, 0, time.UTC))
	b.fire(t)
	for b.work(t) > 0 {
	}
	if n := len(b.runKeys(t, "invoice")); n != 360 {
		t.Fatalf("list with broken entries: %d invoice runs, want 360", n)
	}
	runs, _ = b.store.RunList(b.ctx, store.RunListParams{Workflow: "invoices.for-each", RunKey: "invoices:2027-01-01T09:00:00+01:00"})
	walk := b.steps(t, runs[0].ID)["for-each"]
	if walk.State != store.StateNeedsReview || !strings.Contains(walk.LastError, "24 of 144 items could not be started") {
		t.Fatalf("walk over broken entries: %s %q", walk.State, walk.LastError)
	}
}

// A walk that stops halfway — a page that cannot be fetched, a crash, a timeout — goes on,
// at its next attempt, from the page it had reached: the pages before are not fetched
// again, and the counts add up as for one walk.
func TestScheduleFanOutResumesFromItsCheckpoint(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "invoice", Entity: "customer:{input.item.customer_id}", Steps: []onceflow.Step{{ID: "issue", Do: noop}}})
	list := customers(120, 50, nil, nil)
	var mu sync.Mutex
	var cursors []string
	failed := false
	fetch := func(ctx context.Context, tick onceflow.Tick, cursor string) (onceflow.FanOutPage, error) {
		mu.Lock()
		cursors = append(cursors, cursor)
		fail := cursor == "50" && !failed
		failed = failed || fail
		mu.Unlock()
		if fail {
			return onceflow.FanOutPage{}, errors.New("billing API answered 503")
		}
		return list(ctx, tick, cursor)
	}
	if err := b.client.RegisterSchedule(onceflow.Schedule{Name: "invoices", Workflow: "invoice", Cron: "0 9 1 * *", Timezone: "Europe/Berlin",
		RunKey:  "invoice:{item.customer_id}:{schedule.period}:subscription",
		ForEach: &onceflow.FanOut{Fetch: fetch, Retry: onceflow.RetryPolicy{MaxAttempts: 3, Initial: time.Second}}}); err != nil {
		t.Fatal(err)
	}
	b.fireNovember(t)
	if n := len(b.runKeys(t, "invoice")); n != 50 {
		t.Fatalf("after the failed page: %d invoice runs, want the first page's 50", n)
	}
	b.clock.Advance(10 * time.Minute)
	for b.work(t) > 0 {
	}
	if n := len(b.runKeys(t, "invoice")); n != 120 {
		t.Fatalf("after the retry: %d invoice runs, want 120", n)
	}
	if !slices.Equal(cursors, []string{"", "50", "50", "100"}) {
		t.Fatalf("pages fetched %q, want the retry to start at the page that failed", cursors)
	}
	runs, _ := b.store.RunList(b.ctx, store.RunListParams{Workflow: "invoices.for-each"})
	walk := b.steps(t, runs[0].ID)["for-each"]
	var got onceflow.FanOutResult
	if err := json.Unmarshal(walk.Output, &got); err != nil || walk.State != store.StateCompleted || walk.Attempt != 2 ||
		got != (onceflow.FanOutResult{Pages: 3, Items: 120, Started: 120}) {
		t.Fatalf("walk %s attempt %d output %s (%v)", walk.State, walk.Attempt, walk.Output, err)
	}
}

// A step with a delay waits pending with its due time after the step it needs, is not
// claimed before, and its condition is evaluated when the timer fires; not_before reads a
// time from the input.
func TestStepDelayAndNotBefore(t *testing.T) {
	b := setup(t)
	var whenAt []time.Time
	b.register(t, onceflow.Workflow{Name: "lead", Steps: []onceflow.Step{
		{ID: "crm", Do: noop},
		{ID: "follow-up", Needs: []string{"crm"}, Delay: 24 * time.Hour, Do: noop,
			When: func(sc *onceflow.StepContext) (bool, error) { whenAt = append(whenAt, b.clock.Now()); return true, nil }},
		{ID: "reminder", Do: noop, NotBefore: func(sc *onceflow.StepContext) (time.Time, error) {
			var in struct{ Appointment time.Time }
			if err := sc.DecodeInput(&in); err != nil {
				return time.Time{}, err
			}
			return in.Appointment.Add(-2 * time.Hour), nil
		}},
	}})
	t0 := b.clock.Now()
	run := b.start(t, "lead", "l1", map[string]any{"appointment": t0.Add(48 * time.Hour)})
	for b.work(t) > 0 {
	}
	steps := b.steps(t, run.ID)
	if steps["crm"].State != store.StateCompleted {
		t.Fatalf("crm %s", steps["crm"].State)
	}
	fu := steps["follow-up"]
	if fu.State != store.StatePending || fu.Reason != store.ReasonDelayed || !fu.NextAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("follow-up %s %s due %s, want pending delayed due %s", fu.State, fu.Reason, fu.NextAt, t0.Add(24*time.Hour))
	}
	if rm := steps["reminder"]; rm.State != store.StatePending || !rm.NextAt.Equal(t0.Add(46*time.Hour)) {
		t.Fatalf("reminder %s due %s", rm.State, rm.NextAt)
	}
	if st := b.run(t, run.ID).State; st != store.StatePending {
		t.Errorf("run state %s while its steps wait for their time, want pending", st)
	}
	if len(whenAt) != 0 {
		t.Fatalf("when evaluated before the timer fired: %v", whenAt)
	}
	b.clock.Set(t0.Add(24*time.Hour - time.Second))
	if n := b.work(t); n != 0 {
		t.Fatalf("%d steps ran before the delay ended", n)
	}
	b.clock.Set(t0.Add(24 * time.Hour))
	for b.work(t) > 0 {
	}
	if st := b.steps(t, run.ID)["follow-up"]; st.State != store.StateCompleted || st.Attempt != 1 || len(whenAt) != 1 {
		t.Fatalf("follow-up %s attempt %d, when evaluated %d times", st.State, st.Attempt, len(whenAt))
	}
	b.clock.Set(t0.Add(46 * time.Hour))
	for b.work(t) > 0 {
	}
	if st := b.steps(t, run.ID)["reminder"]; st.State != store.StateCompleted {
		t.Fatalf("reminder %s", st.State)
	}
	evs := b.events(t, store.EventListParams{RunID: run.ID})
	n := 0
	for _, e := range evs {
		if e.Type == store.EventStepDelayed {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d step.delayed events, want 2", n)
	}
}

// A tick whose run exists with another input (the schedule changed since it ran) is not
// started again, and does not stop the schedule.
func TestScheduleTickRanWithAnotherInput(t *testing.T) {
	b := setup(t)
	b.register(t, reportWorkflow("report"))
	if err := b.client.RegisterSchedule(onceflow.Schedule{Workflow: "report", Cron: "0 * * * *", CatchUp: onceflow.CatchUpAll}); err != nil {
		t.Fatal(err)
	}
	b.start(t, "report", "report:2026-03-01T10:00:00Z", map[string]any{"schedule": "an older definition"})
	b.fire(t) // first sight at 09:00
	b.clock.Set(time.Date(2026, 3, 1, 11, 0, 10, 0, time.UTC))
	b.fire(t)
	keys := b.runKeys(t, "report")
	if !equal(keys, []string{"report:2026-03-01T10:00:00Z", "report:2026-03-01T11:00:00Z"}) {
		t.Fatalf("runs %v", keys)
	}
	late := b.events(t, store.EventListParams{Entity: "schedule:report"})
	if len(late) != 1 || late[0].Type != store.EventScheduleTickLate || late[0].RunID != 1 {
		t.Fatalf("events %v: want the 10:00 tick recorded late with the run that exists", eventTypes(late, ""))
	}
	st, err := b.store.ScheduleGet(b.ctx, "report")
	if err != nil || !st.Through.Equal(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)) {
		t.Fatalf("schedule state %+v %v: want it past both ticks", st, err)
	}
}

// A per-second schedule down for three hours skips more ticks than the audit lists one by
// one: the rest are counted in one event, and the schedule goes on from now.
func TestScheduleLongDowntime(t *testing.T) {
	b := setup(t)
	b.register(t, reportWorkflow("report"))
	if err := b.client.RegisterSchedule(onceflow.Schedule{Workflow: "report", Cron: "* * * * * *", CatchUp: onceflow.CatchUpNone}); err != nil {
		t.Fatal(err)
	}
	b.fire(t)
	b.clock.Advance(3 * time.Hour)
	b.fire(t)
	evs := b.events(t, store.EventListParams{Entity: "schedule:report", Limit: 10000})
	missed := 3*3600 - 61 // ticks up to a minute old, both ends included, are on time
	if len(evs) != 101 || detailOf(t, evs[100])["more_ticks_skipped"] != float64(missed-100) {
		t.Fatalf("%d events, last %s", len(evs), evs[len(evs)-1].Detail)
	}
	if n := len(b.runKeys(t, "report")); n != 61 {
		t.Fatalf("%d runs, want the 61 on-time ticks", n)
	}
}

// Replacing the definitions swaps the schedules with the workflows, all or nothing: a
// reload that keeps the workflows keeps the schedules and their fan-out workflows (so a
// fan-out in flight goes on), a schedule whose workflow is missing refuses the whole set,
// a new schedule fires from then on, and a removed one fires no more.
func TestReplaceDefinitionsSchedules(t *testing.T) {
	b := setup(t)
	invoice := onceflow.Workflow{Name: "invoice", Steps: []onceflow.Step{{ID: "issue", Do: noop}}}
	b.register(t, invoice)
	b.register(t, reportWorkflow("report"))
	var fail atomic.Int32
	var bad atomic.Bool
	fan := onceflow.Schedule{Name: "invoices", Workflow: "invoice", Cron: "0 9 1 * *", Timezone: "Europe/Berlin",
		RunKey:  "invoice:{item.customer_id}:{schedule.period}",
		ForEach: &onceflow.FanOut{Fetch: customers(10, 5, &fail, &bad)}}
	if err := b.client.RegisterSchedule(fan); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC))
	b.fire(t)
	b.clock.Set(time.Date(2026, 11, 1, 8, 0, 5, 0, time.UTC))
	b.fire(t) // the fan-out run is started, not yet worked

	// Replacing the workflows alone keeps the schedule and its fan-out workflow.
	if _, err := b.client.ReplaceWorkflows([]onceflow.Workflow{invoice, reportWorkflow("report")}); err != nil {
		t.Fatal(err)
	}
	if got := b.client.Workflows(); !equal(got, []string{"invoice", "invoices.for-each", "report"}) {
		t.Fatalf("workflows after a replace: %v", got)
	}
	for b.work(t) > 0 {
	}
	if n := len(b.runKeys(t, "invoice")); n != 10 {
		t.Fatalf("the fan-out in flight started %d runs, want 10", n)
	}
	// Dropping the schedule's workflow without dropping the schedule changes nothing.
	if _, err := b.client.ReplaceWorkflows([]onceflow.Workflow{reportWorkflow("report")}); err == nil || !strings.Contains(err.Error(), "not among the workflows given") {
		t.Fatalf("replace without the schedule's workflow: %v", err)
	}
	// The same, with a bad new schedule: nothing changes either.
	_, err := b.client.ReplaceDefinitions([]onceflow.Workflow{invoice, reportWorkflow("report")},
		[]onceflow.Schedule{fan, {Name: "daily", Workflow: "report", Cron: "not cron"}})
	if err == nil || !strings.Contains(err.Error(), `cron expression "not cron"`) {
		t.Fatalf("replace with a bad schedule: %v", err)
	}
	if got := b.client.Workflows(); !equal(got, []string{"invoice", "invoices.for-each", "report"}) {
		t.Fatalf("workflows after refused replaces: %v", got)
	}
	// Swap the monthly fan-out for a daily report.
	if _, err := b.client.ReplaceDefinitions([]onceflow.Workflow{invoice, reportWorkflow("report")},
		[]onceflow.Schedule{{Name: "daily", Workflow: "report", Cron: "0 6 * * *", Timezone: "UTC"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.client.Workflows(); !equal(got, []string{"invoice", "report"}) {
		t.Fatalf("workflows after the swap: %v", got)
	}
	b.fire(t) // the daily schedule is seen for the first time: it starts from now
	b.clock.Set(time.Date(2026, 12, 2, 6, 0, 1, 0, time.UTC))
	b.fire(t)
	if keys := b.runKeys(t, "report"); len(keys) != 1 || !strings.HasPrefix(keys[0], "daily:2026-12-02T06:00:00") {
		t.Fatalf("daily report runs %v", keys)
	}
	if n := len(b.runKeys(t, "invoices.for-each")); n != 1 {
		t.Fatalf("the removed schedule fired again: %d fan-out runs", n)
	}
}

// Client.Schedules lists each schedule's next ticks in its zone and the last tick the
// scheduler fired with the run it started; a tick fired by hand starts its run but does not
// change which ticks the scheduler considers fired.
func TestSchedulesInfo(t *testing.T) {
	b := setup(t)
	b.register(t, reportWorkflow("report"))
	if err := b.client.RegisterSchedule(onceflow.Schedule{Name: "nightly", Workflow: "report", Cron: "30 2 * * *",
		Timezone: "America/New_York", CatchUp: onceflow.CatchUpNone}); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC)) // 01:00 EDT, the day New York falls back
	b.fire(t)
	infos, err := b.client.Schedules(b.ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !infos[0].LastTick.IsZero() || infos[0].LastRunID != 0 {
		t.Fatalf("before any tick: %+v", infos)
	}
	var next []string
	for _, n := range infos[0].Next {
		next = append(next, n.Format(time.RFC3339))
	}
	if want := []string{"2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00", "2026-11-03T02:30:00-05:00"}; !equal(next, want) {
		t.Errorf("next ticks %v, want %v", next, want)
	}
	b.clock.Set(time.Date(2026, 11, 1, 7, 30, 5, 0, time.UTC))
	b.fire(t)
	runs := b.runKeys(t, "report")
	if !equal(runs, []string{"nightly:2026-11-01T02:30:00-05:00"}) {
		t.Fatalf("runs %v", runs)
	}
	fired, err := b.store.RunGetByKey(b.ctx, "report", runs[0])
	if err != nil {
		t.Fatal(err)
	}
	manual, err := b.client.TriggerSchedule(b.ctx, "nightly", time.Date(2026, 10, 20, 2, 30, 0, 0, time.FixedZone("EDT", -4*3600)))
	if err != nil || manual.Duplicate {
		t.Fatalf("manual tick: %+v %v", manual, err)
	}
	infos, err = b.client.Schedules(b.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	in := infos[0]
	if in.LastTick.Format(time.RFC3339) != "2026-11-01T02:30:00-05:00" || in.LastRunID != fired.ID || in.LastRunID == manual.ID {
		t.Errorf("last tick %s run %d, want 2026-11-01T02:30:00-05:00 and run %d (the manual run is %d)",
			in.LastTick.Format(time.RFC3339), in.LastRunID, fired.ID, manual.ID)
	}
	if len(in.Next) != 1 || in.Next[0].Format(time.RFC3339) != "2026-11-02T02:30:00-05:00" {
		t.Errorf("next tick %v", in.Next)
	}
}

// A list whose pages overlap — a customer inserted while the list is walked shifts an
// offset-paged list, so the next page starts with the last customer of the page before —
// starts one run per customer: an item whose run exists is counted, not started again.
func TestScheduleFanOutOverlappingPages(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "invoice", Entity: "customer:{input.item.customer_id}", Steps: []onceflow.Step{{ID: "issue", Do: noop}}})
	list := customers(120, 50, nil, nil)
	fetch := func(ctx context.Context, tick onceflow.Tick, cursor string) (onceflow.FanOutPage, error) {
		page, err := list(ctx, tick, cursor)
		if err == nil && cursor != "" {
			from := 0
			fmt.Sscan(cursor, &from)
			prev := json.RawMessage(fmt.Sprintf(`{"customer_id": "c%03d", "plan": "pro"}`, from-1))
			page.Items = append([]json.RawMessage{prev}, page.Items...)
		}
		return page, err
	}
	if err := b.client.RegisterSchedule(onceflow.Schedule{Name: "invoices", Workflow: "invoice", Cron: "0 9 1 * *", Timezone: "Europe/Berlin",
		RunKey: "invoice:{item.customer_id}:{schedule.period}:subscription", ForEach: &onceflow.FanOut{Fetch: fetch}}); err != nil {
		t.Fatal(err)
	}
	b.fireNovember(t)
	keys := b.runKeys(t, "invoice")
	if len(keys) != 120 || len(slices.Compact(slices.Clone(keys))) != 120 {
		t.Fatalf("%d invoice runs, want 120 distinct", len(keys))
	}
	runs, _ := b.store.RunList(b.ctx, store.RunListParams{Workflow: "invoices.for-each"})
	walk := b.steps(t, runs[0].ID)["for-each"]
	var got onceflow.FanOutResult
	if err := json.Unmarshal(walk.Output, &got); err != nil || got != (onceflow.FanOutResult{Pages: 3, Items: 122, Started: 120, Existing: 2}) {
		t.Fatalf("walk %s output %s (%v), want 122 items: 120 started, 2 existing", walk.State, walk.Output, err)
	}
}
