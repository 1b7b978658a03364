package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/store"
)

// CatchUp says what a schedule does with ticks that passed while no process fired them
// (every process was down, or the database unreachable) for longer than Config.ScheduleLate.
type CatchUp string

// Catch-up policies. Every tick a policy skips is recorded in the audit trail
// (schedule.tick_skipped), and every tick started late too (schedule.tick_late).
const (
	// CatchUpLatest starts only the newest missed tick (the default).
	CatchUpLatest CatchUp = "latest"
	// CatchUpAll starts every missed tick, the newest MaxCatchUp of them.
	CatchUpAll CatchUp = "all"
	// CatchUpNone starts no missed tick.
	CatchUpNone CatchUp = "none"
)

// Types of the audit events of a schedule's catch-up decisions, about the entity
// schedule:NAME: a missed tick started late, and one skipped by the policy.
const (
	EventScheduleTickLate    = store.EventScheduleTickLate
	EventScheduleTickSkipped = store.EventScheduleTickSkipped
)

// DefaultScheduleRunKey is the run key of a schedule that names none: one run per tick.
const DefaultScheduleRunKey = "{schedule.name}:{schedule.time}"

// Schedule starts runs of a workflow on the clock. Each tick of its cron expression starts
// one run, whose key is rendered from the tick's nominal time, so any number of processes,
// restarts and clock corrections start exactly one run per tick: the run key decides.
//
// Run keys and the run's input read the tick as {schedule.name}, {schedule.time} (the
// nominal time, RFC 3339 in the schedule's zone), {schedule.period} (the calendar period the
// tick stands for: 2026-11 for a monthly schedule, 2026-11-30 for a daily one) and
// {schedule.previous} (the tick before; "" if none). A run's input is
// {"schedule": {"name", "time", "period", "previous"}}, plus {"item": …} for a fan-out.
//
// The cron expression names wall-clock times in Timezone. On the days the clocks change, a
// wall time that does not exist (the clocks go forward) is one tick at the first instant
// after the gap (02:30 on the day Berlin skips from 02:00 to 03:00 fires once, at 03:00
// CEST); a wall time that occurs twice (the clocks go back) is one tick at its first
// occurrence; wall times that land on the same instant are one tick. An hourly schedule
// thus fires 23 times on the spring day and 24 times on the autumn day.
type Schedule struct {
	// Name identifies the schedule (letters, digits, '.', '_' and '-'); default Workflow.
	Name string
	// Workflow is the registered workflow each tick starts.
	Workflow string
	// Cron is the cron expression: five fields (minute hour day-of-month month
	// day-of-week), an optional leading seconds field, or a descriptor such as @daily.
	Cron string
	// Timezone is the IANA zone the expression's wall times are in (default UTC).
	Timezone string
	// RunKey is the template of each run's key; it must read {schedule.time} or
	// {schedule.period}, and for a fan-out an {item.…} field too, so that different ticks
	// or items never merge into one run. Default DefaultScheduleRunKey (no fan-out).
	RunKey string
	// CatchUp decides about missed ticks (default CatchUpLatest).
	CatchUp CatchUp
	// MaxCatchUp caps how many missed ticks CatchUpAll starts (default 10).
	MaxCatchUp int
	// ForEach, when set, makes each tick start one run per item of a list fetched when
	// the tick fires (see FanOut).
	ForEach *FanOut
}

// FanOut fetches, when a tick fires, the list of items that each get a run. The walk is
// itself the one step of a run of its own (workflow NAME.for-each, run key
// "{schedule.name}:{schedule.time}"), so it is durable like any step: a fetch that fails is
// retried with backoff and, once its attempts are used up, waits for review; a process that
// dies halfway leaves it to be taken up again, and the walk starts over — items whose run
// already exists are recognised by their run key, so none is started twice.
type FanOut struct {
	// Fetch returns the page of items that cursor names ("" for the first page) and the
	// cursor of the next page ("" after the last). Items are JSON objects. A plain error
	// is retried; wrap it with PermanentError to send the walk to review at once.
	Fetch func(ctx context.Context, tick Tick, cursor string) (FanOutPage, error)
	// Retry is the retry policy of the walk (zero fields take the step defaults).
	Retry RetryPolicy
	// Timeout bounds one walk of the whole list (default 5 minutes).
	Timeout time.Duration
}

// FanOutPage is one page of a fan-out's list.
type FanOutPage struct {
	Items []json.RawMessage
	// Next is the cursor of the next page; "" when this page is the last.
	Next string
}

// Tick is one tick of a schedule.
type Tick struct {
	Schedule string
	// Time is the nominal time of the tick, in the schedule's zone.
	Time time.Time
	// Period names the calendar period the tick stands for (2026-11, 2026-11-30).
	Period string
	// Previous is the tick before (zero if none in the five years before).
	Previous time.Time
}

