package onceflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// Explain says why each decision was taken, with the policy that took it.
func TestExplain(t *testing.T) {
	policy := map[string]any{"max_attempts": 6, "initial": "2s", "max": "5m0s", "multiplier": 2, "on_failure": "needs_review", "on_unknown": "retry"}
	cases := []struct {
		e    store.Event
		d    map[string]any
		want []string
	}{
		{store.Event{Type: store.EventStepRetryPlanned, Attempt: 2, Reason: store.ReasonRetryableError},
			map[string]any{"outcome": "retryable", "error": "503 Service Unavailable", "response_status": 503, "next_at": "2026-03-01T09:00:31.5Z",
				"delay": "30s", "backoff": "1.234567s", "retry_after": "30s", "policy": policy},
			[]string{"attempt 2 failed; error: 503 Service Unavailable [retryable, status 503]", "retried at 2026-03-01T09:00:31.500Z",
				"the destination's Retry-After 30s honoured instead of the backoff 1.235s", "policy: up to 6 attempts, delays from 2s ×2 up to 5m0s, then needs_review"}},
		{store.Event{Type: store.EventStepRetryPlanned, Attempt: 3, Reason: store.ReasonLeaseExpired},
			map[string]any{"outcome": "unknown", "next_at": "2026-03-01T09:00:00Z", "why": "retry with the same effect key; the destination deduplicates",
				"policy": map[string]any{"max_attempts": 6, "on_unknown": "retry", "attempt_base": 2}},
			[]string{"retry of attempt 3 planned: the worker's lease expired", "the destination deduplicates", "up to 6 attempts counted after attempt 2"}},
		{store.Event{Type: store.EventEffectReused, EffectKey: "invoice:1001"},
			map[string]any{"completed_by_run": 12, "completed_by_workflow": "order-paid", "completed_by_step": "invoice", "completed_at": "2026-03-01T08:00:00Z"},
			[]string{"not acted on: key invoice:1001 was completed by run 12 (order-paid step invoice) at 2026-03-01T08:00:00.000Z"}},
		{store.Event{Type: store.EventEffectWaiting, EffectKey: "k"}, map[string]any{"held_by_run": 3, "held_by_step": "crm", "wait": "1s"},
			[]string{"waits: key k is in flight in run 3 step crm; looks again in 1s"}},
		{store.Event{Type: store.EventEffectConflict, EffectKey: "k"}, map[string]any{"completed_by_run": 3, "completed_by_step": "crm"},
			[]string{"completed by run 3 step crm with a different request"}},
		{store.Event{Type: store.EventStepNeedsReview, Attempt: 6, Reason: store.ReasonOutcomeUnknown},
			map[string]any{"outcome": "unknown", "error": "timeout", "attempts_exhausted": true, "policy": policy},
			[]string{"parked for review after attempt 6 (the outcome is unknown: the effect may have happened, attempts exhausted); error: timeout [unknown]"}},
		{store.Event{Type: store.EventStepNeedsReview, Attempt: 1, Reason: store.ReasonRetryAfterTooLong},
			map[string]any{"outcome": "retryable", "error": "POST /leads answered 503 (Retry-After: 9223372036); the destination asked to be tried again in 2562047h47m16s, longer than the retry policy's max_retry_after 1h0m0s: waits for review",
				"retry_after": "2562047h47m16s", "max_retry_after": "1h0m0s", "policy": policy},
			[]string{"parked for review after attempt 1 (the destination asked to be tried again later than the retry policy's max_retry_after)", "Retry-After: 9223372036"}},
		{store.Event{Type: store.EventReviewRetried, Actor: "alice"}, map[string]any{"send_again": true, "previous_reason": "outcome_unknown", "note": "CRM dedups"},
			[]string{"retried by hand by alice with a fresh attempt budget, sending the effect again under the same key", `note: "CRM dedups"`}},
		{store.Event{Type: store.EventRunInputCorrected, Actor: "bob"}, map[string]any{"revision": 2, "fields": []any{"email", "address.zip"}, "note": "typo"},
			[]string{"input corrected by bob (revision 2; fields address.zip, email)", `note: "typo"`}},
		{store.Event{Type: store.EventLeaseExpired}, map[string]any{"owner": "w1", "lease_expired_at": "2026-03-01T09:00:00Z"},
			[]string{"the lease of worker w1 expired at 2026-03-01T09:00:00.000Z without a result: the outcome is unknown"}},
		{store.Event{Type: store.EventRunCancelled, Actor: "ana", Reason: store.ReasonRunCancelled},
			map[string]any{"previous_state": "needs_review", "cancelled": []any{"email", "crm"}, "running": []any{}, "note": "customer asked for a refund instead"},
			[]string{"run cancelled by ana (it was needs_review); steps cancelled: crm, email", `note: "customer asked for a refund instead"`}},
		{store.Event{Type: store.EventStepCancelled, Reason: store.ReasonRunCancelled}, map[string]any{"note": "duplicate order"},
			[]string{"cancelled: its run was cancelled", `note: "duplicate order"`}},
		{store.Event{Type: store.EventWorkflowPaused, Workflow: "crm-sync", Actor: "token:ops"}, map[string]any{"note": "CRM maintenance until 10:00"},
			[]string{"workflow crm-sync paused by token:ops", `note: "CRM maintenance until 10:00"`}},
		{store.Event{Type: store.EventWorkflowResumed, Workflow: "crm-sync", Actor: "token:ops"}, map[string]any{"note": "CRM back"},
			[]string{"workflow crm-sync resumed by token:ops", `note: "CRM back"`}},
		{store.Event{Type: store.EventRetentionPurged, Actor: "retention"},
			map[string]any{"batch": 2, "runs": 10, "steps": 30, "attempts": 31, "events": 120, "effects": 4, "runs_before": "2026-02-01T00:00:00Z"},
			[]string{"retention purge by retention, batch 2: deleted 10 runs, 30 steps, 31 attempts, 120 events, 4 ledger rows (finished runs last changed before 2026-02-01T00:00:00.000Z)"}},
		{store.Event{Type: store.EventDataUnmasked, Actor: "cli:ana"}, map[string]any{"read": "run 7"}, []string{"cli:ana read run 7 unmasked"}},
		{store.Event{Type: "something.new", Reason: "why_not"}, nil, []string{"something.new (why_not)"}},
	}
	for _, tc := range cases {
		e := tc.e
		e.Detail, _ = json.Marshal(tc.d)
		got := onceflow.Explain(&e)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("Explain(%s) = %q\nwant it to contain %q", e.Type, got, w)
			}
		}
	}
}
