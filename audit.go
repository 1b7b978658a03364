package onceflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

// AuditQuery selects audit events. Zero fields do not filter; at least one of RunID,
// Entity, EffectKey, Since and Until is usually given.
type AuditQuery struct {
	RunID     int64
	Entity    string
	EffectKey string
	// Since and Until bound the events' times: at or after Since, before Until.
	Since time.Time
	Until time.Time
	// AfterID pages: only events with a larger ID.
	AfterID int64
	// Limit caps the answer (default 1000).
	Limit int
}

// AuditEntry is one audit event with a sentence saying what it means: why a retry
// happened or was skipped, with the policy that decided, who acted and why. What the
// client reads is masked: the sentence and the detail carry no secret and no value of a
// personal-data field of the event's run.
type AuditEntry struct {
	// ID orders the events: IDs increase in commit order.
	ID   int64
	At   time.Time
	Type EventType
	// RunID, StepID, Workflow, Entity, StepName, EffectKey and Attempt name what the
	// event is about; zero where it is about no run or step.
	RunID     int64
	StepID    int64
	Workflow  string
	Entity    string
	StepName  string
	EffectKey string
	Attempt   int
	// Actor is who acted: a worker, api, token:NAME, cli:NAME, the scheduler.
	Actor  string
	Reason Reason
	// Detail is a JSON object with the facts specific to the event's type.
	Detail json.RawMessage
	// Why says what the event means, in a sentence (see Explain).
	Why string
}

// Audit answers who did what, when and why: the audit events q selects, in the order they
// were committed, each explained and masked with the secrets and the personal data of its
// run.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]*AuditEntry, error) {
	return c.masked().Audit(ctx, q)
}

func (r reader) Audit(ctx context.Context, q AuditQuery) ([]*AuditEntry, error) {
	if r.unmasked {
		if err := r.record(ctx, q.RunID, "", "audit events"+q.about()); err != nil {
			return nil, err
		}
	}
	return r.audit(ctx, q, r.maskers(ctx))
}

// about says which events q selects, for the record of an unmasked read: " of run 7",
// " of entity order:1001 since …", "" for every event.
func (q AuditQuery) about() string {
	var parts []string
	if q.RunID > 0 {
		parts = append(parts, fmt.Sprintf("run %d", q.RunID))
	}
	if q.Entity != "" {
		parts = append(parts, "entity "+q.Entity)
	}
	if q.EffectKey != "" {
		parts = append(parts, "key "+q.EffectKey)
	}
	s := ""
	if len(parts) > 0 {
		s = " of " + strings.Join(parts, ", ")
	}
	if !q.Since.IsZero() {
		s += " since " + q.Since.UTC().Format(time.RFC3339)
	}
	if !q.Until.IsZero() {
		s += " until " + q.Until.UTC().Format(time.RFC3339)
	}
	return s
}

// audit reads the events q selects, masking each with the masker of its run from ms.
func (r reader) audit(ctx context.Context, q AuditQuery, ms *maskers) ([]*AuditEntry, error) {
	evs, err := r.c.store.EventList(ctx, store.EventListParams{RunID: q.RunID, Entity: q.Entity, EffectKey: q.EffectKey,
		Since: q.Since, Until: q.Until, AfterID: q.AfterID, Limit: q.Limit})
	if err != nil {
		return nil, fmt.Errorf("onceflow: audit: %w", err)
	}
	out := make([]*AuditEntry, len(evs))
	for i, e := range evs {
		out[i] = auditEntry(e, ms.of(e.RunID, e.Workflow))
	}
	return out, nil
}

// KeyReport answers, for one effect key, whether its business action happened: the
// ledger row (completed or in flight, when, by which run and step, with which result),
// every step the audit trail shows using the key, and the key's events.
type KeyReport struct {
	Key string
	// State is completed, in_flight or free (no ledger row: never completed, or released
	// after the destination refused).
	State string
	// Effect is the ledger row; nil when the key is free.
	Effect *EffectInfo
	// Uses lists the steps that used the key, in the order they first did.
	Uses []KeyUse
	// Events are the key's audit events, explained (at most 1000, oldest first).
	Events []*AuditEntry
}

// EffectInfo is the ledger row of an effect key: which step holds or completed it, when,
// and the result it completed with, masked as its run is.
type EffectInfo struct {
	Key   string
	State EffectState
	// Result is the output the key completed with, reused by every other step with the
	// key.
	Result json.RawMessage
	// RunID, StepID, Workflow and StepName name the step that holds or completed the key.
	RunID       int64
	StepID      int64
	Workflow    string
	StepName    string
	CreatedAt   time.Time
	CompletedAt time.Time
}

// KeyUse is one step that used an effect key.
type KeyUse struct {
	RunID    int64
	Workflow string
	Entity   string
	Step     string
	// Last is the type of the latest event of this step about the key.
	Last EventType
}

// Seen reports whether anything is known about the key: a ledger row or an audit event.
// A free key that was seen was used by a step and released (the destination refused, the
// step was abandoned or cancelled); a key never seen was never used by any step (or its
// records were purged by retention).
func (r *KeyReport) Seen() bool { return r.Effect != nil || len(r.Events) > 0 }

// Key reports on one effect key, its result and events masked as their runs are. An
// unknown key is not an error: its State is free and it has no events.
func (c *Client) Key(ctx context.Context, key string) (*KeyReport, error) {
	return c.masked().Key(ctx, key)
}

func (r reader) Key(ctx context.Context, key string) (*KeyReport, error) {
	rep := &KeyReport{Key: key, State: "free"}
	eff, err := r.c.store.EffectGetByKey(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		eff = nil
	case err != nil:
		return nil, fmt.Errorf("onceflow: key %q: %w", key, err)
	}
	var runID int64
	var workflow string
	if eff != nil {
		runID, workflow = eff.RunID, eff.Workflow
	}
	if err := r.record(ctx, runID, workflow, "effect key "+key); err != nil {
		return nil, err
	}
	ms := r.maskers(ctx)
	if eff != nil {
		rep.State = string(eff.State)
		rep.Effect = &EffectInfo{Key: eff.Key, State: eff.State, Result: eff.Result, RunID: eff.RunID, StepID: eff.StepID,
			Workflow: eff.Workflow, StepName: eff.StepName, CreatedAt: eff.CreatedAt, CompletedAt: eff.CompletedAt}
		if len(eff.Result) > 0 {
			rep.Effect.Result = ms.of(eff.RunID, eff.Workflow).JSON(eff.Result)
		}
	}
	entries, err := r.audit(ctx, AuditQuery{EffectKey: key}, ms)
	if err != nil {
		return nil, err
	}
	rep.Events = entries
	index := map[string]int{}
	for _, e := range entries {
		if e.StepName == "" {
			continue
		}
		id := fmt.Sprintf("%d/%s", e.RunID, e.StepName)
		i, ok := index[id]
		if !ok {
			i = len(rep.Uses)
			index[id] = i
			rep.Uses = append(rep.Uses, KeyUse{RunID: e.RunID, Workflow: e.Workflow, Entity: e.Entity, Step: e.StepName})
		}
		rep.Uses[i].Last = e.Type
	}
	return rep, nil
}

