package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// Reader reads what an operator is shown: runs with their steps and attempts, the review
// queue, the audit trail and effect keys. A *Client is a Reader that masks every answer
// with its redaction policy (Config.Redact and each workflow's Redact): secrets wherever
// they appear, and the values of personal-data fields in inputs, outputs, errors,
// responses, notes and event details. The reader Unmasked returns shows them as they are
// stored, and appends a data.unmasked audit event for every read before it answers.
//
// Run keys, entities and effect keys are identifiers and are never masked.
type Reader interface {
	// RunList returns the runs f selects, newest first, their inputs masked.
	RunList(ctx context.Context, f RunFilter) ([]*Run, error)
	// RunGet returns a run with its steps, attempts (those in flight included) and input
	// revisions; an error matching ErrNotFound for an unknown run.
	RunGet(ctx context.Context, id int64) (*RunDetail, error)
	// ReviewList returns the steps waiting in needs_review that f selects, in step ID
	// order (roughly oldest first).
	ReviewList(ctx context.Context, f ReviewFilter) ([]*ReviewItem, error)
	// ReviewGet returns the step of a run as a review item, whatever its state; a
	// *ReviewError matching ErrNotFound for an unknown run or step.
	ReviewGet(ctx context.Context, runID int64, step string) (*ReviewItem, error)
	// ReviewDetail returns a review item with its run, its attempts and its audit events;
	// errors as ReviewGet.
	ReviewDetail(ctx context.Context, runID int64, step string) (*ReviewDetail, error)
	// Audit returns the audit events q selects, in the order they were committed (newest
	// first with q.Newest), each explained.
	Audit(ctx context.Context, q AuditQuery) ([]*AuditEntry, error)
	// Key reports on one effect key; an unknown key is free and has no events.
	Key(ctx context.Context, key string) (*KeyReport, error)
}

var (
	_ Reader = (*Client)(nil)
	_ Reader = reader{}
)

// RunFilter selects runs for RunList. Zero fields do not filter.
type RunFilter struct {
	Workflow string
	State    State
	Entity   string
	RunKey   string
	// CreatedSince and CreatedUntil keep the runs created at or after CreatedSince and
	// before CreatedUntil.
	CreatedSince time.Time
	CreatedUntil time.Time
	// BeforeID pages backwards: only runs with a smaller ID.
	BeforeID int64
	// Limit caps the runs returned (default 100).
	Limit int
}

// RunDetail is a run as its page shows it.
type RunDetail struct {
	// Run is the run, its input masked.
	Run *Run
	// Steps are the run's steps in the order they were created, the workflow's order
	// (DependencyOrder lists them in an order they can run in).
	Steps []*StepInfo
	// Attempts are the run's attempts in the order they started; one whose EndedAt is
	// zero is in flight.
	Attempts []*AttemptInfo
	// Revisions are the corrections of the run's input, oldest first.
	Revisions []*Revision
	// WaitingUntil is, for a run that only waits for a delayed step, when it goes on; zero
	// otherwise.
	WaitingUntil time.Time

	ordered []*StepInfo
}

// DependencyOrder returns the run's steps so that each comes after the steps it needs,
// keeping the workflow's order among steps that are ready together.
func (d *RunDetail) DependencyOrder() []*StepInfo {
	if d.ordered == nil {
		return d.Steps
	}
	return d.ordered
}

