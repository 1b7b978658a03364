package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// ReviewItem is the row of a step parked in needs_review (or, from ReviewGetByStep, a
// step in any state) read with its run's facts, with what a person needs to decide about
// it. It is a Step row seen from the review queue, not a definition; what callers of the
// client read is onceflow.ReviewItem, masked.
type ReviewItem struct {
	RunID    int64
	StepID   int64
	Workflow string
	StepName string
	RunKey   string
	Entity   string
	// State is the step's state: needs_review for every item ReviewList returns.
	State     State
	EffectKey string
	// Reason is the review reason code (permanent_error, attempts_exhausted, key_conflict,
	// outcome_unknown, invalid_key, destination_blocked, transition_invalid, …).
	Reason      Reason
	LastError   string
	LastOutcome Outcome
	// Attempts is the number of the latest attempt; AttemptBase the attempt number at
	// the last manual retry or replay (0 if none): the retry policy counts Attempts −
	// AttemptBase.
	Attempts    int
	AttemptBase int
	// ResponseStatus and ResponseExcerpt are the destination's answer to the latest
	// attempt that has ended (0 and "" when there is none).
	ResponseStatus  int
	ResponseExcerpt string
	// Since is when the step entered its state (for an item, when it was parked).
	Since time.Time
	// RunCreatedAt is when the run was started.
	RunCreatedAt time.Time
}

// EffectMayExist reports whether the item's effect may have happened although the step
// has no recorded result: its last attempt's outcome is unknown (or succeeded without a
// storable result) and its key may still be held by it. Such an item needs an explicit
// decision — it happened (ReviewResolve with ItHappened) or send again (ReviewRetry with
// SendAgain) — and every other action on it is refused with ErrEffectMayExist.
func (it *ReviewItem) EffectMayExist() bool {
	return StepEffectMayExist(&Step{State: it.State, Reason: it.Reason, LastOutcome: it.LastOutcome})
}

// Version names the state the item is in, as StepVersion names a step's: a person's
// decision taken on a preview of the item carries it, and is refused (ErrItemChanged)
// when the step is no longer in that state.
func (it *ReviewItem) Version() string {
	return version(it.State, it.Attempts, it.AttemptBase, it.Since)
}

// StepVersion names the state a step is in: its state, the number of its latest attempt,
// its attempt base and when its state last changed. Any change to the step — an attempt,
// a retry, a replay, a decision — gives it another version.
func StepVersion(st *Step) string {
	return version(st.State, st.Attempt, st.AttemptBase, st.UpdatedAt)
}

func version(state State, attempt, base int, since time.Time) string {
	return fmt.Sprintf("%s.%d.%d.%d", state, attempt, base, since.UnixMicro())
}

// StepEffectMayExist is ReviewItem.EffectMayExist for a stored step.
func StepEffectMayExist(st *Step) bool {
	return st.State == StateNeedsReview &&
		(st.Reason == ReasonOutcomeUnknown || st.LastOutcome == OutcomeUnknown || st.LastOutcome == OutcomeSuccess)
}

// ReplayResets reports whether RunReplay makes a step pending again: a step in
// needs_review whose effect cannot have happened (see StepEffectMayExist), a failed step,
// and a cancelled one unless its effect may have happened (reason
// run_cancelled_effect_may_exist: its key stays held and it is not acted on again). Completed and skipped steps are kept as they are, and pending,
// retrying and processing steps are left alone. The replay preview applies the same rule.
func ReplayResets(st *Step) bool {
	switch st.State {
	case StateNeedsReview:
		return !StepEffectMayExist(st)
	case StateFailed:
		return true
	case StateCancelled:
		return st.Reason != ReasonCancelledEffectMayExist
	}
	return false
}

// Review reasons the engine and the step kinds use, besides the Reason… codes above.
const (
	ReasonDestinationBlocked Reason = "destination_blocked"
	ReasonTransitionInvalid  Reason = "transition_invalid"
	ReasonOutputInvalid      Reason = "output_invalid"
	// ReasonRetryAfterTooLong: the destination asked to be tried again later than the
	// step's retry policy allows (RetryPolicy.MaxRetryAfter).
	ReasonRetryAfterTooLong Reason = "retry_after_too_long"
)