// Explain says in a sentence what an audit event records, reading its detail: why a step
// was retried (the error, the backoff, a Retry-After, the policy), why it was not acted
// on (the run that completed its key), why it waits for review, and what a person did.
func Explain(e *store.Event) string {
	d := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(e.Detail))
	dec.UseNumber()
	_ = dec.Decode(&d)
	str := func(k string) string {
		if v, ok := d[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	// when and dur show the detail's times and durations to the millisecond.
	when := func(k string) string {
		v := str(k)
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		return v
	}
	dur := func(k string) string {
		v := str(k)
		if d, err := time.ParseDuration(v); err == nil && d > time.Millisecond {
			return d.Round(time.Millisecond).String()
		}
		return v
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	failure := func() {
		err, o := str("error"), str("outcome")
		if err == "" && o == "" {
			return
		}
		w("; error: %s", clipText(dashIfEmpty(err), 200))
		if o != "" {
			w(" [%s", o)
			if s := str("response_status"); s != "" {
				w(", status %s", s)
			}
			w("]")
		}
	}
	note := func() {
		if n := str("note"); n != "" {
			w(" — note: %q", n)
		}
	}
	switch e.Type {
	case store.EventRunCreated:
		w("run created (run key %s, %s steps)", str("run_key"), str("steps"))
	case store.EventRunDeduplicated:
		w("started again with run key %s: the existing run was returned, nothing created", str("run_key"))
		if str("same_input") == "false" {
			w(" (the input differed, so the start was refused)")
		}
	case store.EventRunStateChanged:
		w("run %s → %s", str("from"), str("to"))
	case store.EventRunInputCorrected:
		w("input corrected by %s (revision %s; fields %s)", e.Actor, str("revision"), joinList(d["fields"]))
		if str("entity_after") != "" {
			w("; entity %s → %s", str("entity_before"), str("entity_after"))
		}
		note()
	case store.EventStepClaimed:
		w("attempt %d started by %s", e.Attempt, str("worker"))
		switch str("previous_outcome") {
		case string(store.OutcomeUnknown):
			w("; the previous attempt's outcome was unknown, so the same key is sent for the destination to deduplicate")
		case "":
		default:
			w("; the previous attempt ended %s", str("previous_outcome"))
		}
	case store.EventStepRetryPlanned:
		if e.Reason == store.ReasonLeaseExpired || e.Reason == store.ReasonWorkerShutdown {
			w("retry of attempt %d planned: %s", e.Attempt, reasonText(e.Reason))
		} else {
			w("attempt %d failed", e.Attempt)
			failure()
			w("; retried")
		}
		if str("next_at") != "" {
			w(" at %s", when("next_at"))
		}
		if str("delay") != "" {
			w(" (in %s", dur("delay"))
			if ra := str("retry_after"); ra != "" {
				w(", the destination's Retry-After %s honoured instead of the backoff %s", dur("retry_after"), dur("backoff"))
			} else if bo := str("backoff"); bo != "" {
				w(", backoff with jitter")
			}
			w(")")
		}
		if why := str("why"); why != "" {
			w(": %s", why)
		}
		policyText(&b, d["policy"])
	case store.EventStepNeedsReview, store.EventStepFailed:
		verb := "parked for review"
		if e.Type == store.EventStepFailed {
			verb = "failed"
		}
		w("%s after attempt %d (%s", verb, e.Attempt, reasonText(e.Reason))
		if str("attempts_exhausted") == "true" {
			w(", attempts exhausted")
		}
		w(")")
		failure()
		if why := str("why"); why != "" {
			w("; %s", why)
		}
		policyText(&b, d["policy"])
	case store.EventStepCompleted:
		if e.Reason == store.ReasonEffectReused {
			w("completed without acting: key completed by run %s step %s at %s; its result is reused", str("completed_by_run"), str("completed_by_step"), when("completed_at"))
		} else {
			w("completed on attempt %d", e.Attempt)
			if s := str("response_status"); s != "" {
				w(" (status %s)", s)
			}
		}
	case store.EventEffectReused:
		w("not acted on: key %s was completed by run %s (%s step %s) at %s", e.EffectKey, str("completed_by_run"), str("completed_by_workflow"),
			str("completed_by_step"), when("completed_at"))
	case store.EventEffectWaiting:
		w("waits: key %s is in flight in run %s step %s; looks again in %s", e.EffectKey, str("held_by_run"), str("held_by_step"), str("wait"))
	case store.EventEffectConflict:
		w("key %s was completed by run %s step %s with a different request: sent to review instead of reusing the old result or acting twice",
			e.EffectKey, str("completed_by_run"), str("completed_by_step"))
	case store.EventStepSkipped:
		w("skipped: %s", reasonText(e.Reason))
	case store.EventStepCancelled:
		w("cancelled: %s", reasonText(e.Reason))
	case store.EventLeaseExpired:
		w("the lease of worker %s expired at %s without a result: the outcome is unknown", str("owner"), when("lease_expired_at"))
	case store.EventLeaseLost:
		w("worker %s reported attempt %s (%s) after losing the lease; the step was not changed", str("owner"), str("attempt"), str("outcome"))
	case store.EventLeaseLostRecorded:
		w("that late result was a success: the key is recorded completed so it is not repeated")
	case store.EventReviewRetried:
		w("retried by hand by %s with a fresh attempt budget", e.Actor)
		if str("send_again") == "true" {
			w(", sending the effect again under the same key")
		}
		w(" (it waited for: %s)", reasonText(Reason(str("previous_reason"))))
		note()
	case store.EventReviewResolved:
		w("resolved by hand by %s: step completed", e.Actor)
		switch str("ledger") {
		case store.LedgerCompleted:
			w(", key recorded completed so it is never acted on again")
		case store.LedgerKept:
			w(", key already completed elsewhere (kept)")
		}
		if str("it_happened") == "true" {
			w("; confirmed that the effect happened")
		}
		note()
	case store.EventReviewAbandoned:
		w("abandoned by %s: step failed, the steps that need it cancelled", e.Actor)
		note()
	case store.EventReviewReplayed:
		w("made pending again by %s's replay (it was %s: %s)", e.Actor, str("previous_state"), reasonText(Reason(str("previous_reason"))))
		if r := str("revision"); r != "" {
			w(" with input revision %s", r)
		}
		note()
	case store.EventStepDelayed:
		w("waits until %s before it runs (delay or not_before); its condition is evaluated then", when("due_at"))
	case store.EventScheduleTickLate:
		w("tick %s (%s) of schedule %s started late by %s, after a time nothing fired ticks (catch_up: %s): run key %s",
			str("tick"), str("timezone"), str("schedule"), str("late_by"), str("policy"), str("run_key"))
	case store.EventScheduleTickSkipped:
		if more := str("more_ticks_skipped"); more != "" {
			w("%s more missed ticks of schedule %s skipped by policy (catch_up: %s)", more, str("schedule"), str("policy"))
		} else {
			w("tick %s (%s) of schedule %s, missed by %s, skipped by policy (catch_up: %s, %s)",
				str("tick"), str("timezone"), str("schedule"), str("missed_by"), str("policy"), e.Reason)
		}
	case store.EventEntityTransitioned:
		w("entity %s moved %s → %s", str("entity"), str("from"), str("to"))
	case store.EventEntityRefused:
		w("entity %s is %s; the transition to %s applies only from %s: refused", str("entity"), str("state"), str("to"), joinList(d["allowed_from"]))
	case store.EventConsoleSignedIn:
		w("%s signed in to the web console (scope %s; the session ends by %s)", e.Actor, str("scope"), when("expires"))
	case store.EventConsoleSignedOut:
		w("%s signed out of the web console", e.Actor)
	case store.EventConsoleSessionEnded:
		w("%s ended the web console session %s of %s", e.Actor, str("ended_session"), str("ended_actor"))
	default:
		w("%s", e.Type)
		if e.Reason != "" {
			w(" (%s)", e.Reason)
		}
	}
	// What a person did in the web console names the session and the address it came from
	// (store.Origin), so that two sessions of one token are told apart.
	if s := str("session"); s != "" {
		w(" — console session %s", s)
		if c := str("client"); c != "" {
			w(" from %s", c)
		}
	}
	return b.String()
}

// reasonText says what a reason code means.
func reasonText(r Reason) string {
	switch r {
	case store.ReasonPermanentError:
		return "permanent error: the destination refused for good"
	case store.ReasonAttemptsExhausted:
		return "attempts exhausted"
	case store.ReasonKeyConflict:
		return "key conflict: the key was completed with a different request"
	case store.ReasonOutcomeUnknown:
		return "the outcome is unknown: the effect may have happened"
	case store.ReasonInvalidKey:
		return "the effect key could not be made (invalid key)"
	case store.ReasonDestinationBlocked:
		return "the destination is not allowed by the egress policy (destination blocked)"
	case store.ReasonTransitionInvalid:
		return "the entity's state transition no longer applies"
	case store.ReasonOutputInvalid:
		return "the step succeeded but its output could not be stored"
	case store.ReasonRetryAfterTooLong:
		return "the destination asked to be tried again later than the retry policy's max_retry_after"
	case store.ReasonLeaseExpired:
		return "the worker's lease expired; retried with the same key"
	case store.ReasonWorkerShutdown:
		return "the worker shut down mid-step; released for another worker, same key"
	case store.ReasonDependencyFailed:
		return "a step it needs failed"
	case store.ReasonDependencySkipped:
		return "a step it needs was skipped"
	case store.ReasonConditionFalse:
		return "its condition is false"
	case "":
		return "no reason recorded"
	}
	return string(r)
}

// policyText appends the retry policy that decided, read from an event's detail.
func policyText(b *strings.Builder, v any) {
	p, ok := v.(map[string]any)
	if !ok {
		return
	}
	get := func(k string) string {
		if v, ok := p[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	fmt.Fprintf(b, " — policy: up to %s attempts", get("max_attempts"))
	if base := get("attempt_base"); base != "" && base != "0" {
		fmt.Fprintf(b, " counted after attempt %s (the last manual retry or replay)", base)
	}
	if get("initial") != "" {
		fmt.Fprintf(b, ", delays from %s ×%s up to %s", get("initial"), get("multiplier"), get("max"))
	}
	if f := get("on_failure"); f != "" {
		fmt.Fprintf(b, ", then %s", f)
	}
	if u := get("on_unknown"); u != "" {
		fmt.Fprintf(b, ", unknown outcome: %s", u)
	}
}

func joinList(v any) string {
	list, ok := v.([]any)
	if !ok {
		return fmt.Sprint(v)
	}
	parts := make([]string, len(list))
	for i, x := range list {
		parts[i] = fmt.Sprint(x)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clipText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
