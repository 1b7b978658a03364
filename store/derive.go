package store

import "time"

// Derived events. The audit events of the happy path — a run created, a step claimed, a
// step completed, a run's state changed right after one of those — repeat facts that a row
// written in the same transaction holds already: the run, the attempt, the step in flight.
// A backend may keep such an event as the row's facts and the event's ID in a column of
// that row instead of storing it, and build it again when the audit trail is read. The
// sources below are those facts; their Event methods build the event with the very
// functions the write path builds it with (TakeEvent, RecordEvent, RunInsertEvent,
// RunStateEvent), so that a derived event is equal, field by field and byte for byte in
// its detail, to the event the write path appended. A row that derives an event is
// immutable in every column the event reads, so that what an operator saw never changes.
//
// Whether an event is derived or stored, it takes the next ID of the one audit sequence
// in the order the transaction appends its events: IDs and order are the same either way.

// NormalTime is t in UTC, truncated to the microsecond: the time both databases store. A
// store normalizes the times it is given before it builds events from them, so that an
// event built again from the stored row is the event that was built from the call.
func NormalTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// RunCreatedSource holds the facts of a run.created event: the run's row as it was
// created, its number of steps, and its entity at the time of the event.
type RunCreatedSource struct {
	EventID  int64
	RunID    int64
	Workflow string
	RunKey   string
	Entity   string
	Actor    string
	Steps    int
	At       time.Time
}

// Event builds the run.created event.
func (s *RunCreatedSource) Event() *Event {
	e := RunCreatedEvent(s.At, &Run{ID: s.RunID, Workflow: s.Workflow, RunKey: s.RunKey, Entity: s.Entity}, s.Actor, s.Steps)
	e.ID = s.EventID
	return e
}

// ClaimSource holds the facts of a step.claimed event: the claim of one attempt, from the
// step row while the attempt is in flight and from the attempt row once it ended.
type ClaimSource struct {
	EventID  int64
	RunID    int64
	StepID   int64
	Workflow string
	Entity   string
	Step     string
	Key      string
	Worker   string
	Attempt  int
	At       time.Time
	// LeaseUntil is the lease's expiry the claim gave (not as heartbeats extended it).
	LeaseUntil  time.Time
	PrevOutcome Outcome
}

// Event builds the step.claimed event.
func (s *ClaimSource) Event() *Event {
	e := StepClaimedEvent(s.At, &Run{ID: s.RunID, Workflow: s.Workflow, Entity: s.Entity},
		&Step{ID: s.StepID, Name: s.Step, EffectKey: s.Key, Attempt: s.Attempt}, s.Worker, s.LeaseUntil, s.PrevOutcome)
	e.ID = s.EventID
	return e
}

// EndSource holds the facts of a step.completed event that a record appended (see
// DerivableRecord): the attempt row's end.
type EndSource struct {
	EventID  int64
	RunID    int64
	StepID   int64
	Workflow string
	Entity   string
	Step     string
	Key      string
	// Actor is the record's actor (StepRecordParams.RecordActor).
	Actor          string
	Reason         Reason
	Error          string
	Attempt        int
	ResponseStatus int
	Outcome        Outcome
	At             time.Time
}

// Event builds the step.completed event, as RecordEvent builds it.
func (s *EndSource) Event() *Event {
	p := &StepRecordParams{StepID: s.StepID, Attempt: s.Attempt, Now: s.At, Outcome: s.Outcome, Error: s.Error,
		ResponseStatus: s.ResponseStatus, NextState: StateCompleted, Reason: s.Reason, Actor: s.Actor}
	e := RecordEvent(p, &Run{ID: s.RunID, Workflow: s.Workflow, Entity: s.Entity},
		&Step{ID: s.StepID, RunID: s.RunID, Name: s.Step, EffectKey: s.Key, State: StateCompleted, Attempt: s.Attempt}, s.Error)
	e.ID = s.EventID
	return e
}

// RunChangeSource holds the facts of a run.state_changed event that followed a derived
// claim or completion in the same item.
type RunChangeSource struct {
	EventID  int64
	RunID    int64
	Workflow string
	Entity   string
	Actor    string
	From, To State
	At       time.Time
}

// Event builds the run.state_changed event.
func (s *RunChangeSource) Event() *Event {
	e := RunStateEvent(s.At, s.RunID, s.Workflow, s.Entity, s.Actor, s.From, s.To)
	e.ID = s.EventID
	return e
}

// DerivableRecord reports whether the event a record appends when its compare-and-set
// applies can be derived from the attempt row: a completion whose detail holds nothing
// the row does not.
func DerivableRecord(p *StepRecordParams) bool {
	return p.NextState == StateCompleted && len(p.Detail) == 0
}

// RunChange is a run's state change as a derived row keeps it: "from>to".
func RunChange(from, to State) string { return string(from) + ">" + string(to) }

// ParseRunChange splits a RunChange; ok is false for anything else.
func ParseRunChange(s string) (from, to State, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '>' {
			return State(s[:i]), State(s[i+1:]), true
		}
	}
	return "", "", false
}