// StepInfo is one step of a run as the client shows it: its output and last error masked.
type StepInfo struct {
	ID       int64
	RunID    int64
	Workflow string
	Name     string
	// Needs names the steps of the run that must complete first; Waiting counts those
	// that have not.
	Needs   []string
	Waiting int
	State   State
	// EffectKey is the key the step acts under ("" before its first claim).
	EffectKey string
	// Attempt is the number of the latest attempt; AttemptBase what it was at the last
	// manual retry or replay (the retry policy counts only the attempts after it).
	Attempt     int
	AttemptBase int
	// NextAt is when a pending or retrying step is due.
	NextAt time.Time
	// LeaseOwner and LeaseExpiresAt name the worker running the step, while one does.
	LeaseOwner     string
	LeaseExpiresAt time.Time
	// LastOutcome is the outcome of the latest finished attempt.
	LastOutcome Outcome
	Output      json.RawMessage
	LastError   string
	// Reason is the code of the latest decision about the step.
	Reason    Reason
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Due is when the step waits for a time — a retry's backoff, a delay or not_before — the
// time it becomes due; zero for any other step.
func (s *StepInfo) Due() time.Time {
	if s.State == StateRetrying || (s.State == StatePending && s.Reason == store.ReasonDelayed) {
		return s.NextAt
	}
	return time.Time{}
}

// AttemptInfo is one attempt of a step: its error and the destination's answer masked.
type AttemptInfo struct {
	ID     int64
	RunID  int64
	StepID int64
	Step   string
	// Number counts the step's attempts from 1.
	Number    int
	EffectKey string
	Worker    string
	StartedAt time.Time
	// EndedAt and Outcome are zero while the attempt is in flight.
	EndedAt         time.Time
	Outcome         Outcome
	Error           string
	ResponseStatus  int
	ResponseExcerpt string
	// Request is what the attempt sent, as its step recorded it (masked); nil when it
	// recorded nothing, and while the attempt is in flight.
	Request *Request
}

// InFlight reports whether the attempt has not ended yet.
func (a *AttemptInfo) InFlight() bool { return a.EndedAt.IsZero() }

// Revision is one correction of a run's input, kept by a replay: the input before and
// after, the merge patch between them, who made it and why, masked.
type Revision struct {
	// Revision numbers the run's corrections from 1.
	Revision     int
	InputBefore  json.RawMessage
	InputAfter   json.RawMessage
	Diff         json.RawMessage
	EntityBefore string
	EntityAfter  string
	Actor        string
	Note         string
	At           time.Time
	// Changed lists the fields the correction changed (paths of object names), those whose
	// values are masked included: a masked field's change shows as changed, its values
	// not.
	Changed []string
}

// ReviewDetail is a review item's page: the item, its run, and the attempts and audit
// events of its step.
type ReviewDetail struct {
	Item     *ReviewItem
	Run      *Run
	Attempts []*AttemptInfo
	Events   []*AuditEntry
}

// Outcome classifies how an attempt ended: success, retryable, permanent or unknown.
type Outcome = store.Outcome

// Reason is a decision's code: why a step waits in review, was skipped or retried, and why
// an audit event was appended (permanent_error, condition_false, manual_retry, …). A step
// kind gives its own to SkipStep or StepError.Reason.
type Reason = store.Reason

// EventType names what an audit event records: run.created, step.needs_review, ….
type EventType = store.EventType

// EffectState is the state of a ledger row: in_flight or completed.
type EffectState = store.EffectState

// WorkflowPause is a paused workflow: since when, by whom and why.
type WorkflowPause = store.WorkflowPause

// Stats are the counts of an overview, taken from one snapshot of the database: runs by
// workflow and state, steps by workflow, step and state, review items by workflow and
// reason, and the steps due that no worker has claimed yet. Their labels are names,
// states and reason codes only.
type Stats = store.Stats

// RunCount, StepCount, ReviewCount and DueCount are the counts of Stats.
type (
	RunCount    = store.RunCount
	StepCount   = store.StepCount
	ReviewCount = store.ReviewCount
	DueCount    = store.DueCount
)

// States lists every state of runs and steps, in the order of a run's life.
func States() []State { return slices.Clone(store.States) }

// Reasons of the review queue: why a step waits in needs_review.
const (
	ReasonPermanentError     = store.ReasonPermanentError
	ReasonAttemptsExhausted  = store.ReasonAttemptsExhausted
	ReasonKeyConflict        = store.ReasonKeyConflict
	ReasonOutcomeUnknown     = store.ReasonOutcomeUnknown
	ReasonInvalidKey         = store.ReasonInvalidKey
	ReasonDestinationBlocked = store.ReasonDestinationBlocked
	ReasonTransitionInvalid  = store.ReasonTransitionInvalid
	ReasonOutputInvalid      = store.ReasonOutputInvalid
	ReasonRetryAfterTooLong  = store.ReasonRetryAfterTooLong
)

// ReviewReasons lists the reasons of the review queue.
func ReviewReasons() []Reason {
	return []Reason{ReasonPermanentError, ReasonAttemptsExhausted, ReasonKeyConflict, ReasonOutcomeUnknown,
		ReasonInvalidKey, ReasonDestinationBlocked, ReasonTransitionInvalid, ReasonOutputInvalid, ReasonRetryAfterTooLong}
}

// Types of audit events an overview counts, and those an operator's front-end appends
// (see RecordOperatorEvent).
const (
	EventRunCreated       = store.EventRunCreated
	EventStepCompleted    = store.EventStepCompleted
	EventStepRetryPlanned = store.EventStepRetryPlanned
	EventStepNeedsReview  = store.EventStepNeedsReview
	EventStepFailed       = store.EventStepFailed
	EventDataUnmasked     = store.EventDataUnmasked
	EventConsoleSignedIn  = store.EventConsoleSignedIn
	EventConsoleSignedOut = store.EventConsoleSignedOut
)

// ErrUnavailable: the database cannot be reached right now (a restart, a lost network).
// Nothing was acknowledged; the same request may be tried again later.
var ErrUnavailable = store.ErrUnavailable

// reader reads through a client: masked, or unmasked for actor once the read is audited.
type reader struct {
	c *Client
	// actor, when set, reads unmasked, each read recorded as data.unmasked by actor.
	actor string
	// unmasked is set by Unmasked even for an empty actor, which every read refuses.
	unmasked bool
}

// masked returns the client's masked reader.
func (c *Client) masked() reader { return reader{c: c} }

// Unmasked returns a Reader that shows runs, review items, audit events and keys as they
// are stored, secrets and personal data included. Every read first appends a
// data.unmasked audit event naming actor and what was read (the run, when there is one),
// and fails, answering nothing, when that event cannot be stored. actor names the person
// (cli:ana, token:ops); an empty actor is refused.
func (c *Client) Unmasked(actor string) Reader { return reader{c: c, actor: actor, unmasked: true} }

// masker returns the masker of what is shown about run, whose steps are steps: the
// client's secrets, and the values the run's input and its steps' outputs hold at the
// personal-data fields of its workflow. It is nil (masking nothing) for an unmasked read.
func (r reader) masker(run *store.Run, steps []*store.Step) *redact.Masker {
	if r.unmasked {
		return nil
	}
	return r.c.runMasker(run, steps)
}

// runMasker returns the masker for what is shown about run, whose steps are steps.
func (c *Client) runMasker(run *store.Run, steps []*store.Step) *redact.Masker {
	docs := make([][]byte, 0, len(steps)+1)
	docs = append(docs, run.Input)
	for _, st := range steps {
		if len(st.Output) > 0 {
			docs = append(docs, st.Output)
		}
	}
	return c.redact.ForRun(run.Workflow, docs...)
}

// record appends the data.unmasked event of an unmasked read of what, about runID of
// workflow (0 and "" for none).
func (r reader) record(ctx context.Context, runID int64, workflow, what string) error {
	if !r.unmasked {
		return nil
	}
	if r.actor == "" {
		return errors.New("onceflow: an unmasked read needs the actor who reads, for the audit trail")
	}
	err := r.c.RecordOperatorEvent(ctx, OperatorEvent{Type: EventDataUnmasked, Actor: r.actor, RunID: runID, Workflow: workflow,
		Reason: store.ReasonUnmasked, Detail: map[string]any{"read": what}})
	if err != nil {
		return fmt.Errorf("onceflow: unmasked read of %s: %w", what, err)
	}
	return nil
}

// maskers builds at most one masker per run for an answer about many runs.
type maskers struct {
	r   reader
	ctx context.Context
	// runs holds the masker of each run by ID; workflows that of runs not known, by
	// workflow.
	runs      map[int64]*redact.Masker
	workflows map[string]*redact.Masker
}

func (r reader) maskers(ctx context.Context) *maskers {
	return &maskers{r: r, ctx: ctx, runs: map[int64]*redact.Masker{}, workflows: map[string]*redact.Masker{}}
}

// of returns the masker for what is shown about run runID of workflow: the run's own when
// it can be read; without a run, or when it cannot be read, the secrets and the
// workflow's fields.
func (m *maskers) of(runID int64, workflow string) *redact.Masker {
	if m.r.unmasked {
		return nil
	}
	if runID <= 0 {
		mk, ok := m.workflows[workflow]
		if !ok {
			mk = m.r.c.redact.ForRun(workflow)
			m.workflows[workflow] = mk
		}
		return mk
	}
	if mk, ok := m.runs[runID]; ok {
		return mk
	}
	var mk *redact.Masker
	switch run, err := m.r.c.store.RunGetByID(m.ctx, runID); {
	case err != nil: // purged, or unreadable: the secrets and the fields all the same
		mk = m.r.c.redact.ForRun(workflow)
	default:
		if steps, err := m.r.c.store.StepListByRun(m.ctx, runID); err == nil {
			mk = m.r.c.runMasker(run, steps)
		} else {
			mk = m.r.c.redact.ForRun(run.Workflow, run.Input)
		}
	}
	m.runs[runID] = mk
	return mk
}

// runView returns the caller's view of r, its input masked by m.
func runView(r *store.Run, m *redact.Masker) *Run {
	v := runFrom(r, false)
	if len(v.Input) > 0 {
		v.Input = m.JSON(v.Input)
	}
	return v
}

func stepView(st *store.Step, m *redact.Masker) *StepInfo {
	v := &StepInfo{ID: st.ID, RunID: st.RunID, Workflow: st.Workflow, Name: st.Name, Needs: st.Needs, Waiting: st.Waiting,
		State: st.State, EffectKey: st.EffectKey, Attempt: st.Attempt, AttemptBase: st.AttemptBase, NextAt: st.NextAt,
		LeaseOwner: st.LeaseOwner, LeaseExpiresAt: st.LeaseExpiresAt, LastOutcome: st.LastOutcome, Output: st.Output,
		LastError: m.Text(st.LastError), Reason: st.Reason, CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt}
	if len(v.Output) > 0 {
		v.Output = m.JSON(v.Output)
	}
	return v
}

func attemptView(a *store.Attempt, m *redact.Masker) *AttemptInfo {
	return &AttemptInfo{ID: a.ID, RunID: a.RunID, StepID: a.StepID, Step: a.StepName, Number: a.Number, EffectKey: a.EffectKey,
		Worker: a.Worker, StartedAt: a.StartedAt, EndedAt: a.EndedAt, Outcome: a.Outcome, Error: m.Text(a.Error),
		ResponseStatus: a.ResponseStatus, ResponseExcerpt: m.Excerpt([]byte(a.ResponseExcerpt), 0), Request: requestView(a.Request, m)}
}

func revisionView(rv *store.RunRevision, m *redact.Masker) *Revision {
	v := &Revision{Revision: rv.Revision, InputBefore: rv.InputBefore, InputAfter: rv.InputAfter, Diff: rv.Diff,
		EntityBefore: rv.EntityBefore, EntityAfter: rv.EntityAfter, Actor: rv.Actor, Note: m.Text(rv.Note), At: rv.At,
		Changed: changedFields(rv.InputBefore, rv.InputAfter)}
	for _, d := range []*json.RawMessage{&v.InputBefore, &v.InputAfter, &v.Diff} {
		if len(*d) > 0 {
			*d = m.JSON(*d)
		}
	}
	return v
}

// auditEntry explains e and masks it with m.
func auditEntry(e *store.Event, m *redact.Masker) *AuditEntry {
	out := &AuditEntry{ID: e.ID, At: e.At, Type: e.Type, RunID: e.RunID, StepID: e.StepID, Workflow: e.Workflow, Entity: e.Entity,
		StepName: e.StepName, EffectKey: e.EffectKey, Attempt: e.Attempt, Actor: e.Actor, Reason: e.Reason, Detail: e.Detail,
		Why: m.Text(Explain(e))}
	if len(out.Detail) > 0 {
		out.Detail = m.JSON(out.Detail)
	}
	return out
}

// RunList returns the runs f selects, newest first, each input masked with the secrets
// and the values it holds at its workflow's personal-data fields.
func (c *Client) RunList(ctx context.Context, f RunFilter) ([]*Run, error) {
	return c.masked().RunList(ctx, f)
}

func (r reader) RunList(ctx context.Context, f RunFilter) ([]*Run, error) {
	if err := r.record(ctx, 0, f.Workflow, "runs"); err != nil {
		return nil, err
	}
	list, err := r.c.store.RunList(ctx, store.RunListParams{Workflow: f.Workflow, State: f.State, Entity: f.Entity, RunKey: f.RunKey,
		CreatedSince: f.CreatedSince, CreatedUntil: f.CreatedUntil, BeforeID: f.BeforeID, Limit: f.Limit})
	if err != nil {
		return nil, fmt.Errorf("onceflow: list runs: %w", err)
	}
	out := make([]*Run, len(list))
	for i, run := range list {
		var m *redact.Masker
		if !r.unmasked {
			m = r.c.redact.ForRun(run.Workflow, run.Input)
		}
		out[i] = runView(run, m)
	}
	return out, nil
}

// RunGet returns a run with its steps, attempts and input revisions, masked: the input,
// the steps' outputs and last errors, the attempts' errors and response excerpts, the
// revisions' inputs, diffs and notes. An unknown run is an error matching ErrNotFound.
func (c *Client) RunGet(ctx context.Context, id int64) (*RunDetail, error) {
	return c.masked().RunGet(ctx, id)
}

func (r reader) RunGet(ctx context.Context, id int64) (*RunDetail, error) {
	run, err := r.c.store.RunGetByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("onceflow: run %d: %w", id, err)
	}
	if err := r.record(ctx, run.ID, run.Workflow, fmt.Sprintf("run %d", run.ID)); err != nil {
		return nil, err
	}
	steps, err := r.c.store.StepListByRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("onceflow: steps of run %d: %w", id, err)
	}
	attempts, err := r.c.store.AttemptListByRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("onceflow: attempts of run %d: %w", id, err)
	}
	revs, err := r.c.store.RunRevisionList(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("onceflow: revisions of run %d: %w", id, err)
	}
	m := r.masker(run, steps)
	d := &RunDetail{Run: runView(run, m), Steps: make([]*StepInfo, 0, len(steps)), Attempts: make([]*AttemptInfo, 0, len(attempts)),
		WaitingUntil: store.WaitingUntil(steps)}
	byID := make(map[int64]*StepInfo, len(steps))
	for _, st := range steps {
		v := stepView(st, m)
		byID[st.ID] = v
		d.Steps = append(d.Steps, v)
	}
	for _, st := range store.DependencyOrder(steps) {
		d.ordered = append(d.ordered, byID[st.ID])
	}
	for _, a := range attempts {
		d.Attempts = append(d.Attempts, attemptView(a, m))
	}
	for _, rv := range revs {
		d.Revisions = append(d.Revisions, revisionView(rv, m))
	}
	return d, nil
}

