package store

import "testing"

func TestDeriveRunState(t *testing.T) {
	t.Parallel()
	pending := StepStatus{State: StatePending}
	blocked := StepStatus{State: StatePending, Waiting: 1}
	st := func(s State) StepStatus { return StepStatus{State: s} }
	cases := []struct {
		name  string
		steps []StepStatus
		want  State
	}{
		{"nothing started", []StepStatus{pending, blocked}, StatePending},
		{"waiting for a delayed step after a completed one", []StepStatus{st(StateCompleted), {State: StatePending, Delayed: true}, blocked}, StatePending},
		{"a delayed step beside a ready one", []StepStatus{st(StateCompleted), {State: StatePending, Delayed: true}, pending}, StateProcessing},
		{"a delayed step beside a retrying one", []StepStatus{st(StateRetrying), {State: StatePending, Delayed: true}}, StateRetrying},
		{"a delayed step beside review", []StepStatus{st(StateNeedsReview), {State: StatePending, Delayed: true}}, StateNeedsReview},
		{"one pending", []StepStatus{pending}, StatePending},
		{"processing", []StepStatus{st(StateProcessing), blocked}, StateProcessing},
		{"ready after a completed step", []StepStatus{st(StateCompleted), pending}, StateProcessing},
		{"only retrying", []StepStatus{st(StateRetrying)}, StateRetrying},
		{"retrying after completed", []StepStatus{st(StateCompleted), st(StateRetrying), blocked}, StateRetrying},
		{"retrying beside a ready step", []StepStatus{st(StateRetrying), pending}, StateProcessing},
		{"retrying beside a processing step", []StepStatus{st(StateRetrying), st(StateProcessing)}, StateProcessing},
		{"review wins over processing", []StepStatus{st(StateNeedsReview), st(StateProcessing), pending}, StateNeedsReview},
		{"review with blocked dependents", []StepStatus{st(StateNeedsReview), blocked}, StateNeedsReview},
		{"review wins over failed", []StepStatus{st(StateFailed), st(StateNeedsReview)}, StateNeedsReview},
		{"failed while a branch is ready", []StepStatus{st(StateFailed), pending}, StateProcessing},
		{"failed while a branch is processing", []StepStatus{st(StateFailed), st(StateProcessing)}, StateProcessing},
		{"failed with cancelled dependents", []StepStatus{st(StateCompleted), st(StateFailed), st(StateCancelled)}, StateFailed},
		{"cancelled", []StepStatus{st(StateCompleted), st(StateCancelled)}, StateCancelled},
		{"completed", []StepStatus{st(StateCompleted), st(StateCompleted)}, StateCompleted},
		{"completed with skipped", []StepStatus{st(StateCompleted), st(StateSkipped)}, StateCompleted},
		{"only skipped", []StepStatus{st(StateSkipped)}, StateCompleted},
		{"blocked behind nothing active", []StepStatus{st(StateCompleted), blocked}, StateProcessing},
		{"no steps", nil, StateCompleted},
	}
	for _, tc := range cases {
		if got := DeriveRunState(tc.steps); got != tc.want {
			t.Errorf("%s: DeriveRunState(%v) = %s, want %s", tc.name, tc.steps, got, tc.want)
		}
	}
}
