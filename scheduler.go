package onceflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/store"
)

// schedulerLeader is the name of the leadership that decides which of many processes
// fires schedule ticks.
const schedulerLeader = "scheduler"

// maxSkipEvents caps the schedule.tick_skipped events one decision writes; the last one
// counts the ticks it leaves out.
const maxSkipEvents = 100

// scheduleLoop fires due schedule ticks every ScheduleInterval until ctx ends, on one
// process at a time: before each round it acquires or renews the scheduler leadership, for
// three intervals, and only the leader fires. Two leaders at once (a paused process that
// wakes up) cannot double a tick either: its run key is the same. A process without
// schedules does not compete for the leadership; it looks again each interval, as a
// reload may give it some.
func (c *Client) scheduleLoop(ctx context.Context) {
	active := func() bool { return len(c.scheduleDefs()) > 0 }
	c.leaderLoop(ctx, schedulerLeader, c.cfg.ScheduleInterval, active, func(ctx context.Context) {
		if err := c.FireSchedules(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("scheduler: firing ticks failed", "error", err)
		}
	})
}

// FireSchedules fires, for every registered schedule, the ticks that came due since it last
// fired, as its catch-up policy decides, and records how far it got. Serve calls it every
// ScheduleInterval on the process that leads the scheduler; FireSchedules itself fires
// unconditionally. A schedule seen for the first time starts from now: ticks before it are
// not missed ones.
//
// Ticks up to Config.ScheduleLate old are on time and always fire. Older ones were missed:
// CatchUpAll fires the newest MaxCatchUp of them, CatchUpLatest the newest one (none if an
// on-time tick follows it), CatchUpNone none; each one fired late appends
// schedule.tick_late, each one skipped schedule.tick_skipped.
func (c *Client) FireSchedules(ctx context.Context) error {
	var errs []error
	for _, sd := range c.scheduleDefs() {
		if err := c.fireSchedule(ctx, sd); err != nil {
			errs = append(errs, fmt.Errorf("schedule %q: %w", sd.Name, err))
		}
	}
	return errors.Join(errs...)
}

// tickDecision is what a round does with one due tick.
type tickDecision struct {
	at     time.Time
	fire   bool
	late   bool
	reason Reason
}

// scheduleNow is the time schedules read: Config.ScheduleClock, else the engine's time.
func (c *Client) scheduleNow(ctx context.Context) time.Time {
	if c.cfg.ScheduleClock != nil {
		return c.cfg.ScheduleClock()
	}
	return c.now(ctx)
}

func (c *Client) fireSchedule(ctx context.Context, sd *scheduleDef) error {
	now, at := c.scheduleNow(ctx), c.now(ctx)
	st, err := c.store.ScheduleGet(ctx, sd.Name)
	if errors.Is(err, store.ErrNotFound) {
		_, err = c.store.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{Name: sd.Name, To: now, Now: at})
		return err
	}
	if err != nil {
		return err
	}
	decisions, skippedMore := c.decideTicks(sd, st.Through, now)
	if len(decisions) == 0 {
		return nil
	}
	adv := store.ScheduleAdvanceParams{Name: sd.Name, From: st.Through, To: decisions[len(decisions)-1].at, Now: at}
	entity := "schedule:" + sd.Name
	event := func(typ EventType, d tickDecision, runID int64, detail map[string]any) *store.Event {
		detail["schedule"], detail["tick"], detail["timezone"] = sd.Name, d.at.In(sd.clock.loc).Format(time.RFC3339), sd.clock.loc.String()
		detail["policy"] = string(sd.CatchUp)
		return &store.Event{At: at, Type: typ, RunID: runID, Workflow: sd.Workflow, Entity: entity, Actor: store.ActorScheduler,
			Reason: d.reason, Detail: store.EncodeDetail(detail)}
	}
	skips := 0
	for _, d := range decisions {
		if !d.fire {
			if skips < maxSkipEvents {
				adv.Events = append(adv.Events, event(store.EventScheduleTickSkipped, d, 0, map[string]any{
					"missed_by": now.Sub(d.at).Round(time.Second).String(),
				}))
			}
			skips++
			continue
		}
		run, err := c.fireTick(ctx, sd, sd.tick(d.at))
		if err != nil {
			return fmt.Errorf("tick %s: %w", d.at.In(sd.clock.loc).Format(time.RFC3339), err)
		}
		adv.LastTick, adv.LastRunID = d.at, run.ID
		if d.late {
			adv.Events = append(adv.Events, event(store.EventScheduleTickLate, d, run.ID, map[string]any{
				"late_by": now.Sub(d.at).Round(time.Second).String(), "run_key": run.RunKey,
			}))
		}
		if !run.Duplicate {
			c.log.Info("schedule tick fired", "schedule", sd.Name, "tick", d.at.In(sd.clock.loc).Format(time.RFC3339), "run_id", run.ID, "late", d.late)
		}
	}
	if more := max(skips-maxSkipEvents, 0) + skippedMore; more > 0 {
		adv.Events = append(adv.Events, event(store.EventScheduleTickSkipped, tickDecision{at: decisions[0].at, reason: store.ReasonCatchUpSummary}, 0,
			map[string]any{"more_ticks_skipped": more}))
	}
	_, err = c.store.ScheduleAdvance(ctx, adv)
	return err
}

// decideTicks lists the ticks after through, up to now, with what to do about each; ticks
// too many to list (a per-second schedule down for days) are counted in skippedMore and
// were all skipped.
func (c *Client) decideTicks(sd *scheduleDef, through, now time.Time) (decisions []tickDecision, skippedMore int) {
	const listMax = 10000
	var due []time.Time
	for t := sd.clock.next(through); !t.IsZero() && !t.After(now); t = sd.clock.next(t) {
		due = append(due, t)
		if len(due) > listMax {
			due = due[1:]
			skippedMore++
		}
	}
	missed := 0
	for _, t := range due {
		if now.Sub(t) > c.cfg.ScheduleLate {
			missed++
		}
	}
	for i, t := range due {
		d := tickDecision{at: t}
		if i >= missed {
			d.fire = true
			decisions = append(decisions, d)
			continue
		}
		d.late = true
		switch sd.CatchUp {
		case CatchUpAll:
			d.fire = i >= missed-sd.MaxCatchUp
			if !d.fire {
				d.reason = store.ReasonMaxCatchUp
			} else {
				d.reason = store.ReasonCatchUpAll
			}
		case CatchUpLatest:
			d.fire = i == missed-1 && missed == len(due)
			d.reason = store.ReasonCatchUpLatest
		case CatchUpNone:
			d.reason = store.ReasonCatchUpNone
		}
		decisions = append(decisions, d)
	}
	return decisions, skippedMore
}
