package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The decisions both backends take the same way live here: what a claim does with a
// candidate once its ledger row is known, what a record changes besides the step, and which
// audit events each change appends. A backend reads the rows, calls these functions and
// writes what they return with its own SQL.

// StepEvent builds an audit event about step st of run.
func StepEvent(typ EventType, at time.Time, run *Run, st *Step, actor string, reason Reason, d map[string]any) *Event {
	return &Event{
		At: at, Type: typ, RunID: run.ID, StepID: st.ID, Workflow: run.Workflow, Entity: run.Entity,
		StepName: st.Name, EffectKey: st.EffectKey, Attempt: st.Attempt, Actor: actor, Reason: reason, Detail: EncodeDetail(d),
	}
}

// ClaimAction is what StepClaim does with a candidate.
type ClaimAction int

// Claim actions, in the order StepClaim's documentation lists them.
const (
	// ClaimPark: Prepare failed, or the key was completed with another request; the step
	// goes to needs_review with ClaimPlan.Reason and ClaimPlan.Error.
	ClaimPark ClaimAction = iota + 1
	// ClaimSkip: the step's condition is false; it becomes skipped with ClaimPlan.Reason and
	// the steps that need it are skipped too.
	ClaimSkip
	// ClaimReuse: the key was completed with the same request; the step completes with the
	// ledger's result and releases the steps that need it.
	ClaimReuse
	// ClaimWait: another step holds the key, or the step waits for its due time
	// (EffectSpec.WaitUntil); the step stays due at ClaimPlan.NextAt with ClaimPlan.Reason.
	ClaimWait
	// ClaimTake: this step holds the key; it is claimed (attempt+1, processing under the
	// lease, an attempt row). Its events apply only if the compare-and-set on the step
	// succeeded.
	ClaimTake
)

// ClaimPlan is the decision about one claim candidate.
type ClaimPlan struct {
	Action ClaimAction
	// Spec is what Prepare returned; Step.EffectKey and Step.Fingerprint are set from it.
	Spec EffectSpec
	// Reason and Error say why a step is parked or skipped.
	Reason Reason
	Error  string
	// NextAt is when a waiting step looks again.
	NextAt time.Time
	// UpdateFingerprint is set when the step takes a key whose ledger row holds another
	// fingerprint (a corrected request after a replay): the row's fingerprint is updated.
	UpdateFingerprint bool
	// Events are appended in the claim's transaction, in order. A take has none: its
	// step.claimed is derived from the claim the backend writes (see ClaimSource), and
	// TakeEvent builds it.
	Events []*Event
}

// TakeEvent is the step.claimed event of a ClaimTake of candidate c, as PlanClaim advanced
// its step, for a backend that stores it or checks what it derives.
func TakeEvent(p *StepClaimParams, c *ClaimCandidate) *Event {
	st := c.Step
	return StepClaimedEvent(p.Now, c.Run, st, p.Owner, st.LeaseExpiresAt, st.LastOutcome)
}

// PlanPrepare runs p.Prepare for a candidate and decides what needs no ledger row: a
// candidate whose Prepare failed is parked, one that must wait (EffectSpec.WaitUntil) waits,
// one whose condition is false is skipped. For any other it returns nil and the spec, and
// the backend takes the effect row and calls PlanClaim. It sets the step's EffectKey and Fingerprint.
func PlanPrepare(p *StepClaimParams, c *ClaimCandidate) (*ClaimPlan, EffectSpec) {
	run, st := c.Run, c.Step
	spec, err := p.Prepare(c)
	if err == nil && spec.Key == "" && spec.Skip == "" && !spec.WaitUntil.After(p.Now) {
		err = errors.New("the effect key is empty")
	}
	if err != nil {
		reason := ReasonInvalidKey
		var pe *PrepareError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		return &ClaimPlan{Action: ClaimPark, Reason: reason, Error: err.Error(),
			Events: []*Event{StepEvent(EventStepNeedsReview, p.Now, run, st, ActorEngine, reason, map[string]any{"error": err.Error()})}}, spec
	}
	if spec.WaitUntil.After(p.Now) {
		plan := &ClaimPlan{Action: ClaimWait, Spec: spec, Reason: ReasonDelayed, NextAt: spec.WaitUntil}
		if st.Reason != ReasonDelayed || !st.NextAt.Equal(spec.WaitUntil) { // else: already said so
			plan.Events = []*Event{StepEvent(EventStepDelayed, p.Now, run, st, ActorEngine, ReasonDelayed, map[string]any{
				"due_at": spec.WaitUntil, "wait": spec.WaitUntil.Sub(p.Now).String(),
			})}
		}
		return plan, spec
	}
	if spec.Skip != "" {
		return &ClaimPlan{Action: ClaimSkip, Spec: spec, Reason: spec.Skip,
			Events: []*Event{StepEvent(EventStepSkipped, p.Now, run, st, ActorEngine, spec.Skip, nil)}}, spec
	}
	st.EffectKey, st.Fingerprint = spec.Key, spec.Fingerprint
	return nil, spec
}

