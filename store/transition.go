package store

import (
	"encoding/json"
	"time"
)

// The decision of a StepRecordParams is one of five transitions, each set by one method,
// so that a caller names what happens to the step instead of assigning Outcome,
// NextState, NextAt, Reason, Detail and Output together (a combination a store would
// have to check). Each sets every field of the decision, so a later call replaces an
// earlier one; the attempt's facts (Error, ResponseStatus, ResponseExcerpt) and the
// record's identity are left as they are.

// Complete records a successful attempt: the step completes with output, which the ledger
// keeps as the result of the effect key.
func (p *StepRecordParams) Complete(output json.RawMessage) {
	p.setDecision(OutcomeSuccess, StateCompleted, time.Time{}, "", nil)
	p.Output = output
}

// Retry records an attempt that ended with outcome and makes the step due again at at,
// under the same effect key, for reason (the event step.retry_scheduled with detail).
func (p *StepRecordParams) Retry(outcome Outcome, at time.Time, reason Reason, detail map[string]any) {
	p.setDecision(outcome, StateRetrying, at, reason, detail)
}

// Park records an attempt that ended with outcome and parks the step in needs_review for
// reason until a person decides (the event step.needs_review with detail). The key stays
// held when the effect may exist, and is released when the destination answered
// (LedgerChange).
func (p *StepRecordParams) Park(outcome Outcome, reason Reason, detail map[string]any) {
	p.setDecision(outcome, StateNeedsReview, time.Time{}, reason, detail)
}

// Fail records an attempt that ended with outcome and fails the step for good, for reason:
// the steps that need it are cancelled (the event step.failed with detail). The key is
// released as Park releases it (LedgerChange).
func (p *StepRecordParams) Fail(outcome Outcome, reason Reason, detail map[string]any) {
	p.setDecision(outcome, StateFailed, time.Time{}, reason, detail)
}

// Skip records an attempt that found nothing to do: the step ends skipped for reason, its
// key is released, and the steps that need it are skipped too.
func (p *StepRecordParams) Skip(reason Reason) {
	p.setDecision(OutcomeSuccess, StateSkipped, time.Time{}, reason, nil)
}

// setDecision sets every field of the decision.
func (p *StepRecordParams) setDecision(outcome Outcome, next State, at time.Time, reason Reason, detail map[string]any) {
	p.Outcome, p.NextState, p.NextAt, p.Reason, p.Detail, p.Output = outcome, next, at, reason, detail, nil
}