// ReviewDetail returns a review item (whatever its step's state) with its run, and the
// attempts and audit events of its step, all masked as RunGet masks; a *ReviewError
// matching ErrNotFound for an unknown run or step.
func (c *Client) ReviewDetail(ctx context.Context, runID int64, step string) (*ReviewDetail, error) {
	return c.masked().ReviewDetail(ctx, runID, step)
}

func (r reader) ReviewDetail(ctx context.Context, runID int64, step string) (*ReviewDetail, error) {
	it, err := r.c.store.ReviewGetByStep(ctx, runID, step)
	if err != nil {
		return nil, reviewError("show", runID, step, err)
	}
	if err := r.record(ctx, runID, it.Workflow, fmt.Sprintf("review item of run %d step %s", runID, step)); err != nil {
		return nil, err
	}
	run, err := r.c.store.RunGetByID(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("onceflow: run %d: %w", runID, err)
	}
	steps, err := r.c.store.StepListByRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("onceflow: steps of run %d: %w", runID, err)
	}
	attempts, err := r.c.store.AttemptListByRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("onceflow: attempts of run %d: %w", runID, err)
	}
	evs, err := r.c.store.EventList(ctx, store.EventListParams{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("onceflow: events of run %d: %w", runID, err)
	}
	m := r.masker(run, steps)
	d := &ReviewDetail{Item: r.c.reviewItem(it, m), Run: runView(run, m), Attempts: []*AttemptInfo{}, Events: []*AuditEntry{}}
	for _, a := range attempts {
		if a.StepName == step {
			d.Attempts = append(d.Attempts, attemptView(a, m))
		}
	}
	for _, e := range evs {
		if e.StepName == step {
			d.Events = append(d.Events, auditEntry(e, m))
		}
	}
	return d, nil
}