// PlanClaim decides what a claim does with candidate c whose spec is spec, given eff, the
// ledger row for spec.Key as it stands after this step tried to take it (INSERT … ON
// CONFLICT DO NOTHING). For ClaimTake it advances c.Step to the claimed state (attempt+1,
// processing, lease owner and expiry) and returns the previous attempt's outcome in
// PreviousOutcome of the claimed step the backend returns.
func PlanClaim(p *StepClaimParams, c *ClaimCandidate, spec EffectSpec, eff *Effect) *ClaimPlan {
	run, st := c.Run, c.Step
	plan := &ClaimPlan{Spec: spec}
	switch {
	case eff.State == EffectCompleted && fingerprintsDiffer(eff.Fingerprint, spec.Fingerprint):
		plan.Action, plan.Reason = ClaimPark, ReasonKeyConflict
		plan.Error = fmt.Sprintf("effect key %q was completed by run %d step %q with a different request", spec.Key, eff.RunID, eff.StepName)
		plan.Events = []*Event{
			StepEvent(EventEffectConflict, p.Now, run, st, ActorEngine, ReasonKeyConflict, map[string]any{
				"completed_by_run": eff.RunID, "completed_by_step": eff.StepName, "completed_at": eff.CompletedAt,
				"stored_fingerprint": eff.Fingerprint, "request_fingerprint": spec.Fingerprint,
			}),
			StepEvent(EventStepNeedsReview, p.Now, run, st, ActorEngine, ReasonKeyConflict, map[string]any{"error": plan.Error}),
		}
	case eff.State == EffectCompleted:
		plan.Action = ClaimReuse
		st.State = StateCompleted
		d := map[string]any{"completed_by_run": eff.RunID, "completed_by_workflow": eff.Workflow, "completed_by_step": eff.StepName, "completed_at": eff.CompletedAt}
		plan.Events = []*Event{
			StepEvent(EventEffectReused, p.Now, run, st, ActorEngine, ReasonEffectCompleted, d),
			StepEvent(EventStepCompleted, p.Now, run, st, ActorEngine, ReasonEffectReused, d),
		}
	case eff.StepID != st.ID:
		plan.Action, plan.Reason = ClaimWait, ReasonEffectInFlight
		wait := p.WaitFor
		if wait <= 0 {
			wait = time.Second
		}
		plan.NextAt = p.Now.Add(wait)
		if st.Reason != ReasonEffectInFlight { // else: already said so
			plan.Events = []*Event{StepEvent(EventEffectWaiting, p.Now, run, st, ActorEngine, ReasonEffectInFlight, map[string]any{
				"held_by_run": eff.RunID, "held_by_step": eff.StepName, "wait": wait.String(),
			})}
		}
	default:
		plan.Action = ClaimTake
		plan.UpdateFingerprint = eff.Fingerprint != spec.Fingerprint
		st.Attempt++
		st.State = StateProcessing
		st.LeaseOwner = p.Owner
		st.LeaseExpiresAt = NormalTime(p.Now.Add(p.LeaseFor))
	}
	return plan
}