// data is the {schedule.…} tree templates and inputs read.
func (t Tick) data() map[string]any {
	prev := ""
	if !t.Previous.IsZero() {
		prev = t.Previous.Format(time.RFC3339)
	}
	return map[string]any{"name": t.Schedule, "time": t.Time.Format(time.RFC3339), "period": t.Period, "previous": prev}
}

// fanOutSuffix names the workflow that walks a fan-out's list.
const fanOutSuffix = ".for-each"

// fanOutRunKey is the run key of the run that walks a fan-out's list for one tick.
var fanOutRunKey = func() *keytmpl.Template {
	t, err := keytmpl.Parse(DefaultScheduleRunKey)
	if err != nil {
		panic(err)
	}
	return t
}()

// scheduleDef is a validated schedule.
type scheduleDef struct {
	Schedule
	clock  *cronClock
	runKey *keytmpl.Template
}

// Validate reports every problem of the schedule, each a *DefinitionError whose Field is
// schedule.NAME-OF-FIELD, joined with errors.Join; nil when it can be registered (its
// workflow must be registered first).
func (s Schedule) Validate() error {
	_, err := compileSchedule(s)
	return err
}

func compileSchedule(s Schedule) (*scheduleDef, error) {
	var problems []error
	bad := func(field, format string, args ...any) {
		problems = append(problems, &DefinitionError{Workflow: s.Workflow, Field: "schedule." + field, Problem: fmt.Sprintf(format, args...)})
	}
	if s.Name == "" {
		s.Name = s.Workflow
	}
	if !workflowNameRE.MatchString(s.Name) {
		bad("name", "the schedule name must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	def := &scheduleDef{Schedule: s}
	if _, err := loadZone(s.Timezone); err != nil {
		bad("timezone", "%v", err)
	} else if c, err := parseCron(s.Cron, s.Timezone); err != nil {
		bad("cron", "%v", err)
	} else {
		def.clock = c
	}
	switch s.CatchUp {
	case "":
		def.CatchUp = CatchUpLatest
	case CatchUpLatest, CatchUpAll, CatchUpNone:
	default:
		bad("catch_up", "catch_up %q is not latest, all or none", s.CatchUp)
	}
	switch {
	case s.MaxCatchUp < 0:
		bad("max_catch_up", "max_catch_up must not be negative")
	case s.MaxCatchUp == 0:
		def.MaxCatchUp = 10
	}
	src := s.RunKey
	if src == "" {
		src = DefaultScheduleRunKey
		if s.ForEach != nil {
			bad("run_key", "a schedule with for_each needs a run_key that reads an item field, such as invoice:{item.customer_id}:{schedule.period}")
		}
	}
	if t, err := keytmpl.Parse(src); err != nil {
		bad("run_key", "run key: %v", err)
	} else {
		def.runKey = t
		var tick, item bool
		for _, f := range t.Fields() {
			switch {
			case f == "schedule.time" || f == "schedule.period":
				tick = true
			case f == "schedule.name" || f == "schedule.previous":
			case strings.HasPrefix(f, "item.") && s.ForEach != nil:
				item = true
			default:
				hint := "{schedule.name}, {schedule.time}, {schedule.period} and {schedule.previous}"
				if s.ForEach != nil {
					hint += " and {item.…}"
				}
				bad("run_key", "run key reads {%s}; it may read %s", f, hint)
			}
		}
		if !tick {
			bad("run_key", "run key %q does not read {schedule.time} or {schedule.period}, so every tick would start the same run", src)
		}
		if s.ForEach != nil && !item && s.RunKey != "" {
			bad("run_key", "run key %q reads no {item.…} field, so every item of the list would start the same run", src)
		}
	}
	if s.ForEach != nil {
		if s.ForEach.Fetch == nil {
			bad("for_each", "for_each needs a Fetch function")
		}
		if s.ForEach.Timeout < 0 {
			bad("for_each", "the fan-out timeout must not be negative")
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return def, nil
}

// tick builds the tick at nominal time t.
func (sd *scheduleDef) tick(t time.Time) Tick {
	t = t.In(sd.clock.loc)
	return Tick{Schedule: sd.Name, Time: t, Period: sd.clock.period(t), Previous: sd.clock.previous(t)}
}

// RegisterSchedule validates a schedule and adds it; its workflow must be registered.
// Serve fires its ticks on the process that leads the scheduler (see FireSchedules).
func (c *Client) RegisterSchedule(s Schedule) error {
	def, err := compileSchedule(s)
	if err != nil {
		return err
	}
	if _, err := c.workflow(def.Workflow); err != nil {
		return &DefinitionError{Workflow: def.Workflow, Field: "schedule.workflow", Problem: "the workflow is not registered with this client"}
	}
	c.mu.Lock()
	if _, dup := c.schedules[def.Name]; dup {
		c.mu.Unlock()
		return &DefinitionError{Workflow: def.Workflow, Field: "schedule.name", Problem: fmt.Sprintf("schedule %q is already registered with this client", def.Name)}
	}
	c.mu.Unlock()
	if def.ForEach != nil {
		if err := c.Register(c.fanOutWorkflow(def)); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.schedules == nil {
		c.schedules = map[string]*scheduleDef{}
	}
	c.schedules[def.Name] = def
	return nil
}

// ScheduleDefinitions returns the registered schedules as they were registered, with the
// defaults they took (a Name, a CatchUp), sorted by name. Schedules describes them with
// their next ticks.
func (c *Client) ScheduleDefinitions() []Schedule {
	defs := c.scheduleDefs()
	out := make([]Schedule, len(defs))
	for i, sd := range defs {
		out[i] = sd.Schedule
	}
	return out
}

// scheduleDefs returns the registered schedules by name.
func (c *Client) scheduleDefs() []*scheduleDef {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*scheduleDef, 0, len(c.schedules))
	for _, sd := range c.schedules {
		out = append(out, sd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ScheduleInfo describes a registered schedule: its definition, its next ticks and the last
// tick fired.
type ScheduleInfo struct {
	Name     string
	Workflow string
	Cron     string
	Timezone string
	RunKey   string
	CatchUp  CatchUp
	// MaxCatchUp caps how many missed ticks CatchUpAll starts.
	MaxCatchUp int
	// ForEach is set for a schedule that fans out over a list.
	ForEach bool
	// Next are the next ticks after now, in the schedule's zone.
	Next []time.Time
	// LastTick and LastRunID are the latest tick fired and the run it started (for a
	// fan-out, the run that walks the list); zero before the first.
	LastTick  time.Time
	LastRunID int64
	// Through is the nominal time up to which every tick was fired or skipped.
	Through time.Time
}

// Schedules describes the registered schedules, by name, with their next n ticks.
func (c *Client) Schedules(ctx context.Context, n int) ([]ScheduleInfo, error) {
	now := c.scheduleNow(ctx)
	var out []ScheduleInfo
	for _, sd := range c.scheduleDefs() {
		info := ScheduleInfo{Name: sd.Name, Workflow: sd.Workflow, Cron: sd.Cron, Timezone: sd.clock.loc.String(), RunKey: sd.runKey.String(),
			CatchUp: sd.CatchUp, MaxCatchUp: sd.MaxCatchUp, ForEach: sd.ForEach != nil}
		for t := now; len(info.Next) < n; {
			if t = sd.clock.next(t); t.IsZero() {
				break
			}
			info.Next = append(info.Next, t)
		}
		st, err := c.store.ScheduleGet(ctx, sd.Name)
		switch {
		case err == nil:
			info.Through = st.Through
			if !st.LastTick.IsZero() {
				info.LastTick, info.LastRunID = st.LastTick.In(sd.clock.loc), st.LastRunID
			}
		case !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("onceflow: schedules: %w", err)
		}
		out = append(out, info)
	}
	return out, nil
}

// ErrScheduleNotFound is returned for a schedule name that is not registered.
var ErrScheduleNotFound = errors.New("onceflow: schedule not found")

// ErrNotATick is returned by TriggerSchedule for a time that is not a tick of the schedule.
var ErrNotATick = errors.New("onceflow: not a tick of the schedule")

// TriggerSchedule fires a tick of the schedule by hand, with nominal time at (zero: the
// latest tick at or before now). at must be a tick of the cron expression, in any zone
// (2026-11-01T09:00:00+01:00 and 2026-11-01T08:00:00Z are the same tick); another time
// returns ErrNotATick, since its run key would differ from the tick's and so start the
// tick's work a second time. The key rules are those of the scheduler: a tick whose run
// already exists starts nothing and returns that run (Run.Duplicate). For a fan-out it
// returns the run that walks the list. It does not change which ticks the scheduler
// considers fired. The run's creation is audited as the scheduler's; TriggerScheduleBy
// names who fired it.
func (c *Client) TriggerSchedule(ctx context.Context, name string, at time.Time) (*Run, error) {
	return c.TriggerScheduleBy(ctx, ScheduleTrigger{Name: name, At: at})
}

// ScheduleTrigger is a tick fired by hand (TriggerScheduleBy).
type ScheduleTrigger struct {
	// Name is the schedule's.
	Name string
	// At is the tick's nominal time (zero: the latest tick at or before now).
	At time.Time
	// Actor is who fires it, as the audit trail names the run's creation (default: the
	// scheduler).
	Actor string
}

// TriggerScheduleBy is TriggerSchedule, with the run's creation audited as t.Actor.
func (c *Client) TriggerScheduleBy(ctx context.Context, t ScheduleTrigger) (*Run, error) {
	sd, tick, err := c.manualTick(ctx, t.Name, t.At)
	if err != nil {
		return nil, err
	}
	actor := t.Actor
	if actor == "" {
		actor = store.ActorScheduler
	}
	return c.fireTick(ctx, sd, tick, actor)
}

// TickPlan is what firing one tick by hand will do (TriggerSchedulePreview).
type TickPlan struct {
	Schedule string
	// Tick is the tick's nominal time, in the schedule's zone.
	Tick time.Time
	// Workflow and RunKey name the run the tick starts: a run of the schedule's workflow,
	// or for a fan-out the run that walks the list (workflow NAME.for-each).
	Workflow string
	RunKey   string
	// ExistingRunID is the run that holds RunKey already (zero: none): firing the tick
	// starts nothing and returns that run.
	ExistingRunID int64
}

// TriggerSchedulePreview says what TriggerSchedule(ctx, name, at) would do, changing
// nothing: the tick at resolves to (the latest at or before now when zero), the run key
// it renders, and the run that holds that key already, if any. Its errors are
// TriggerSchedule's.
func (c *Client) TriggerSchedulePreview(ctx context.Context, name string, at time.Time) (*TickPlan, error) {
	sd, tick, err := c.manualTick(ctx, name, at)
	if err != nil {
		return nil, err
	}
	wf, key, _, err := sd.tickRun(tick)
	if err != nil {
		return nil, err
	}
	plan := &TickPlan{Schedule: sd.Name, Tick: tick.Time, Workflow: wf, RunKey: key}
	runs, err := c.store.RunList(ctx, store.RunListParams{Workflow: wf, RunKey: key, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("onceflow: schedule %q: %w", name, err)
	}
	if len(runs) == 1 {
		plan.ExistingRunID = runs[0].ID
	}
	return plan, nil
}

// manualTick resolves the tick a person fires: at, which must be a tick, or the latest
// tick at or before now when at is zero.
func (c *Client) manualTick(ctx context.Context, name string, at time.Time) (*scheduleDef, Tick, error) {
	c.mu.RLock()
	sd := c.schedules[name]
	c.mu.RUnlock()
	if sd == nil {
		return nil, Tick{}, fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
	}
	if at.IsZero() {
		now := c.scheduleNow(ctx)
		if at = sd.clock.previous(now.Add(time.Second)); at.IsZero() {
			return nil, Tick{}, fmt.Errorf("onceflow: schedule %q has no tick before %s; give the time", name, now.Format(time.RFC3339))
		}
	} else if !sd.clock.next(at.Add(-time.Second)).Equal(at) {
		near := func(t time.Time) string {
			if t.IsZero() {
				return "none"
			}
			return t.Format(time.RFC3339)
		}
		return nil, Tick{}, fmt.Errorf("%w: %s is not a tick of %q (%s in %s); the tick before is %s, the one after %s", ErrNotATick,
			at.In(sd.clock.loc).Format(time.RFC3339Nano), name, sd.Cron, sd.clock.loc, near(sd.clock.previous(at)), near(sd.clock.next(at)))
	}
	return sd, sd.tick(at), nil
}

// tickRun is the run a tick starts: its workflow (for a fan-out, the one that walks the
// list), its run key and its input.
func (sd *scheduleDef) tickRun(t Tick) (workflow, key string, input map[string]any, err error) {
	input = map[string]any{"schedule": t.data()}
	if sd.ForEach != nil {
		key, err = fanOutRunKey.Render(input)
		return sd.Name + fanOutSuffix, key, input, err
	}
	if key, err = sd.runKey.Render(input); err != nil {
		return "", "", nil, fmt.Errorf("onceflow: schedule %q: run key: %w", sd.Name, err)
	}
	return sd.Workflow, key, input, nil
}

// fireTick starts the run of one tick as actor: the workflow's run, or for a fan-out the
// run that walks the list.
func (c *Client) fireTick(ctx context.Context, sd *scheduleDef, t Tick, actor string) (*Run, error) {
	wf, key, input, err := sd.tickRun(t)
	if err != nil {
		return nil, err
	}
	run, err := c.startAs(ctx, nil, wf, key, input, actor)
	var ce *RunConflictError
	if errors.As(err, &ce) {
		// The tick ran with another input (the schedule was changed since): it ran, and is
		// not started again.
		c.log.Warn("schedule tick already started with another input; not started again", "schedule", sd.Name,
			"run_id", ce.RunID, "run_key", key)
		existing, gerr := c.GetRun(ctx, ce.RunID)
		if gerr != nil {
			return nil, gerr
		}
		existing.Duplicate = true
		return existing, nil
	}
	return run, err
}