// Stats counts runs, steps, review items and the steps due now (at the engine's time),
// for an overview.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	st, err := c.store.StatsGet(ctx, store.StatsGetParams{Now: c.now(ctx)})
	if err != nil {
		return nil, fmt.Errorf("onceflow: stats: %w", err)
	}
	return st, nil
}

// ActivityBucket counts what one slice of time of an Activity holds: runs started, steps
// completed, retries scheduled, steps parked for review and steps failed.
type ActivityBucket = store.ActivityBucket

// ActivityQuery asks Client.Activity for the activity from Since on, per slice of Bucket
// (required), with the latest Failures failures (0: none).
type ActivityQuery struct {
	Since    time.Time
	Bucket   time.Duration
	Failures int
}

// Activity is what the audit trail records from a time on.
type Activity struct {
	// Buckets are the slices with something in them, in order; ActivityBucket.Slice
	// numbers them from ActivityQuery.Since.
	Buckets []ActivityBucket
	// Failures are the latest steps parked for review or failed (events step.needs_review
	// and step.failed), newest first, explained and masked as Audit masks them.
	Failures []*AuditEntry
}

// Activity counts the runs started (run.created), steps completed (step.completed),
// retries scheduled, steps parked and steps failed from q.Since on, per slice of
// q.Bucket, with queries that count — as many events as there are, never a capped read
// of the trail — and returns the latest q.Failures failures, newest first.
func (c *Client) Activity(ctx context.Context, q ActivityQuery) (*Activity, error) {
	a, err := c.store.StatsActivity(ctx, store.StatsActivityParams{Since: q.Since, Bucket: q.Bucket, Failures: q.Failures})
	if err != nil {
		return nil, fmt.Errorf("onceflow: activity: %w", err)
	}
	out := &Activity{Buckets: a.Buckets}
	if len(a.Failures) > 0 {
		ms := c.masked().maskers(ctx)
		for _, e := range a.Failures {
			out.Failures = append(out.Failures, auditEntry(e, ms.of(e.RunID, e.Workflow)))
		}
	}
	return out, nil
}

