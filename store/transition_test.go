package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// Each transition sets the whole decision — outcome, next state, due time, reason, detail
// and output — and nothing else: the record's identity and the attempt's facts stay, and a
// decision set before is replaced, not mixed with the new one.
func TestStepRecordTransitions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	detail := map[string]any{"policy": "p"}
	cases := []struct {
		name string
		set  func(*StepRecordParams)
		want StepRecordParams
	}{
		{"Complete", func(p *StepRecordParams) { p.Complete(json.RawMessage(`{"id":1}`)) },
			StepRecordParams{Outcome: OutcomeSuccess, NextState: StateCompleted, Output: json.RawMessage(`{"id":1}`)}},
		{"Retry", func(p *StepRecordParams) { p.Retry(OutcomeRetryable, later, ReasonRetryableError, detail) },
			StepRecordParams{Outcome: OutcomeRetryable, NextState: StateRetrying, NextAt: later, Reason: ReasonRetryableError, Detail: detail}},
		{"Park", func(p *StepRecordParams) { p.Park(OutcomeUnknown, ReasonOutcomeUnknown, detail) },
			StepRecordParams{Outcome: OutcomeUnknown, NextState: StateNeedsReview, Reason: ReasonOutcomeUnknown, Detail: detail}},
		{"Fail", func(p *StepRecordParams) { p.Fail(OutcomePermanent, ReasonPermanentError, detail) },
			StepRecordParams{Outcome: OutcomePermanent, NextState: StateFailed, Reason: ReasonPermanentError, Detail: detail}},
		{"Skip", func(p *StepRecordParams) { p.Skip(ReasonNothingToDo) },
			StepRecordParams{Outcome: OutcomeSuccess, NextState: StateSkipped, Reason: ReasonNothingToDo}},
	}
	identity := func(p StepRecordParams) StepRecordParams {
		p.StepID, p.Owner, p.Attempt, p.Now, p.Actor, p.RetainUntil = 7, "w1", 2, now, "w1", later
		p.Error, p.ResponseStatus, p.ResponseExcerpt = "boom", 503, "busy"
		return p
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Start from another decision, so that a field the transition forgets shows.
			p := identity(StepRecordParams{Outcome: OutcomeUnknown, NextState: StateRetrying, NextAt: now,
				Reason: ReasonWorkerShutdown, Detail: map[string]any{"stale": true}, Output: json.RawMessage(`"stale"`)})
			tc.set(&p)
			if want := identity(tc.want); !reflect.DeepEqual(p, want) {
				t.Errorf("after %s:\n got %+v\nwant %+v", tc.name, p, want)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("after %s: %v", tc.name, err)
			}
		})
	}
}
