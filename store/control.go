package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Operator controls: cancelling a run, pausing a workflow.
const (
	// ReasonRunCancelled is the reason of a step cancelled with its run.
	ReasonRunCancelled Reason = "run_cancelled"
	// ReasonCancelledEffectMayExist is the reason of a step cancelled with its run whose
	// effect may have happened (an unknown outcome, an attempt still running): its key
	// stays held, and a replay does not run it again (ReplayResets).
	ReasonCancelledEffectMayExist Reason = "run_cancelled_effect_may_exist"

	// EventRunCancelled is appended once per cancel, with the actor and note, and the
	// steps cancelled and still running.
	EventRunCancelled EventType = "run.cancelled"
	// EventCancelledAttemptRecorded records the result of an attempt that was running
	// when its run was cancelled: the step stays cancelled; the ledger keeps what happened.
	EventCancelledAttemptRecorded EventType = "step.cancelled_attempt_recorded"
	// EventWorkflowPaused and EventWorkflowResumed record a pause and a resume.
	EventWorkflowPaused  EventType = "workflow.paused"
	EventWorkflowResumed EventType = "workflow.resumed"
)

var (
	// ErrRunFinished: the run has no step left to cancel (every step is completed,
	// skipped, failed or cancelled).
	ErrRunFinished = errors.New("run finished")
	// ErrStepCancelled is the per-entry error of a StepRecord whose step was cancelled, with
	// its run, while the attempt ran: the attempt and the ledger were recorded (a success
	// completes the key, a refusal releases it, an unknown outcome keeps it held); the step
	// stays cancelled.
	ErrStepCancelled = errors.New("step cancelled while its attempt ran")
)

// RunCancelParams are the arguments of RunCancel.
type RunCancelParams struct {
	RunID int64
	// Actor and Note are written to the audit trail; Actor is required.
	Actor string
	Note  string
	Now   time.Time
}

// RunCancelResult is what RunCancel did.
type RunCancelResult struct {
	// Run is the run after the cancel (state cancelled, or failed if a step had failed).
	Run *Run
	// Cancelled are the steps that were pending, retrying or waiting for review, now
	// cancelled.
	Cancelled []*Step
	// Running are the steps whose attempt was under way: they are cancelled too, and the
	// attempt's result, when it comes, is recorded (see ErrStepCancelled).
	Running []*Step
}

// CancelKeepsKey reports whether cancelling st keeps its ledger row held: its effect may
// have happened (an unknown outcome, a success not stored, an attempt still running), so
// the key must not be freed for another step to act again. Otherwise a row st holds is
// released.
func CancelKeepsKey(st *Step) bool {
	return st.State == StateProcessing || st.LastOutcome == OutcomeUnknown || st.LastOutcome == OutcomeSuccess ||
		st.Reason == ReasonOutcomeUnknown
}

// CancelReason is the reason RunCancel gives st.
func CancelReason(st *Step) Reason {
	if CancelKeepsKey(st) {
		return ReasonCancelledEffectMayExist
	}
	return ReasonRunCancelled
}

// CancelledRecordReason is the reason a step cancelled while its attempt ran keeps once the
// attempt is recorded: may-exist only when its outcome is unknown (a success completed the
// key; a refusal released it).
func CancelledRecordReason(p *StepRecordParams) Reason {
	if p.Outcome == OutcomeUnknown {
		return ReasonCancelledEffectMayExist
	}
	return ReasonRunCancelled
}

// Cancellable reports whether RunCancel changes st.
func Cancellable(st *Step) bool {
	switch st.State {
	case StatePending, StateRetrying, StateNeedsReview, StateProcessing:
		return true
	}
	return false
}

// WorkflowPauseParams are the arguments of WorkflowPause and WorkflowResume.
type WorkflowPauseParams struct {
	Workflow string
	// Actor and Note are written to the audit trail; Actor is required.
	Actor string
	Note  string
	Now   time.Time
}

// WorkflowPause is a paused workflow.
type WorkflowPause struct {
	Workflow string
	Since    time.Time
	Actor    string
	Note     string
}

// ControlStore is the part of the contract for an operator's controls over execution.
type ControlStore interface {
	// RunCancel cancels a run, in one transaction: its pending, retrying and needs_review
	// steps become cancelled (reason run_cancelled, event step.cancelled), and so do its
	// processing steps, whose lease is left to the worker running them so that the
	// attempt's result is recorded when it ends (StepRecord answers ErrStepCancelled for
	// it, and the heartbeat keeps extending it). A ledger row a cancelled step holds is
	// released unless CancelKeepsKey. Event run.cancelled names the actor, the note and the
	// steps; the run's state is re-derived. ErrNotFound for an unknown run; ErrRunFinished
	// when no step is left to cancel.
	RunCancel(ctx context.Context, p RunCancelParams) (*RunCancelResult, error)

	// WorkflowPause marks a workflow paused, durably, with event workflow.paused; it
	// reports false, and writes nothing, when it already was. A paused workflow still
	// accepts runs; engines do not claim its steps (see WorkflowPauseList).
	WorkflowPause(ctx context.Context, p WorkflowPauseParams) (changed bool, err error)
	// WorkflowResume ends a pause, with event workflow.resumed; false when it was not
	// paused.
	WorkflowResume(ctx context.Context, p WorkflowPauseParams) (changed bool, err error)
	// WorkflowPauseList returns the paused workflows, by name. Engines read it when they
	// start and every few seconds, never per claim.
	WorkflowPauseList(ctx context.Context) ([]WorkflowPause, error)
}

