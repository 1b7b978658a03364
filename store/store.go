// Package store is the contract between the onceflow engine and the databases it runs on.
//
// The engine decides policy (which error is retryable, how long to back off, when to give
// up); a Store applies those decisions atomically and decides every race with database
// constraints and compare-and-set updates, never with a read followed by a write in Go.
// Each backend lives in its own package (store/sqlite, store/postgres), owns its SQL and
// migrations, and must pass the conformance suite in store/storetest. Optional interfaces
// (Notifier, TxRunInserter, ClockSource) add what only some databases can do.
//
// # Time
//
// The methods of Store never read a clock of their own to decide anything: every time they
// compare or write (a claim's Now, a lease's expiry, a NextAt, a leadership's TTL, a schedule's
// cursor) is a parameter the engine passes. Times written by one process are compared with
// times another passes, so on a database many machines share the engine takes every such
// time from the database's clock (ClockSource), measured and extrapolated, never from the
// machine's own.
//
// # Transactions and the audit trail
//
// Every method that changes state does so in one transaction together with the audit events
// that describe the change. A method either commits all of it or none of it. The events a
// method appends are listed on its documentation.
//
// Every event takes the next ID of one audit sequence, in the order its transaction appends
// it. A backend may store an event, or keep it in the row that holds its facts and build it
// again when the trail is read (see NormalTime and the sources of derive.go): a run's
// creation in the run, a claim in the step while the attempt is in flight and in the
// attempt once it ended, a completion in the attempt, and the run state changes right after
// them. EventList and EventScan merge both by ID; what they show never changes except by
// appending (the rows events are derived from are written once), and a purge counts both.
//
// # Idempotency
//
// RunInsert is idempotent per (workflow, run key). StepClaim consults the effect ledger so
// that an effect key completed by any step of any run is never handed out for execution
// again. StepRecord and StepHeartbeat are compare-and-set on (step, lease owner, attempt):
// a worker that lost its lease cannot overwrite the step's state.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// State is the state of a step or of a run.
type State string

// States of steps and runs. Failed is terminal and needs nobody; NeedsReview loses nothing
// and waits for a person.
const (
	StatePending     State = "pending"
	StateProcessing  State = "processing"
	StateRetrying    State = "retrying"
	StateCompleted   State = "completed"
	StateFailed      State = "failed"
	StateNeedsReview State = "needs_review"
	StateSkipped     State = "skipped"
	StateCancelled   State = "cancelled"
)

// States lists every state in display order.
var States = []State{StatePending, StateProcessing, StateRetrying, StateCompleted, StateFailed, StateNeedsReview, StateSkipped, StateCancelled}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Outcome classifies how one attempt ended.
type Outcome string

// Attempt outcomes.
const (
	// OutcomeSuccess: the effect happened and its result is known.
	OutcomeSuccess Outcome = "success"
	// OutcomeRetryable: the effect did not happen; trying again may succeed.
	OutcomeRetryable Outcome = "retryable"
	// OutcomePermanent: the effect did not happen and trying again will not help.
	OutcomePermanent Outcome = "permanent"
	// OutcomeUnknown: the effect may or may not have happened (a lost lease, a connection
	// dropped after the request was sent, a worker stopped mid-step).
	OutcomeUnknown Outcome = "unknown"
)

// EffectState is the state of a ledger row.
type EffectState string

// Effect states. A key that has no ledger row is free.
const (
	// EffectInFlight: a step holds the key and is acting, retrying, or waiting for a
	// person after an unknown outcome. Other steps with the same key wait.
	EffectInFlight EffectState = "in_flight"
	// EffectCompleted: the effect happened; its result is stored and reused.
	EffectCompleted EffectState = "completed"
)

// Reason is the code of a decision: why a step is parked, skipped, waiting or retried
// (Step.Reason, StepRecordParams.Reason), and why an audit event was appended
// (Event.Reason). Codes are short snake_case words an operator can filter by; the
// constants below are the engine's, and step kinds and triggers declare their own.
type Reason string

