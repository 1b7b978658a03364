package onceflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/internal/safetext"
	"github.com/onceflow/onceflow/store"
)

// ErrorClass says what an error from a step means for the effect and for retries.
type ErrorClass string

// Error classes.
const (
	// Retryable: the effect did not happen and trying again may work. A plain error from
	// a step function is retryable.
	Retryable ErrorClass = "retryable"
	// Permanent: the effect did not happen and trying again will not help (bad data, a
	// refusal). The step goes to review, or fails where its policy says so.
	Permanent ErrorClass = "permanent"
	// Unknown: the effect may have happened (the connection dropped after the request was
	// sent). The step is retried with the same effect key, or goes to review where the
	// step says the destination cannot deduplicate.
	Unknown ErrorClass = "unknown"
	// Skipped: the step found nothing to do (a transition that no longer applies). It
	// ends skipped, its key is released, and the steps that need it are skipped too.
	Skipped ErrorClass = "skipped"
)

// StepError is an error returned by a step function together with what it means. Build one
// with PermanentError, RetryAfterError or UnknownOutcomeError.
type StepError struct {
	Class ErrorClass
	// RetryAfter, when positive, replaces the backoff delay before the next attempt, up to
	// the step's RetryPolicy.MaxRetryAfter (longer: review, retry_after_too_long).
	RetryAfter time.Duration
	// ResponseStatus and ResponseExcerpt describe the destination's answer, if any; they
	// are stored with the attempt.
	ResponseStatus  int
	ResponseExcerpt string
	// Reason, when set, is the review reason code used if the step is parked (for example
	// "destination_blocked"); the default is permanent_error or attempts_exhausted.
	Reason Reason
	Err    error
}

func (e *StepError) Error() string {
	if e.Err == nil {
		return string(e.Class) + " error"
	}
	return e.Err.Error()
}

func (e *StepError) Unwrap() error { return e.Err }

// PermanentError marks err as permanent: the step is not retried.
func PermanentError(err error) error {
	return &StepError{Class: Permanent, Err: err}
}

// RetryAfterError marks err as retryable no sooner than after d (a destination's
// Retry-After). A d longer than the step's RetryPolicy.MaxRetryAfter is not waited for: the
// step goes to review with reason retry_after_too_long.
func RetryAfterError(err error, d time.Duration) error {
	return &StepError{Class: Retryable, RetryAfter: d, Err: err}
}

// UnknownOutcomeError marks err as leaving the effect's outcome unknown.
func UnknownOutcomeError(err error) error {
	return &StepError{Class: Unknown, Err: err}
}

// SkipStep ends the step skipped with reason (a short code such as "transition_invalid")
// and the explanation err.
func SkipStep(reason Reason, err error) error {
	return &StepError{Class: Skipped, Reason: reason, Err: err}
}

// ClassOf returns the class of an error returned by a step: the class of the first
// *StepError in its chain, Unknown for a cancelled or timed-out context (the work may have
// been under way), and Retryable otherwise.
func ClassOf(err error) ErrorClass {
	var se *StepError
	if errors.As(err, &se) && se.Class != "" {
		return se.Class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Unknown
	}
	return Retryable
}

// Sentinel errors; the typed errors below match them with errors.Is.
var (
	// ErrWorkflowNotFound: no workflow of that name is registered.
	ErrWorkflowNotFound = errors.New("workflow not found")
	// ErrRunConflict: the run key was already used with a different input.
	ErrRunConflict = errors.New("run key already used with a different input")
	// ErrInvalidKey: a run key or effect key breaks the key rules.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidInput: a run's input is not a JSON object, or lacks what the workflow needs.
	ErrInvalidInput = errors.New("invalid input")
	// ErrInvalidWorkflow: a workflow definition is wrong (returned by Register).
	ErrInvalidWorkflow = errors.New("invalid workflow")
	// ErrNotFound: the run asked for does not exist.
	ErrNotFound = store.ErrNotFound
	// ErrLeaseLost: the attempt no longer holds its step (its lease expired and another
	// worker took it, or the run was cancelled); StepContext.Checkpoint returns it.
	ErrLeaseLost = store.ErrLeaseLost
)

// WorkflowNotFoundError names the unknown workflow.
type WorkflowNotFoundError struct{ Name string }

func (e *WorkflowNotFoundError) Error() string {
	return fmt.Sprintf("workflow %q is not registered; register it with Client.Register before starting runs", e.Name)
}

// Is reports whether target is ErrWorkflowNotFound.
func (e *WorkflowNotFoundError) Is(target error) bool { return target == ErrWorkflowNotFound }

// RunConflictError is returned by Start when the run key already names a run whose input
// differs.
type RunConflictError struct {
	Workflow string
	RunKey   string
	RunID    int64
}

func (e *RunConflictError) Error() string {
	return fmt.Sprintf("run key %q of workflow %q already started run %d with a different input; use a new run key for a new business event", e.RunKey, e.Workflow, e.RunID)
}

// Is reports whether target is ErrRunConflict.
func (e *RunConflictError) Is(target error) bool { return target == ErrRunConflict }

// KeyError says what is wrong with a key or an entity.
type KeyError struct {
	// Kind is "run key", "effect key", "entity" or the name the caller gave the key
	// ("Idempotency-Key").
	Kind string
	// Key is the value refused, whole; Error quotes at most its first
	// keyErrorExcerpt bytes, escaped.
	Key     string
	Problem string
}

// keyErrorExcerpt is how much of a refused key an error message quotes.
const keyErrorExcerpt = 64

func (e *KeyError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Kind, safetext.Quote(e.Key, keyErrorExcerpt), e.Problem)
}

// Is reports whether target is ErrInvalidKey.
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }

// InputError says what is wrong with a run's input.
type InputError struct {
	Workflow string
	// Field, when set, is the input field at fault, such as "input.email" for an entity
	// derived from it that breaks the identifier rules.
	Field   string
	Problem string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("input for workflow %q: %s", e.Workflow, e.Problem)
}

// Is reports whether target is ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// DefinitionError says what is wrong with a workflow definition.
type DefinitionError struct {
	Workflow string
	Step     string // "" when the problem is the workflow's own
	// Field names the part of the definition at fault: name, entity, required_input,
	// steps, id, needs, effect_key, do, on_failure, on_unknown, retry.
	Field   string
	Problem string
}

func (e *DefinitionError) Error() string {
	if e.Step != "" {
		return fmt.Sprintf("workflow %q step %q: %s", e.Workflow, e.Step, e.Problem)
	}
	return fmt.Sprintf("workflow %q: %s", e.Workflow, e.Problem)
}

// Is reports whether target is ErrInvalidWorkflow.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidWorkflow }
