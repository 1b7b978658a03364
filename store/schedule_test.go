package store

import (
	"testing"
	"time"
)

func TestWaitingUntil(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	delayed := func(d time.Duration) *Step {
		return &Step{State: StatePending, Reason: ReasonDelayed, NextAt: t0.Add(d)}
	}
	cases := []struct {
		name  string
		steps []*Step
		want  time.Time
	}{
		{"earliest delayed step", []*Step{{State: StateCompleted}, delayed(2 * time.Hour), delayed(time.Hour), {State: StatePending, Waiting: 1}}, t0.Add(time.Hour)},
		{"another step ready", []*Step{delayed(time.Hour), {State: StatePending}}, time.Time{}},
		{"another step running", []*Step{delayed(time.Hour), {State: StateProcessing}}, time.Time{}},
		{"another step retrying", []*Step{delayed(time.Hour), {State: StateRetrying}}, time.Time{}},
		{"nothing delayed", []*Step{{State: StateCompleted}}, time.Time{}},
	}
	for _, tc := range cases {
		if got := WaitingUntil(tc.steps); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