// PlanCancelledRecord decides what the record of an attempt does when the compare-and-set
// on its step did not apply because the step was cancelled, with its run, while the
// attempt ran (st is the step as it stands: cancelled, still naming p's owner and
// attempt). ok is false for any other lost record. The ledger keeps what happened: a
// success completes the key, a refusal releases it, an unknown outcome keeps it held.
func PlanCancelledRecord(p *StepRecordParams, run *Run, st *Step, errText string) (effect EffectChange, ev *Event, ok bool) {
	if st.State != StateCancelled || st.LeaseOwner != p.Owner || st.Attempt != p.Attempt {
		return EffectKeep, nil, false
	}
	d := map[string]any{"outcome": string(p.Outcome)}
	switch p.Outcome {
	case OutcomeSuccess:
		effect, d["ledger"] = EffectComplete, "completed"
	case OutcomePermanent, OutcomeRetryable:
		effect, d["ledger"] = EffectRelease, "released"
	default:
		effect, d["ledger"] = EffectKeep, "held"
	}
	if errText != "" {
		d["error"] = errText
	}
	if p.ResponseStatus != 0 {
		d["response_status"] = p.ResponseStatus
	}
	ev = StepEvent(EventCancelledAttemptRecorded, p.Now, run, st, p.RecordActor(), ReasonRunCancelled, d)
	ev.Attempt = p.Attempt
	return effect, ev, true
}

// CancelledError is the per-entry error StepRecord returns for such a record.
func CancelledError(p *StepRecordParams) error {
	return fmt.Errorf("step %d attempt %d: %w", p.StepID, p.Attempt, ErrStepCancelled)
}

// Validate checks the arguments of a pause or resume.
func (p *WorkflowPauseParams) Validate() error {
	switch {
	case p.Workflow == "":
		return errors.New("workflow pause: the workflow is required")
	case p.Actor == "":
		return errors.New("workflow pause: the actor is required")
	}
	return nil
}

// CancelPlan is what cancelling a run decides, for a backend to write in its transaction.
type CancelPlan struct {
	// Steps are the steps to cancel, in the run's order. Each Step is already changed to
	// what is to be stored (state cancelled, its new reason); Prev is the state to
	// compare-and-set from, and Release says whether the ledger row it holds in flight is
	// deleted.
	Steps []CancelStep
	// Events are each step's step.cancelled event, then the run's run.cancelled.
	Events []*Event
	// Result lists the steps cancelled and those still running; its Run is left for the
	// backend to read once it refreshed the run's state.
	Result *RunCancelResult
}

// CancelStep is one step a cancel changes.
type CancelStep struct {
	Step    *Step
	Prev    State
	Release bool
}

// PlanCancel decides a cancel of run with its steps (read under the run's lock): which
// steps are cancelled, with which reason, which keep their effect key held (see
// CancelKeepsKey), and the audit events. Steps it cancels are changed in place. An error
// wrapping ErrRunFinished says no step is left to cancel.
func PlanCancel(p RunCancelParams, run *Run, steps []*Step) (*CancelPlan, error) {
	plan := &CancelPlan{Result: &RunCancelResult{}}
	var cancelled, running []string
	for _, st := range steps {
		if !Cancellable(st) {
			continue
		}
		keep := CancelKeepsKey(st)
		reason := CancelReason(st)
		d := map[string]any{"previous_state": string(st.State), "key_held": keep && st.EffectKey != ""}
		if p.Note != "" {
			d["note"] = p.Note
		}
		prev := st.State
		st.State, st.Reason = StateCancelled, reason
		plan.Steps = append(plan.Steps, CancelStep{Step: st, Prev: prev, Release: st.EffectKey != "" && !keep})
		plan.Events = append(plan.Events, StepEvent(EventStepCancelled, p.Now, run, st, p.Actor, reason, d))
		// A running step keeps its lease owner and attempt, so that the attempt's result is
		// recognised and recorded when it comes.
		if prev == StateProcessing {
			running = append(running, st.Name)
			plan.Result.Running = append(plan.Result.Running, st)
		} else {
			cancelled = append(cancelled, st.Name)
			plan.Result.Cancelled = append(plan.Result.Cancelled, st)
		}
	}
	if len(plan.Steps) == 0 {
		return nil, fmt.Errorf("run %d is %s; no step is left to cancel: %w", run.ID, run.State, ErrRunFinished)
	}
	plan.Events = append(plan.Events, RunCancelEvent(p, run, cancelled, running))
	return plan, nil
}

// RunCancelEvent is the run.cancelled event of a cancel that cancelled the steps named.
func RunCancelEvent(p RunCancelParams, run *Run, cancelled, running []string) *Event {
	d := map[string]any{"cancelled": nonNil(cancelled), "running": nonNil(running), "previous_state": string(run.State)}
	if p.Note != "" {
		d["note"] = p.Note
	}
	return &Event{At: p.Now, Type: EventRunCancelled, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity,
		Actor: p.Actor, Reason: ReasonRunCancelled, Detail: EncodeDetail(d)}
}

// WorkflowPauseEvent is the workflow.paused or workflow.resumed event of p.
func WorkflowPauseEvent(typ EventType, p WorkflowPauseParams) *Event {
	d := map[string]any{}
	if p.Note != "" {
		d["note"] = p.Note
	}
	return &Event{At: p.Now, Type: typ, Workflow: p.Workflow, Actor: p.Actor, Detail: EncodeDetail(d)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