// RunStats is Stats without the steps by state (Stats.Steps is empty): the runs by
// workflow and state, the review queue by reason and the due steps, which a store counts
// without reading every step.
func (c *Client) RunStats(ctx context.Context) (*Stats, error) {
	st, err := c.store.StatsGet(ctx, store.StatsGetParams{Now: c.now(ctx), WithoutSteps: true})
	if err != nil {
		return nil, fmt.Errorf("onceflow: stats: %w", err)
	}
	return st, nil
}

// Ping reports whether the database answers a query (for a readiness check): nil, or
// the error of a query that reads one run.
func (c *Client) Ping(ctx context.Context) error {
	if _, err := c.store.RunList(ctx, store.RunListParams{Limit: 1}); err != nil {
		return fmt.Errorf("onceflow: ping the database: %w", err)
	}
	return nil
}

// OperatorEvent is an audit event a front-end records about a person: a sign-in to or
// sign-out of a console, or a read of unmasked data.
type OperatorEvent struct {
	// Type is EventConsoleSignedIn, EventConsoleSignedOut or EventDataUnmasked.
	Type EventType
	// Actor names the person (token:NAME, cli:ana); required.
	Actor string
	// RunID and Workflow name the run the event is about, if any.
	RunID    int64
	Workflow string
	Reason   Reason
	// Detail holds the event's facts (a sign-in's scope and expiry, what was read); it is
	// masked with the client's secrets.
	Detail map[string]any
	// At is when it happened (default: the engine's time).
	At time.Time
}

