package store

import (
	"context"
	"errors"
	"time"
)

// Events, reasons and the actor of schedules and delayed steps.
const (
	// EventScheduleTickLate: a tick missed while no process was firing was started late
	// (detail: tick, late_by, policy).
	EventScheduleTickLate EventType = "schedule.tick_late"
	// EventScheduleTickSkipped: a missed tick was not started because the catch-up policy
	// says so (detail: tick, policy).
	EventScheduleTickSkipped EventType = "schedule.tick_skipped"
	// EventStepDelayed: a step waits for its delay or not_before time (detail: due_at).
	EventStepDelayed EventType = "step.delayed"
	// ReasonDelayed is the reason of a step waiting for its due time.
	ReasonDelayed Reason = "delayed"
	// Reasons of tick events, by catch-up policy: all, latest, none; ReasonMaxCatchUp for
	// a tick that all skips beyond max_catch_up, ReasonCatchUpSummary for the one event
	// that counts the skipped ticks not listed one by one.
	ReasonCatchUpAll     Reason = "catch_up_all"
	ReasonCatchUpLatest  Reason = "catch_up_latest"
	ReasonCatchUpNone    Reason = "catch_up_none"
	ReasonMaxCatchUp     Reason = "max_catch_up"
	ReasonCatchUpSummary Reason = "catch_up_summary"
	// ActorScheduler names the events the scheduler causes.
	ActorScheduler = "scheduler"
)

// ScheduleState is the durable state of one schedule.
type ScheduleState struct {
	Name string
	// Through is the nominal time up to which (inclusive) every tick has been fired or
	// skipped.
	Through time.Time
	// LastTick is the nominal time of the latest tick fired, and LastRunID the run it
	// started (zero when none was fired yet).
	LastTick  time.Time
	LastRunID int64
	UpdatedAt time.Time
}

// ScheduleAdvanceParams are the arguments of ScheduleAdvance.
type ScheduleAdvanceParams struct {
	Name string
	// From is the Through the caller read (zero when the schedule had no state).
	From time.Time
	// To becomes Through; it must be after From.
	To time.Time
	// LastTick and LastRunID, when LastTick is not zero, record the latest tick fired.
	LastTick  time.Time
	LastRunID int64
	Now       time.Time
	// Events are appended in the same transaction, only if the advance applies.
	Events []*Event
}

// Validate checks the arguments of ScheduleAdvance.
func (p ScheduleAdvanceParams) Validate() error {
	if p.Name == "" || p.To.IsZero() {
		return errors.New("schedule advance: Name and To are required")
	}
	if !p.From.IsZero() && !p.To.After(p.From) {
		return errors.New("schedule advance: To must be after From")
	}
	return nil
}

// ScheduleStore keeps the state of schedules, so that the process that fires ticks knows,
// after a restart or a change of leader, which ticks were handled.
type ScheduleStore interface {
	// ScheduleGet returns a schedule's state, or ErrNotFound before its first advance.
	ScheduleGet(ctx context.Context, name string) (*ScheduleState, error)
	// ScheduleList returns the state of every schedule, by name.
	ScheduleList(ctx context.Context) ([]*ScheduleState, error)
	// ScheduleAdvance moves a schedule's Through from p.From to p.To, compare-and-set: it
	// returns false and writes nothing when Through is no longer p.From (another process
	// advanced it). The events are appended in the same transaction.
	ScheduleAdvance(ctx context.Context, p ScheduleAdvanceParams) (bool, error)
}

// WaitingUntil returns when a run whose steps are steps next has something to do, if all
// it waits for is time: the earliest due time of its steps waiting for a delay or
// not_before (reason delayed). It is zero when no step waits for time or another step is
// running, retrying or ready.
func WaitingUntil(steps []*Step) time.Time {
	var due time.Time
	for _, st := range steps {
		switch {
		case st.State == StateProcessing || st.State == StateRetrying:
			return time.Time{}
		case st.State == StatePending && st.Waiting == 0 && st.Reason != ReasonDelayed:
			return time.Time{}
		case st.State == StatePending && st.Reason == ReasonDelayed:
			if due.IsZero() || st.NextAt.Before(due) {
				due = st.NextAt
			}
		}
	}
	return due
}