// StepClaimedEvent is the event of a claim of attempt st.Attempt of step st by worker,
// under a lease until leaseUntil; prev is the outcome of the attempt before ("" for none).
func StepClaimedEvent(at time.Time, run *Run, st *Step, worker string, leaseUntil time.Time, prev Outcome) *Event {
	d := map[string]any{"worker": worker, "lease_expires_at": leaseUntil}
	if prev != "" {
		d["previous_outcome"] = string(prev)
	}
	return StepEvent(EventStepClaimed, at, run, st, ActorEngine, "", d)
}

// Lost returns the steps of p.StepIDs whose lease a heartbeat did not extend, given the
// ones it did.
func (p StepHeartbeatParams) Lost(held map[int64]bool) []int64 {
	var lost []int64
	for _, id := range p.StepIDs {
		if !held[id] {
			lost = append(lost, id)
		}
	}
	return lost
}

// fingerprintsDiffer reports whether two request fingerprints are both known and differ.
func fingerprintsDiffer(a, b string) bool { return a != "" && b != "" && a != b }

// EffectChange is what a record does to the step's ledger row.
type EffectChange int

// Effect changes.
const (
	// EffectKeep leaves the row as it is (held: a retry, or an outcome that may have
	// happened).
	EffectKeep EffectChange = iota
	// EffectComplete completes the row the step holds with the attempt's output.
	EffectComplete
	// EffectRelease deletes the row the step holds: the effect did not happen.
	EffectRelease
)

// DependentChange is what a record does to the steps that need the recorded one.
type DependentChange int

// Dependent changes.
const (
	DependentsNone DependentChange = iota
	// DependentsRelease decrements their waiting count.
	DependentsRelease
	// DependentsCancel cancels them, transitively (reason dependency_failed).
	DependentsCancel
	// DependentsSkip skips them, transitively (reason dependency_skipped).
	DependentsSkip
)

// RecordPlan is what a record changes besides the step's own row, once the compare-and-set
// on the step applied.
type RecordPlan struct {
	Effect     EffectChange
	Dependents DependentChange
	// Event is appended in the record's transaction. It is nil for a record whose event is
	// derived from the attempt row (DerivableRecord): RecordEvent builds it for a backend
	// that stores it.
	Event *Event
	// Due is set when a step may be due at once because of this record (a dependent
	// released, or a retry due now): stores that notify other processes do so.
	Due bool
}

// Validate checks the arguments of one StepRecord entry.
func (p *StepRecordParams) Validate() error {
	switch p.NextState {
	case StateCompleted, StateRetrying, StateNeedsReview, StateFailed, StateSkipped:
		return nil
	}
	return fmt.Errorf("next state %q is not one of completed, retrying, needs_review, failed, skipped", p.NextState)
}

// RecordOutput is the output a record stores: the attempt's output on completion ("null"
// for none), nil otherwise.
func (p *StepRecordParams) RecordOutput() []byte {
	if p.NextState != StateCompleted {
		return nil
	}
	return p.SuccessOutput()
}

// SuccessOutput is the attempt's output as the ledger keeps it: "null" for none.
func (p *StepRecordParams) SuccessOutput() []byte {
	if p.Output == nil {
		return []byte("null")
	}
	return p.Output
}

// RecordActor is who a record's events name: Actor, or the lease owner.
func (p *StepRecordParams) RecordActor() string {
	if p.Actor == "" {
		return p.Owner
	}
	return p.Actor
}

// RecordNextAt is when the recorded step is due next: NextAt for a retry, Now otherwise.
func (p *StepRecordParams) RecordNextAt() time.Time {
	if p.NextState == StateRetrying {
		return p.NextAt
	}
	return p.Now
}

// PlanRecord decides what a record whose compare-and-set applied changes besides the step
// (st is the step as updated, run its run). errText is the error as the backend stored it.
func PlanRecord(p *StepRecordParams, run *Run, st *Step, errText string) RecordPlan {
	plan := RecordPlan{Effect: p.LedgerChange()}
	switch p.NextState {
	case StateCompleted:
		plan.Dependents, plan.Due = DependentsRelease, true
	case StateRetrying:
		plan.Due = !p.NextAt.After(p.Now)
	case StateSkipped:
		plan.Dependents = DependentsSkip
	case StateFailed:
		plan.Dependents = DependentsCancel
	}
	if !DerivableRecord(p) {
		plan.Event = RecordEvent(p, run, st, errText)
	}
	return plan
}