// Reasons of the steps that review actions change.
const (
	ReasonManualRetry    Reason = "manual_retry"
	ReasonResolvedByHand Reason = "resolved_by_hand"
	ReasonAbandoned      Reason = "abandoned"
	ReasonReplay         Reason = "replay"
)

// Review events. Each is appended, with the actor and note, in the transaction of the
// action it records.
const (
	EventReviewRetried     EventType = "review.retried"
	EventReviewResolved    EventType = "review.resolved"
	EventReviewAbandoned   EventType = "review.abandoned"
	EventReviewReplayed    EventType = "review.replayed"
	EventRunInputCorrected EventType = "run.input_corrected"
	// ReasonCorrection is the reason of a run.input_corrected event.
	ReasonCorrection Reason = "correction"
)

// Ledger outcomes of ReviewResolve (ReviewResult.Ledger).
const (
	// LedgerCompleted: the step's effect key is now completed in the ledger with the
	// given output, so other steps with the same key reuse it.
	LedgerCompleted = "completed"
	// LedgerKept: the key was already completed (by another step); the row is kept.
	LedgerKept = "kept"
	// LedgerNone: the step has no effect key (it was parked before one could be made).
	LedgerNone = "none"
)

// Sentinel errors of the review actions. Backends wrap them; callers test with errors.Is.
var (
	// ErrNotInReview: the step is not in needs_review (a person can act only on a parked
	// step), or, for RunReplay, the step named is not.
	ErrNotInReview = errors.New("not in review")
	// ErrEffectMayExist: the action is refused because the step's effect may have happened
	// (see StepEffectMayExist); decide first with ItHappened or SendAgain.
	ErrEffectMayExist = errors.New("the effect may have happened")
	// ErrReviewConflict: the run changed in a way that forbids the action now (a step of
	// the run is processing, the input changed since the correction was computed, the
	// step's key is in flight in another step). Nothing was written; look again.
	ErrReviewConflict = errors.New("review conflict")
	// ErrNothingToReplay: RunReplay found no step to make pending again.
	ErrNothingToReplay = errors.New("nothing to replay")
	// ErrItemChanged: the action names the version of the item it was decided on
	// (ReviewAction.Version, RunReplayParams.StepVersions), and the step is no longer in
	// that version. Nothing was written.
	ErrItemChanged = errors.New("the item changed since it was previewed")
)

// ReviewListParams filters ReviewList. Zero fields do not filter; results are in step ID
// order.
type ReviewListParams struct {
	Workflow string
	StepName string
	Reason   Reason
	Entity   string
	RunID    int64
	// ParkedBefore keeps only items parked before it (older than Now − age).
	ParkedBefore time.Time
	// AfterStepID pages: only items with a larger step ID.
	AfterStepID int64
	Limit       int // default 100
}

// ReviewAction names the step a person acts on, who they are and why.
type ReviewAction struct {
	RunID int64
	Step  string
	// Actor names the person (or token) acting; it is written into the audit event.
	Actor string
	// Note says why; it is written into the audit event.
	Note string
	Now  time.Time
	// Version, when set, is the step's version (StepVersion) the decision was taken on:
	// the action is refused with ErrItemChanged, inside its transaction, when the step is
	// in another.
	Version string
}

// CheckVersion returns ErrItemChanged, wrapped with what the step is now, when want is
// set and st is not in version want.
func CheckVersion(st *Step, want string) error {
	if want == "" || StepVersion(st) == want {
		return nil
	}
	return fmt.Errorf("run %d step %q is now %s (attempt %d, since %s): %w", st.RunID, st.Name, st.State, st.Attempt,
		st.UpdatedAt.UTC().Format(time.RFC3339), ErrItemChanged)
}

// ReviewRetryParams are the arguments of ReviewRetry.
type ReviewRetryParams struct {
	ReviewAction
	// SendAgain confirms a retry of a step whose effect may have happened: the effect is
	// attempted again under the same key, relying on the destination to deduplicate.
	SendAgain bool
}

// ReviewResolveParams are the arguments of ReviewResolve.
type ReviewResolveParams struct {
	ReviewAction
	// Output is the step's output as the person states it (JSON; nil means null, or the
	// ledger's stored result when the key is already completed).
	Output json.RawMessage
	// ItHappened confirms that the effect of a step whose outcome was unknown happened.
	ItHappened bool
}