// Review and decision reason codes shared by the engine and the backends.
const (
	ReasonPermanentError    Reason = "permanent_error"
	ReasonAttemptsExhausted Reason = "attempts_exhausted"
	ReasonKeyConflict       Reason = "key_conflict"
	ReasonOutcomeUnknown    Reason = "outcome_unknown"
	ReasonInvalidKey        Reason = "invalid_key"
	ReasonEffectInFlight    Reason = "effect_in_flight"
	ReasonLeaseExpired      Reason = "lease_expired"
	ReasonRetryableError    Reason = "retryable_error"
	ReasonDependencyFailed  Reason = "dependency_failed"
	ReasonDependencySkipped Reason = "dependency_skipped"
	ReasonWorkerShutdown    Reason = "worker_shutdown"
	// ReasonEffectReused: the step completed without acting, its key completed before
	// (the step and its step.completed event); the effect.reused event says
	// ReasonEffectCompleted.
	ReasonEffectReused    Reason = "effect_reused"
	ReasonEffectCompleted Reason = "effect_completed"
	// ReasonRunKeyExists: a start found its run key started already (run.deduplicated).
	ReasonRunKeyExists Reason = "run_key_exists"
)

// Reasons the engine decides before or after a step acts: why it is skipped, or why it
// cannot be prepared and waits for review.
const (
	// ReasonConditionFalse: the step's condition is false; it is skipped.
	ReasonConditionFalse Reason = "condition_false"
	// ReasonNothingToDo: the step found nothing to do (SkipStep without a reason).
	ReasonNothingToDo Reason = "nothing_to_do"
	// ReasonConditionError: the step's condition could not be evaluated.
	ReasonConditionError Reason = "condition_error"
	// ReasonNotBeforeInvalid: the step's not_before time could not be made.
	ReasonNotBeforeInvalid Reason = "not_before_invalid"
	// ReasonStepNotDefined: the worker's definition of the workflow has no such step.
	ReasonStepNotDefined Reason = "step_not_defined"
	// ReasonFingerprintFailed: the step's request fingerprint could not be made.
	ReasonFingerprintFailed Reason = "fingerprint_failed"
)

// EventType names what an audit event records (Event.Type): a dotted noun.verb such as
// run.created or step.needs_review. The constants below are every type the engine and the
// backends append; a front-end appends its own through EventAppender.
type EventType string

// Event types appended to the audit trail.
const (
	EventRunCreated        EventType = "run.created"
	EventRunDeduplicated   EventType = "run.deduplicated"
	EventRunStateChanged   EventType = "run.state_changed"
	EventStepClaimed       EventType = "step.claimed"
	EventStepCompleted     EventType = "step.completed"
	EventStepRetryPlanned  EventType = "step.retry_scheduled"
	EventStepNeedsReview   EventType = "step.needs_review"
	EventStepFailed        EventType = "step.failed"
	EventStepCancelled     EventType = "step.cancelled"
	EventStepSkipped       EventType = "step.skipped"
	EventEffectReused      EventType = "effect.reused"
	EventEffectWaiting     EventType = "effect.waiting"
	EventEffectConflict    EventType = "effect.key_conflict"
	EventLeaseExpired      EventType = "lease.expired"
	EventLeaseLost         EventType = "lease.lost"
	EventLeaseLostRecorded EventType = "lease.lost_result_kept"
)

// Actor names used for events the system itself causes.
const (
	ActorEngine = "engine"
	ActorReaper = "reaper"
)

// Sentinel errors. Backends wrap them; callers test with errors.Is.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the step is no longer processing under this owner and attempt; the
	// write was not applied to the step (see StepRecord for what is kept).
	ErrLeaseLost = errors.New("lease lost")
	// ErrUnavailable: the database cannot be reached, or refuses the connection — a
	// server restarting or shutting down, a connection refused or lost, a database file
	// that cannot be opened, another process holding the file's lock past the busy
	// timeout. Backends wrap it, with the cause (see Unavailable), once their own retries
	// are spent (store/postgres retries for Options.RetryFor, 5 s by default; store/sqlite
	// waits its BusyTimeout). It is the database's condition, not the request's: what the
	// call was to do was not done — except that a write whose COMMIT was sent but never
	// answered may have committed, as after any failure of a COMMIT, which a caller
	// repeating an idempotent write (a start with the same run key) finds out. An API
	// answers it 503 with Retry-After.
	ErrUnavailable = errors.New("database unavailable")
)