// LedgerChange is what a record whose compare-and-set applied does to the key its step
// holds (PlanRecord's Effect): a success completes it; a skip, or a failure the
// destination answered (permanent, retryable given up), releases it, since the effect did
// not happen; after an unknown outcome, or a success the engine sends to review, the effect
// may exist: the key stays held, as it does for a retry.
func (p *StepRecordParams) LedgerChange() EffectChange {
	switch p.NextState {
	case StateCompleted:
		return EffectComplete
	case StateSkipped:
		return EffectRelease
	case StateNeedsReview, StateFailed:
		if p.Outcome == OutcomePermanent || p.Outcome == OutcomeRetryable {
			return EffectRelease
		}
	}
	return EffectKeep
}

// RecordEvent is the event a record whose compare-and-set applied appends (st is the step
// as updated, run its run, errText the error as the backend stored it).
func RecordEvent(p *StepRecordParams, run *Run, st *Step, errText string) *Event {
	actor := p.RecordActor()
	d := MergeDetail(map[string]any{"outcome": string(p.Outcome)}, p.Detail)
	if errText != "" {
		d["error"] = errText
	}
	if p.ResponseStatus != 0 {
		d["response_status"] = p.ResponseStatus
	}
	typ := EventStepCompleted
	switch p.NextState {
	case StateRetrying:
		d["next_at"] = p.NextAt
		d["delay"] = p.NextAt.Sub(p.Now).String()
		typ = EventStepRetryPlanned
	case StateSkipped:
		typ = EventStepSkipped
	case StateNeedsReview:
		typ = EventStepNeedsReview
	case StateFailed:
		typ = EventStepFailed
	}
	return StepEvent(typ, p.Now, run, st, actor, p.Reason, d)
}

// LostRecordEvent is the event a record appends when its compare-and-set did not apply (st
// is the step as it stands, owned by someone else or no longer processing).
func LostRecordEvent(p *StepRecordParams, run *Run, st *Step) *Event {
	ev := StepEvent(EventLeaseLost, p.Now, run, st, p.Owner, "", map[string]any{
		"owner": p.Owner, "attempt": p.Attempt, "outcome": string(p.Outcome),
		"step_state": string(st.State), "step_attempt": st.Attempt, "step_owner": st.LeaseOwner,
	})
	ev.Attempt = p.Attempt
	return ev
}

// LostResultKeptEvent is the event a lost record appends when its success completed the
// ledger row the step still held, so the effect is not repeated.
func LostResultKeptEvent(p *StepRecordParams, run *Run, st *Step) *Event {
	ev := StepEvent(EventLeaseLostRecorded, p.Now, run, st, p.Owner, "", map[string]any{"attempt": p.Attempt})
	ev.Attempt = p.Attempt
	return ev
}

// LeaseLostError is the per-entry error StepRecord returns for a record whose
// compare-and-set did not apply.
func LeaseLostError(p *StepRecordParams) error {
	return leaseLost(p.StepID, p.Attempt, p.Owner)
}

// leaseLost is the error of a write by an attempt that no longer holds its step.
func leaseLost(stepID int64, attempt int, owner string) error {
	return fmt.Errorf("step %d attempt %d owner %q: %w", stepID, attempt, owner, ErrLeaseLost)
}

// Validate checks the arguments of StepCheckpoint.
func (p *StepCheckpointParams) Validate() error {
	if !json.Valid(p.Progress) {
		return fmt.Errorf("step checkpoint: step %d: the progress is not JSON", p.StepID)
	}
	return nil
}

// LeaseLost is the error StepCheckpoint returns when the attempt no longer holds its step.
func (p *StepCheckpointParams) LeaseLost() error {
	return leaseLost(p.StepID, p.Attempt, p.Owner)
}