// ReviewResult is what a review action left behind.
type ReviewResult struct {
	Step     *Step
	RunState State
	// Ledger is, for ReviewResolve, what happened to the effect key (Ledger… constants).
	Ledger string
}

// RunReplayParams are the arguments of RunReplay.
type RunReplayParams struct {
	RunID int64
	// Step, when set, names the review item the replay is for: it must be in
	// needs_review (ErrNotInReview) and its effect must not possibly exist
	// (ErrEffectMayExist).
	Step string
	// Input, when set, is the corrected input: it replaces the run's input, by
	// compare-and-set against BaseInput (ErrReviewConflict when the stored input differs),
	// and a revision is kept with Diff. Entity is the entity the corrected input names.
	// The run's InputHash is kept, so a repeated start with the original input still finds
	// the run.
	Input     json.RawMessage
	BaseInput json.RawMessage
	Entity    string
	// Diff is the JSON merge patch (RFC 7386) that turns BaseInput into Input.
	Diff  json.RawMessage
	Actor string
	Note  string
	Now   time.Time
	// StepVersions, when set, holds by name the versions (StepVersion) of the run's steps
	// the replay was planned on: the replay is refused with ErrItemChanged, inside its
	// transaction, when one of them is in another.
	StepVersions map[string]string
}

// RunReplayResult is what RunReplay did.
type RunReplayResult struct {
	Run *Run
	// Revision is the number of the revision the correction made (0 without one).
	Revision int
	// Reset lists the steps made pending again, as they are now.
	Reset []*Step
}

// RunRevision is one correction of a run's input.
type RunRevision struct {
	RunID int64
	// Revision numbers corrections from 1.
	Revision     int
	InputBefore  json.RawMessage
	InputAfter   json.RawMessage
	EntityBefore string
	EntityAfter  string
	// Diff is the JSON merge patch from InputBefore to InputAfter.
	Diff  json.RawMessage
	Actor string
	Note  string
	At    time.Time
}

// ReviewStore is the review queue: the steps that wait in needs_review for a person, and
// what that person does about them. Every Store is one. Each action is one transaction
// that either applies in full, with its audit event (actor and note) and the re-derived
// run state, or changes nothing; each is compare-and-set on the step's state, so two
// people acting on one item at once cannot both succeed.
type ReviewStore interface {
	// ReviewList returns the steps in needs_review, in step ID order.
	ReviewList(ctx context.Context, p ReviewListParams) ([]*ReviewItem, error)
	// ReviewGetByStep returns the step named step of a run as a review item, whatever its
	// state; ErrNotFound for an unknown run or step.
	ReviewGetByStep(ctx context.Context, runID int64, step string) (*ReviewItem, error)

	// ReviewRetry gives a parked step a fresh attempt budget (AttemptBase = Attempt) and
	// makes it due at Now: retrying (pending if it never had an attempt), with its effect
	// key as it is — a key the step still holds is attempted again under the same key.
	// Event review.retried. ErrNotInReview for a step not in needs_review;
	// ErrEffectMayExist for a step whose effect may exist unless SendAgain.
	ReviewRetry(ctx context.Context, p ReviewRetryParams) (*ReviewResult, error)
	// ReviewResolve completes a parked step by hand with Output: the step becomes
	// completed (reason resolved_by_hand) and its effect key completed in the ledger with
	// Output, held by this step, so other steps with the key reuse it (Ledger completed);
	// a key already completed elsewhere is kept as it is (Ledger kept) and, without
	// Output, its result becomes the step's output. The steps that need it are released.
	// Event review.resolved. ErrNotInReview; ErrEffectMayExist unless ItHappened for a
	// step whose effect may exist; ErrReviewConflict when the key is in flight in another
	// step.
	ReviewResolve(ctx context.Context, p ReviewResolveParams) (*ReviewResult, error)
	// ReviewAbandon ends a parked step failed (reason abandoned), releasing a key it holds
	// and cancelling, transitively, the steps that need it; the run's state is
	// re-derived, and is failed once nothing else is active or parked. Event
	// review.abandoned. ErrNotInReview; ErrEffectMayExist for a step whose effect may
	// exist.
	ReviewAbandon(ctx context.Context, p ReviewAction) (*ReviewResult, error)

	// RunReplay corrects a run's input (when Input is set) and replays it: every step
	// ReplayResets selects becomes pending, with a fresh attempt budget, due at Now once
	// the steps it needs have completed (its waiting count is recomputed); pending steps
	// that need a skipped step are skipped. Completed steps are never touched: their
	// effects are not repeated, even where the corrected input would change their request.
	// A step keeps its effect key until it is claimed, when the key is rendered again from
	// the corrected input. Events run.input_corrected (with the revision and Diff) and
	// review.replayed for each step reset, then the re-derived run state. ErrReviewConflict
	// when a step of the run is processing or the input is not BaseInput;
	// ErrNothingToReplay when no step would be reset; ErrNotInReview and
	// ErrEffectMayExist about Step.
	RunReplay(ctx context.Context, p RunReplayParams) (*RunReplayResult, error)
	// RunRevisionList returns a run's input corrections, oldest first.
	RunRevisionList(ctx context.Context, runID int64) ([]*RunRevision, error)
}