// Unavailable returns err marked as ErrUnavailable: errors.Is(…, ErrUnavailable) holds,
// and err stays in the chain for errors.Is and errors.As. nil stays nil.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{err: err}
}

// unavailableError is an error marked as ErrUnavailable.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return "database unavailable: " + e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// Run is the row of one execution of a workflow for one business event, as a backend
// stores it. The workflow it runs is defined elsewhere (onceflow.Workflow, built from a
// file or in Go); what callers of the client read is onceflow.Run, masked.
type Run struct {
	ID        int64
	Workflow  string
	RunKey    string
	Entity    string
	Input     json.RawMessage
	InputHash string
	State     State
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Step is the row of one step of a run, as a backend stores it: its state, key, attempts
// and output. What the step does is its definition, onceflow.Step of the run's workflow,
// matched by Workflow and Name; what callers of the client read is onceflow.StepInfo,
// masked.
type Step struct {
	ID       int64
	RunID    int64
	Workflow string
	Name     string
	// Needs names the steps of the same run that must complete first.
	Needs []string
	// Waiting counts the entries of Needs that have not completed yet.
	Waiting     int
	State       State
	EffectKey   string
	Fingerprint string
	// Attempt is the number of the latest attempt (0 before the first claim).
	Attempt int
	// AttemptBase is Attempt as it was at the last manual retry or replay (0 if none):
	// the retry policy counts only the attempts after it.
	AttemptBase    int
	NextAt         time.Time
	LeaseOwner     string
	LeaseExpiresAt time.Time
	// LastOutcome is the outcome of the latest finished attempt ("" before any).
	LastOutcome Outcome
	Output      json.RawMessage
	LastError   string
	// Reason is the code of the latest decision about the step (review reason, retry
	// cause, why it waits).
	Reason    Reason
	CreatedAt time.Time
	UpdatedAt time.Time
	// Progress is the latest checkpoint an attempt of the step saved (StepCheckpointer),
	// kept for the attempts after it; nil when none did.
	Progress json.RawMessage
}

// Effect is a row of the global effect ledger. A backend may keep it in the row of the step
// that holds the key; a key whose step is purged keeps its row, completed or in flight, as
// long as its RetainUntil says.
type Effect struct {
	Key         string
	State       EffectState
	Fingerprint string
	Result      json.RawMessage
	// RunID, StepID, Workflow and StepName name the step that holds or completed the key.
	RunID       int64
	StepID      int64
	Workflow    string
	StepName    string
	CreatedAt   time.Time
	CompletedAt time.Time
	// RetainUntil is when a completed row may be purged (see RetentionStore); zero keeps
	// it forever.
	RetainUntil time.Time
}

// Attempt is one try of a step.
type Attempt struct {
	ID              int64
	RunID           int64
	StepID          int64
	StepName        string
	Number          int
	EffectKey       string
	Worker          string
	StartedAt       time.Time
	EndedAt         time.Time // zero while in flight
	Outcome         Outcome   // "" while in flight
	Error           string
	ResponseStatus  int
	ResponseExcerpt string
	// Request is what the attempt sent, as the engine recorded it (masked and bounded;
	// see StepRecordParams.Request), "" when nothing was recorded.
	Request string
}

// Event is one append-only audit record. IDs increase in commit order within a backend.
type Event struct {
	ID        int64
	At        time.Time
	Type      EventType
	RunID     int64
	StepID    int64
	Workflow  string
	Entity    string
	StepName  string
	EffectKey string
	Attempt   int
	Actor     string
	Reason    Reason
	// Detail is a JSON object with the facts specific to the event type.
	Detail json.RawMessage
}

// StepInsert describes one step of a new run.
type StepInsert struct {
	Name  string
	Needs []string
}

// RunInsertParams are the arguments of RunInsert.
type RunInsertParams struct {
	Workflow  string
	RunKey    string
	Entity    string
	Input     json.RawMessage
	InputHash string
	Steps     []StepInsert
	Actor     string
	Now       time.Time
	// Repeat records a start of a key the caller already found started, by a read
	// outside the write path, and answered from that read: the store looks the run up and
	// never creates one. It appends run.deduplicated for the run the key names once the
	// batch's other params are inserted; when there is none (a purge deleted it since the
	// read), the param's result is an error wrapping ErrNotFound and nothing is written
	// for it.
	Repeat bool
}

// RunInsertResult is what RunInsertMany did with one param.
type RunInsertResult struct {
	Run     *Run
	Created bool
	// Err is this param's own error (nothing was written for it); Run is nil then.
	Err error
}

// RunListParams filters RunList. Zero fields do not filter.
type RunListParams struct {
	Workflow string
	State    State
	Entity   string
	RunKey   string
	// CreatedSince and CreatedUntil keep only runs created at or after CreatedSince and
	// before CreatedUntil (zero: no bound).
	CreatedSince time.Time
	CreatedUntil time.Time
	// BeforeID pages backwards: only runs with a smaller ID.
	BeforeID int64
	// Limit caps the result (default 100).
	Limit int
}

// EventListParams filters EventList. Zero fields do not filter; results are in ID order
// (descending with Newest).
type EventListParams struct {
	RunID     int64
	Entity    string
	EffectKey string
	// Since and Until keep only events at or after Since and before Until (zero: no
	// bound).
	Since   time.Time
	Until   time.Time
	AfterID int64
	// Types keeps only events of these types (nil: any; empty: none).
	Types []EventType
	// Actor keeps only events by this actor; Workflow only events of this workflow.
	Actor    string
	Workflow string
	// BeforeID pages backwards: only events with a smaller ID.
	BeforeID int64
	// Newest lists the newest first: in descending ID order, so that Limit keeps the
	// newest events and the next page is BeforeID the last one.
	Newest bool
	Limit  int // default 1000
}

// KeptTypes is the event types EventList keeps of those an arm of it can hold (types, nil
// for any): the ones both lists name, nil for any.
func (p EventListParams) KeptTypes(types []EventType) []EventType {
	switch {
	case p.Types == nil:
		return types
	case types == nil:
		return p.Types
	}
	both := []EventType{}
	for _, t := range p.Types {
		if slices.Contains(types, t) {
			both = append(both, t)
		}
	}
	return both
}

// ClaimCandidate is a due step offered to StepClaimParams.Prepare inside the claim
// transaction.
type ClaimCandidate struct {
	Run  *Run
	Step *Step
	// Outputs holds the outputs of the run's completed steps by step name; every step the
	// candidate needs is among them.
	Outputs map[string]json.RawMessage
}

// EffectSpec is what Prepare derives for a candidate: the effect key it will act under
// and the fingerprint of the request it will send.
type EffectSpec struct {
	Key string
	// Fingerprint identifies the request; "" means the step does not compare requests.
	Fingerprint string
	// Skip, when set, is why the step does not apply to this run (its condition is
	// false): the step becomes skipped without touching the ledger, and so, transitively,
	// do the steps that need it (reason dependency_skipped). Key and Fingerprint are
	// ignored.
	Skip Reason
	// WaitUntil, when after the claim's Now, postpones the step (a delay or a not_before
	// time): it stays pending, due at WaitUntil, with reason delayed and, the first time,
	// an event step.delayed. Nothing else is decided: Skip, Key and Fingerprint are
	// ignored, and Prepare is asked again when the step is due.
	WaitUntil time.Time
}

// PrepareError is returned by Prepare when a step cannot be prepared (a template field is
// missing, a key is invalid). The step goes to needs_review with Reason.
type PrepareError struct {
	Reason Reason
	Err    error
}

func (e *PrepareError) Error() string { return string(e.Reason) + ": " + e.Err.Error() }
func (e *PrepareError) Unwrap() error { return e.Err }

// StepClaimParams are the arguments of StepClaim.
type StepClaimParams struct {
	// Owner identifies the worker; it is written into the lease and the attempt.
	Owner string
	Now   time.Time
	// LeaseFor is how long the lease lasts without a heartbeat.
	LeaseFor time.Duration
	// Limit is the most steps handed out.
	Limit int
	// Workflows restricts claims to workflows this worker knows.
	Workflows []string
	// Prepare derives the effect key and fingerprint of a candidate. It runs inside the
	// claim transaction, so it must be fast and must not do I/O. An error parks the step in
	// needs_review (reason from a *PrepareError, else ReasonInvalidKey).
	Prepare func(*ClaimCandidate) (EffectSpec, error)
	// WaitFor is how long a step waits before looking again at an effect key that another
	// step holds in flight.
	WaitFor time.Duration
}

// ClaimedStep is a step handed to a worker: it is processing under the worker's lease and
// its attempt has started.
type ClaimedStep struct {
	Run     *Run
	Step    *Step
	Outputs map[string]json.RawMessage
	// PreviousOutcome is the outcome of the attempt before this one; OutcomeUnknown means
	// the effect may already exist at the destination.
	PreviousOutcome Outcome
}

// ClaimResult reports what StepClaim did.
type ClaimResult struct {
	Claimed []*ClaimedStep
	// Reused counts steps completed from the ledger without acting.
	Reused int
	// ReusedSteps are the steps Reused counts, with their runs (Step.State is completed).
	ReusedSteps []*ClaimedStep
	// Skipped counts steps whose condition was false.
	Skipped int
	// Parked counts steps sent to needs_review (key conflict, prepare error).
	Parked int
	// Waiting counts steps postponed because their key is in flight elsewhere.
	Waiting int
}

// StepHeartbeatParams are the arguments of StepHeartbeat.
type StepHeartbeatParams struct {
	Owner    string
	Now      time.Time
	LeaseFor time.Duration
	StepIDs  []int64
}

// StepCheckpointParams are the arguments of StepCheckpoint.
type StepCheckpointParams struct {
	StepID  int64
	Owner   string
	Attempt int
	Now     time.Time
	// Progress is the checkpoint, a JSON value.
	Progress json.RawMessage
}

// StepCheckpointer keeps the progress of a long step, so that an attempt after a crash or
// a retry goes on where the previous one stopped instead of starting over.
type StepCheckpointer interface {
	// StepCheckpoint stores p.Progress as the step's Progress, compare-and-set on
	// (StepID, Owner, Attempt, processing): when the attempt no longer holds the step, it
	// writes nothing and returns an error wrapping ErrLeaseLost. A checkpoint is not an
	// audit event: it says how far an attempt got, not what was decided.
	StepCheckpoint(ctx context.Context, p StepCheckpointParams) error
}

// StepRecordParams is the result of one attempt and the engine's decision about it. The
// decision — Outcome, NextState, NextAt, Reason, Detail and Output — is one transition,
// set by one of Complete, Retry, Park, Fail and Skip.
type StepRecordParams struct {
	StepID  int64
	Owner   string
	Attempt int
	Now     time.Time

	Outcome         Outcome
	Error           string
	ResponseStatus  int
	ResponseExcerpt string
	// Request is what the attempt sent — a JSON document the engine writes (method, URL,
	// headers, body), masked and bounded before it is given — stored with the attempt as
	// it is; "" when the step recorded none.
	Request string
	// Output is the step's result (JSON), stored on success in the step and the ledger.
	Output json.RawMessage
	// RetainUntil is stored with the ledger row when this record completes it (a success,
	// also after a lost lease): the row may be purged from then on. Zero keeps it forever.
	RetainUntil time.Time

	// NextState is one of completed, retrying, needs_review, failed, skipped (the step
	// found nothing to do: its key is released and the steps that need it are skipped).
	NextState State
	// NextAt is when a retrying step becomes due.
	NextAt time.Time
	// Reason is the decision's code (review reason, retry cause).
	Reason Reason
	// Detail is merged into the event's detail (backoff chosen, policy that decided).
	Detail map[string]any
	Actor  string
}

// ReapDecision is what the engine decides for a step whose lease expired.
type ReapDecision struct {
	// State is retrying (try again with the same effect key) or needs_review.
	State  State
	NextAt time.Time
	Reason Reason
	Detail map[string]any
}

// StepReapParams are the arguments of StepReapExpired.
type StepReapParams struct {
	Now   time.Time
	Limit int
	// Decide runs inside the transaction for each expired step (must not do I/O).
	Decide func(*Step) ReapDecision
}

// LeaderAttemptParams are the arguments of LeaderAttempt.
type LeaderAttemptParams struct {
	// Name names the duty, e.g. "reaper".
	Name string
	// Owner identifies the candidate, e.g. the worker ID.
	Owner string
	Now   time.Time
	// TTL is how long the leadership lasts without a renewal.
	TTL time.Duration
}

// Store is the contract every backend implements. All methods are safe for concurrent use
// by many goroutines and, where the backend allows, by many processes.
type Store interface {
	ControlStore
	EntityStore
	IncidentStore
	RedactionStore
	RetentionStore
	ReviewStore
	ScheduleStore
	SessionStore
	StatsStore

	// Migrate brings the schema to the newest version. It is idempotent and safe to call
	// from several processes at once.
	Migrate(ctx context.Context) error

	// RunInsert creates a run and its steps (all pending; steps without needs are due at
	// Now), or returns the existing run for (Workflow, RunKey) with created=false. It never
	// compares inputs: the caller does, with Run.InputHash. Events: run.created, or
	// run.deduplicated for an existing run.
	RunInsert(ctx context.Context, p RunInsertParams) (run *Run, created bool, err error)
	// RunInsertMany is RunInsert for a batch, in one transaction: results has one entry per
	// param, in order. Params naming the same (Workflow, RunKey) twice insert it once; the
	// later ones are duplicates of the first (created=false, event run.deduplicated); a
	// Repeat param never inserts (see RunInsertParams.Repeat). A
	// param that is invalid on its own (see RunInsertParams.Validate) gets its own error
	// and writes nothing, without failing the others. err is for a failure of the whole
	// call: then nothing was committed and results is nil.
	RunInsertMany(ctx context.Context, ps []RunInsertParams) (results []RunInsertResult, err error)
	// RunGetByKey returns the run started for (workflow, runKey), or ErrNotFound. It reads
	// committed data only and never waits for a writer, so a repeated key is answered by an
	// index lookup.
	RunGetByKey(ctx context.Context, workflow, runKey string) (*Run, error)
	// RunGetByID returns ErrNotFound for an unknown ID.
	RunGetByID(ctx context.Context, id int64) (*Run, error)
	// RunList returns runs newest first.
	RunList(ctx context.Context, p RunListParams) ([]*Run, error)

	// StepListByRun returns a run's steps in insertion order.
	StepListByRun(ctx context.Context, runID int64) ([]*Step, error)
	// StepClaim hands out due steps (pending or retrying, Waiting 0, NextAt <= Now, lease
	// free) under a lease, oldest due first, each to exactly one caller. A candidate whose
	// EffectSpec has Skip set becomes skipped (event step.skipped, reason = Skip). For
	// every other candidate it consults the effect ledger first:
	//   - key completed, same fingerprint (or either empty): the step completes with the
	//     stored result without an attempt; events effect.reused and step.completed name
	//     the run that completed the key;
	//   - key completed, other fingerprint: needs_review, reason key_conflict;
	//   - key in flight under another step: the step stays due at Now+WaitFor (event
	//     effect.waiting when it starts waiting);
	//   - otherwise the step takes the key and is claimed: attempt+1, an attempt row,
	//     event step.claimed.
	// Completing a step releases the steps that need it; run states are re-derived.
	StepClaim(ctx context.Context, p StepClaimParams) (*ClaimResult, error)
	// StepHeartbeat extends the leases the owner still holds and returns the IDs it no
	// longer holds.
	StepHeartbeat(ctx context.Context, p StepHeartbeatParams) (lost []int64, err error)
	// StepRecord applies attempt results. A step cancelled with its run while the attempt
	// ran is not changed: its entry's error is ErrStepCancelled, and the attempt, the ledger
	// and the events are recorded (see ControlStore.RunCancel). Each entry is compare-and-set on (StepID, Owner,
	// Attempt, processing); its error is ErrLeaseLost when that fails, in which case only
	// the attempt row is closed, an event lease.lost is appended and, for a success, the
	// result is kept in the ledger (lease.lost_result_kept) so the effect is not repeated.
	// On success the ledger row completes; on a known failure (permanent, or retryable
	// but given up) the key is released; on an unknown outcome it stays held. A step
	// reaching failed cancels the steps that transitively need it. The returned slice has
	// one entry per param: nil when it applied, ErrLeaseLost as above, or the entry's own
	// error when it is invalid (StepRecordParams.Validate; nothing is written for it). An
	// entry's outcome never fails or rolls back the others. err is for a failure of the
	// whole call: then nothing was committed.
	StepRecord(ctx context.Context, p []StepRecordParams) ([]error, error)
	// StepReapExpired turns processing steps whose lease expired before Now into the state
	// Decide returns, closing their attempt with outcome unknown and keeping the key held.
	// Event lease.expired. A step cancelled while its attempt ran whose lease expired keeps
	// its state; its attempt is closed the same way and its lease ended (reason
	// run_cancelled_effect_may_exist). Returns how many steps it reaped.
	StepReapExpired(ctx context.Context, p StepReapParams) (int, error)

	// AttemptListByRun returns a run's attempts in the order they were claimed: those that
	// ended, and one for each step whose attempt is in flight (EndedAt zero, Outcome "",
	// and ID 0: an attempt's ID is given when it ends, and increases with the end).
	AttemptListByRun(ctx context.Context, runID int64) ([]*Attempt, error)
	// EffectGetByKey returns ErrNotFound for a free key.
	EffectGetByKey(ctx context.Context, key string) (*Effect, error)
	// EventList returns audit events in ID order, the stored and the derived merged. An
	// event's Entity is the run's entity when the event happened: a correction that changes
	// it (RunReplay) changes the entity of the events after it only.
	EventList(ctx context.Context, p EventListParams) ([]*Event, error)

	// LeaderAttempt acquires or renews the leadership called Name for Owner, so that one
	// process among many runs a duty such as the lease reaper. It is compare-and-set on one
	// lease per name: it succeeds, and returns true, when the leadership is free, expired
	// before Now, or already Owner's; Owner then holds it until Now+TTL. Otherwise it
	// returns false and changes nothing. A leader renews by calling it again before TTL
	// ends; there is no resignation: a leader that stops is replaced once its lease expires.
	LeaderAttempt(ctx context.Context, p LeaderAttemptParams) (bool, error)

	// Close releases the backend's resources.
	Close() error
}

// ClockSource is implemented by stores whose database has a clock that every process
// using it shares (store/postgres). The engine measures the offset between its own clock
// and DatabaseNow, correcting for half the round trip, and takes every time it passes to
// the store from the database's clock, so that processes whose clocks disagree still agree
// on which leases expired, which steps are due and which schedule ticks came. A store
// without it (store/sqlite: one machine) gets the machine's clock.
type ClockSource interface {
	// DatabaseNow returns the database's current time: its clock at the moment it
	// answers, not the start of a transaction. It is one short round trip and writes
	// nothing.
	DatabaseNow(ctx context.Context) (time.Time, error)
}

// Notifier is implemented by stores that can tell a process when steps may have become
// due because of work done in any process (a run started, a step completed and released
// its dependents, a retry or an expired lease made a step due again). The engine still
// polls: notifications only shorten the wait.
type Notifier interface {
	// Notifications returns a channel that receives a value, coalesced, whenever steps may
	// have become due. The subscription is active when Notifications returns: a change
	// committed afterwards is notified. The channel is closed when ctx ends or the store
	// is closed. A store that loses its connection reconnects by itself and sends a value
	// once it is back, since notifications may have been missed meanwhile.
	Notifications(ctx context.Context) (<-chan struct{}, error)
}

// TxRunInserter is implemented by stores that can create a run inside a transaction the
// caller owns, so that a run is started if and only if the caller's own writes commit
// (the transactional outbox pattern). The type of tx depends on the backend (store/postgres
// takes a pgx.Tx); any other type is an error. RunInsertTx behaves as RunInsert, except that
// nothing is durable, and nothing is visible to workers, before the caller commits; the
// caller's rollback undoes all of it. It does not retry: an error leaves the caller's
// transaction usable where the backend allows (store/postgres rolls back to a savepoint).
type TxRunInserter interface {
	RunInsertTx(ctx context.Context, tx any, p RunInsertParams) (run *Run, created bool, err error)
}