// ReapPlan is what the reaper does with one expired step.
type ReapPlan struct {
	State  State
	NextAt time.Time
	Reason Reason
	// Error is stored as the step's last error and the attempt's error.
	Error string
	// Events are appended once the step's compare-and-set applied.
	Events []*Event
	// Due is set when the step is due again at once.
	Due bool
}

// PlanReap asks decide about an expired step and builds what the reaper writes.
func PlanReap(now time.Time, run *Run, st *Step, decide func(*Step) ReapDecision) (*ReapPlan, error) {
	if st.State == StateCancelled {
		// Cancelled while its attempt ran, and the worker vanished: the attempt ends with an
		// unknown outcome and the step stays cancelled, its key held.
		plan := &ReapPlan{State: StateCancelled, NextAt: now, Reason: ReasonCancelledEffectMayExist,
			Error: fmt.Sprintf("lease held by %q expired at %s without a result; the outcome is unknown", st.LeaseOwner, st.LeaseExpiresAt.Format(time.RFC3339Nano))}
		plan.Events = []*Event{StepEvent(EventLeaseExpired, now, run, st, ActorReaper, ReasonLeaseExpired, map[string]any{
			"owner": st.LeaseOwner, "lease_expired_at": st.LeaseExpiresAt, "step_cancelled": true,
		})}
		return plan, nil
	}
	dec := decide(st)
	if dec.State != StateRetrying && dec.State != StateNeedsReview {
		return nil, fmt.Errorf("reap decision for step %d: state %q is not retrying or needs_review", st.ID, dec.State)
	}
	plan := &ReapPlan{State: dec.State, NextAt: now, Reason: dec.Reason,
		Error: fmt.Sprintf("lease held by %q expired at %s without a result; the outcome is unknown", st.LeaseOwner, st.LeaseExpiresAt.Format(time.RFC3339Nano))}
	if dec.State == StateRetrying && !dec.NextAt.IsZero() {
		plan.NextAt = dec.NextAt
	}
	typ := EventStepRetryPlanned
	d := MergeDetail(map[string]any{"outcome": string(OutcomeUnknown)}, dec.Detail)
	if dec.State == StateNeedsReview {
		typ = EventStepNeedsReview
		d["error"] = plan.Error
	} else {
		d["next_at"] = plan.NextAt
		plan.Due = !plan.NextAt.After(now)
	}
	plan.Events = []*Event{
		StepEvent(EventLeaseExpired, now, run, st, ActorReaper, ReasonLeaseExpired, map[string]any{
			"owner": st.LeaseOwner, "lease_expired_at": st.LeaseExpiresAt,
		}),
		StepEvent(typ, now, run, st, ActorReaper, dec.Reason, d),
	}
	return plan, nil
}

// RunStateEvent is the event a run's re-derived state appends when it changed.
func RunStateEvent(at time.Time, runID int64, workflow, entity, actor string, from, to State) *Event {
	return &Event{At: at, Type: EventRunStateChanged, RunID: runID, Workflow: workflow, Entity: entity,
		Actor: actor, Detail: EncodeDetail(map[string]any{"from": string(from), "to": string(to)})}
}

// RunInsertEvent is the event RunInsert appends: run.created for a new run,
// run.deduplicated for one that existed.
func RunInsertEvent(p *RunInsertParams, run *Run, created bool) *Event {
	if created {
		return RunCreatedEvent(p.Now, run, p.Actor, len(p.Steps))
	}
	return &Event{At: p.Now, Type: EventRunDeduplicated, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity,
		Actor: p.Actor, Reason: ReasonRunKeyExists,
		Detail: EncodeDetail(map[string]any{"run_key": run.RunKey, "same_input": run.InputHash == p.InputHash})}
}

// RunCreatedEvent is the run.created event of run, started by actor with steps steps.
func RunCreatedEvent(at time.Time, run *Run, actor string, steps int) *Event {
	return &Event{At: at, Type: EventRunCreated, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity,
		Actor: actor, Detail: EncodeDetail(map[string]any{"run_key": run.RunKey, "steps": steps})}
}