// RecordOperatorEvent appends e to the audit trail, in a transaction of its own; it
// returns once the event is stored. Only the types of OperatorEvent are accepted: every
// other event is the engine's to write.
func (c *Client) RecordOperatorEvent(ctx context.Context, e OperatorEvent) error {
	switch e.Type {
	case EventConsoleSignedIn, EventConsoleSignedOut, EventDataUnmasked:
	default:
		return fmt.Errorf("onceflow: %q is not an operator event (%s, %s or %s)", e.Type, EventConsoleSignedIn, EventConsoleSignedOut, EventDataUnmasked)
	}
	return c.appendOperatorEvent(ctx, e)
}

// appendOperatorEvent appends e, of any type a person's action records, in a transaction
// of its own.
func (c *Client) appendOperatorEvent(ctx context.Context, e OperatorEvent) error {
	if e.Actor == "" {
		return fmt.Errorf("onceflow: record %s: the actor is required", e.Type)
	}
	ap, ok := c.store.(store.EventAppender)
	if !ok {
		return fmt.Errorf("onceflow: record %s: the store cannot append audit events", e.Type)
	}
	at := e.At
	if at.IsZero() {
		at = c.now(ctx)
	}
	ev := &store.Event{At: at.UTC(), Type: e.Type, RunID: e.RunID, Workflow: e.Workflow, Actor: e.Actor, Reason: e.Reason,
		Detail: store.EncodeDetail(e.Detail)}
	if m := c.redact.Secrets(); !m.Empty() {
		ev.Detail = m.JSON(ev.Detail)
	}
	if err := ap.EventAppend(ctx, ev); err != nil {
		return fmt.Errorf("onceflow: record %s: %w", e.Type, err)
	}
	return nil
}

// MaskSecrets returns text with the client's secrets masked, for text about no particular
// run: error pages, problem documents, log lines.
func (c *Client) MaskSecrets(text string) string { return c.redact.Secrets().Text(text) }

// LogHandler returns h masking the client's secrets in every record's message and
// attributes, for a front-end's logs.
func (c *Client) LogHandler(h slog.Handler) slog.Handler {
	return redact.Handler(h, c.redact.Secrets())
}