// ReplayCheck checks a replay against a run's steps, as RunReplay does inside its
// transaction and the replay preview does before, and returns the steps it resets (see
// ReplayResets): ErrReviewConflict when a step is processing, ErrNotFound, ErrNotInReview
// or ErrEffectMayExist about p.Step, ErrNothingToReplay when no step would be reset.
func ReplayCheck(p RunReplayParams, steps []*Step) ([]*Step, error) {
	var reset []*Step
	found := p.Step == ""
	for _, st := range steps {
		if st.State == StateProcessing {
			return nil, fmt.Errorf("run %d step %q is processing (worker %s); replay when it has finished: %w", p.RunID, st.Name, st.LeaseOwner, ErrReviewConflict)
		}
		if st.State == StateCancelled && st.LeaseOwner != "" && st.LeaseExpiresAt.After(p.Now) {
			return nil, fmt.Errorf("run %d step %q was cancelled while its attempt ran, and the attempt is still running (worker %s); replay when it has finished: %w",
				p.RunID, st.Name, st.LeaseOwner, ErrReviewConflict)
		}
		if st.Name == p.Step {
			found = true
			if st.State != StateNeedsReview {
				return nil, fmt.Errorf("run %d step %q is %s, not needs_review: %w", p.RunID, st.Name, st.State, ErrNotInReview)
			}
			if StepEffectMayExist(st) {
				return nil, fmt.Errorf("run %d step %q (reason %s): %w", p.RunID, st.Name, st.Reason, ErrEffectMayExist)
			}
		}
		if err := CheckVersion(st, p.StepVersions[st.Name]); err != nil {
			return nil, err
		}
		if ReplayResets(st) {
			reset = append(reset, st)
		}
	}
	if !found {
		return nil, fmt.Errorf("run %d has no step %q: %w", p.RunID, p.Step, ErrNotFound)
	}
	if len(reset) == 0 {
		return nil, fmt.Errorf("run %d has no step in needs_review, failed or cancelled that a replay could run again: %w", p.RunID, ErrNothingToReplay)
	}
	return reset, nil
}

// ReplayWaiting returns, by step name, how many of each step's needs have not completed:
// the waiting count RunReplay gives the steps it resets.
func ReplayWaiting(steps []*Step) map[string]int {
	state := make(map[string]State, len(steps))
	for _, st := range steps {
		state[st.Name] = st.State
	}
	out := make(map[string]int, len(steps))
	for _, st := range steps {
		n := 0
		for _, need := range st.Needs {
			if state[need] != StateCompleted {
				n++
			}
		}
		out[st.Name] = n
	}
	return out
}

// MergePatchPaths lists the dotted paths of the fields a JSON merge patch sets or removes,
// sorted, for audit events that must name what a correction changed without its values.
func MergePatchPaths(patch json.RawMessage) []string {
	var v any
	if err := json.Unmarshal(patch, &v); err != nil {
		return nil
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		obj, ok := v.(map[string]any)
		if !ok || (len(obj) == 0 && prefix != "") {
			out = append(out, prefix)
			return
		}
		for k, e := range obj {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, e)
		}
	}
	walk("", v)
	sort.Strings(out)
	return out
}
