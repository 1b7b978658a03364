package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// A step that fails with a retryable error three times is attempted four times with the
// same effect key, waits as the policy says between attempts, and its effect happens once.
func TestRetryableErrorsThenSuccess(t *testing.T) {
	b := setup(t)
	dest := newDestination(t)
	dest.onRequest(func(n int, _ *http.Request) int {
		if n <= 3 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	policy := onceflow.RetryPolicy{MaxAttempts: 5, Initial: 2 * time.Second, Max: time.Minute, Multiplier: 2}
	b.register(t, onceflow.Workflow{
		Name: "website-lead", Entity: "lead:{input.submission_id}",
		Steps: []onceflow.Step{{ID: "crm", EffectKey: "lead-create:{input.submission_id}", Do: post(dest.URL), Retry: policy}},
	})
	run := b.start(t, "website-lead", "sub-8812", map[string]any{"submission_id": 8812})

	// With jitter fixed at 0.5, waits are half of 2 s, 4 s, 8 s.
	wantWaits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for i, want := range wantWaits {
		if n := b.work(t); n != 1 {
			t.Fatalf("round %d: worked %d steps, want 1", i, n)
		}
		st := b.steps(t, run.ID)["crm"]
		if st.State != store.StateRetrying || st.Attempt != i+1 {
			t.Fatalf("round %d: step %s attempt %d, want retrying attempt %d", i, st.State, st.Attempt, i+1)
		}
		if got := st.NextAt.Sub(b.clock.Now()); got != want {
			t.Errorf("wait after attempt %d = %v, want %v", i+1, got, want)
		}
		// Not due a moment early.
		b.clock.Set(st.NextAt.Add(-time.Millisecond))
		if n := b.work(t); n != 0 {
			t.Fatalf("round %d: a step ran %d before its backoff ended", i, n)
		}
		b.clock.Set(st.NextAt)
	}
	b.work(t)

	st := b.steps(t, run.ID)["crm"]
	if st.State != store.StateCompleted || st.Attempt != 4 {
		t.Fatalf("step %s attempt %d, want completed after 4 attempts", st.State, st.Attempt)
	}
	if r := b.run(t, run.ID); r.State != store.StateCompleted {
		t.Fatalf("run state %s, want completed", r.State)
	}
	requests, keys, applied := dest.snapshot()
	if requests != 4 {
		t.Errorf("destination got %d requests, want 4", requests)
	}
	for _, k := range keys {
		if k != "lead-create:8812" {
			t.Errorf("request carried key %q, want lead-create:8812 on every attempt", k)
		}
	}
	if len(applied) != 1 || applied["lead-create:8812"] != 1 {
		t.Errorf("effects applied = %v, want one", applied)
	}
	attempts, err := b.store.AttemptListByRun(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []store.Outcome
	for _, a := range attempts {
		outcomes = append(outcomes, a.Outcome)
		if a.EffectKey != "lead-create:8812" || a.Worker != "test-worker" {
			t.Errorf("attempt %d: key %q worker %q", a.Number, a.EffectKey, a.Worker)
		}
	}
	wantOutcomes := []store.Outcome{store.OutcomeRetryable, store.OutcomeRetryable, store.OutcomeRetryable, store.OutcomeSuccess}
	if !reflect.DeepEqual(outcomes, wantOutcomes) {
		t.Errorf("attempt outcomes = %v, want %v", outcomes, wantOutcomes)
	}
	if attempts[0].ResponseStatus != http.StatusServiceUnavailable {
		t.Errorf("attempt 1 response status = %d, want 503", attempts[0].ResponseStatus)
	}

	// The audit trail, in order.
	evs := b.events(t, store.EventListParams{RunID: run.ID})
	want := []store.EventType{
		store.EventRunCreated,
		store.EventStepClaimed, store.EventRunStateChanged, store.EventStepRetryPlanned, store.EventRunStateChanged,
		store.EventStepClaimed, store.EventRunStateChanged, store.EventStepRetryPlanned, store.EventRunStateChanged,
		store.EventStepClaimed, store.EventRunStateChanged, store.EventStepRetryPlanned, store.EventRunStateChanged,
		store.EventStepClaimed, store.EventRunStateChanged, store.EventStepCompleted, store.EventRunStateChanged,
	}
	if got := eventTypes(evs, ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("audit trail:\n got %v\nwant %v", got, want)
	}
	for _, e := range evs {
		if e.Workflow != "website-lead" || e.Entity != "lead:8812" || e.RunID != run.ID {
			t.Errorf("event %s lacks run context: %+v", e.Type, e)
		}
		if e.Type == store.EventStepRetryPlanned {
			d := detailOf(t, e)
			if d["outcome"] != "retryable" || d["policy"] == nil || e.Reason != store.ReasonRetryableError {
				t.Errorf("retry event does not say why: reason %q detail %v", e.Reason, d)
			}
		}
	}
}

// Retry-After from the destination replaces the backoff.
func TestRetryAfterIsHonoured(t *testing.T) {
	b := setup(t)
	calls := 0
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: func(context.Context, *onceflow.StepContext) (any, error) {
		calls++
		if calls == 1 {
			return nil, onceflow.RetryAfterError(errors.New("429 too many requests"), 42*time.Second)
		}
		return nil, nil
	}}}})
	run := b.start(t, "w", "k", nil)
	b.work(t)
	st := b.steps(t, run.ID)["s"]
	if got := st.NextAt.Sub(b.clock.Now()); got != 42*time.Second {
		t.Fatalf("retry after %v, want the destination's 42s", got)
	}
	b.clock.Advance(42 * time.Second)
	b.work(t)
	if st := b.steps(t, run.ID)["s"]; st.State != store.StateCompleted {
		t.Fatalf("step %s, want completed", st.State)
	}
}

// A permanent error parks the step with its reason and error; steps that need it do not
// run; an independent branch finishes.
func TestPermanentErrorParksStepAndBlocksDependents(t *testing.T) {
	b := setup(t)
	var mu sync.Mutex
	ran := map[string]int{}
	do := func(id string, err error) onceflow.StepFunc {
		return func(context.Context, *onceflow.StepContext) (any, error) {
			mu.Lock()
			ran[id]++
			mu.Unlock()
			return map[string]string{"step": id}, err
		}
	}
	b.register(t, onceflow.Workflow{Name: "order", Entity: "order:{input.order_id}", Steps: []onceflow.Step{
		{ID: "paid", Do: do("paid", nil)},
		{ID: "invoice", Needs: []string{"paid"}, Do: do("invoice", onceflow.PermanentError(errors.New("tax id 99 rejected by the invoicing service")))},
		{ID: "email_invoice", Needs: []string{"invoice"}, Do: do("email_invoice", nil)},
		{ID: "reserve_stock", Needs: []string{"paid"}, Do: do("reserve_stock", nil)},
	}})
	run := b.start(t, "order", "pi_1", map[string]any{"order_id": 1001})
	b.work(t)

	steps := b.steps(t, run.ID)
	if s := steps["invoice"]; s.State != store.StateNeedsReview || s.Reason != store.ReasonPermanentError || !strings.Contains(s.LastError, "tax id 99") {
		t.Fatalf("invoice: state %s reason %q error %q", s.State, s.Reason, s.LastError)
	}
	if s := steps["email_invoice"]; s.State != store.StatePending || s.Attempt != 0 {
		t.Fatalf("email_invoice ran or changed: %s attempt %d", s.State, s.Attempt)
	}
	if s := steps["reserve_stock"]; s.State != store.StateCompleted {
		t.Fatalf("reserve_stock %s, want completed", s.State)
	}
	if ran["email_invoice"] != 0 || ran["invoice"] != 1 {
		t.Fatalf("runs per step: %v", ran)
	}
	if r := b.run(t, run.ID); r.State != store.StateNeedsReview {
		t.Fatalf("run %s, want needs_review", r.State)
	}
	// The key is free again: the destination refused, so nothing happened.
	if _, err := b.store.EffectGetByKey(b.ctx, steps["invoice"].EffectKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ledger row for a refused effect: %v", err)
	}
	evs := b.events(t, store.EventListParams{RunID: run.ID})
	if got, want := eventTypes(evs, "invoice"), []store.EventType{store.EventStepClaimed, store.EventStepNeedsReview}; !reflect.DeepEqual(got, want) {
		t.Fatalf("invoice events %v, want %v", got, want)
	}
	toReview := 0
	for _, e := range evs {
		if e.Type == store.EventRunStateChanged && detailOf(t, e)["to"] == "needs_review" {
			toReview++
		}
	}
	if toReview != 1 {
		t.Fatalf("%d events move the run to needs_review, want 1", toReview)
	}
}

// OnFailure: Fail ends the step failed and cancels what needs it.
func TestFailPolicyCancelsDependents(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "a", OnFailure: onceflow.Fail, Retry: onceflow.RetryPolicy{MaxAttempts: 1}, Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, errors.New("still down")
		}},
		{ID: "b", Needs: []string{"a"}, Do: noop},
		{ID: "c", Needs: []string{"b"}, Do: noop},
	}})
	run := b.start(t, "w", "k", nil)
	b.work(t)
	steps := b.steps(t, run.ID)
	if steps["a"].State != store.StateFailed || steps["a"].Reason != store.ReasonAttemptsExhausted {
		t.Fatalf("a: %s %s", steps["a"].State, steps["a"].Reason)
	}
	for _, id := range []string{"b", "c"} {
		if steps[id].State != store.StateCancelled || steps[id].Reason != store.ReasonDependencyFailed {
			t.Fatalf("%s: %s %s, want cancelled dependency_failed", id, steps[id].State, steps[id].Reason)
		}
	}
	if r := b.run(t, run.ID); r.State != store.StateFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
}

// Two runs whose steps share an effect key perform the effect once; the second completes
// with the first one's result and the audit names the first run.
func TestSharedEffectKeyAcrossRuns(t *testing.T) {
	b := setup(t)
	dest := newDestination(t)
	var welcomed []string
	b.register(t, onceflow.Workflow{Name: "website-lead", Entity: "lead:{input.submission_id}", Steps: []onceflow.Step{
		{ID: "crm", EffectKey: "lead-create:{input.submission_id}", Do: post(dest.URL)},
		{ID: "welcome", Needs: []string{"crm"}, EffectKey: "welcome:{run.key}", Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			var lead struct{ ID string }
			if err := sc.DecodeOutput("crm", &lead); err != nil {
				return nil, err
			}
			welcomed = append(welcomed, lead.ID)
			return nil, nil
		}},
	}})
	first := b.start(t, "website-lead", "form-1", map[string]any{"submission_id": 8812})
	b.work(t)
	second := b.start(t, "website-lead", "form-1-resubmitted", map[string]any{"submission_id": 8812})
	b.work(t)

	if requests, _, _ := dest.snapshot(); requests != 1 {
		t.Fatalf("CRM got %d requests, want 1", requests)
	}
	for _, id := range []int64{first.ID, second.ID} {
		if r := b.run(t, id); r.State != store.StateCompleted {
			t.Fatalf("run %d %s, want completed", id, r.State)
		}
	}
	a, c := b.steps(t, first.ID)["crm"], b.steps(t, second.ID)["crm"]
	if string(a.Output) != string(c.Output) || c.Attempt != 0 {
		t.Fatalf("second crm step: output %s attempt %d, want %s without an attempt", c.Output, c.Attempt, a.Output)
	}
	if !reflect.DeepEqual(welcomed, []string{"lead-lead-create:8812", "lead-lead-create:8812"}) {
		t.Fatalf("welcome steps saw %v", welcomed)
	}
	evs := b.events(t, store.EventListParams{RunID: second.ID})
	if got, want := eventTypes(evs, "crm"), []store.EventType{store.EventEffectReused, store.EventStepCompleted}; !reflect.DeepEqual(got, want) {
		t.Fatalf("second run's crm events %v, want %v", got, want)
	}
	for _, e := range evs {
		if e.Type == store.EventEffectReused {
			d := detailOf(t, e)
			if d["completed_by_run"] != float64(first.ID) || d["completed_at"] == nil {
				t.Fatalf("effect.reused detail %v does not name run %d and when", d, first.ID)
			}
		}
	}
	eff, err := b.store.EffectGetByKey(b.ctx, "lead-create:8812")
	if err != nil || eff.State != store.EffectCompleted || eff.RunID != first.ID {
		t.Fatalf("ledger: %+v %v", eff, err)
	}
}

// A key reused with a different request is parked rather than silently reused.
func TestKeyConflictGoesToReview(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "charge", Steps: []onceflow.Step{{
		ID: "charge", EffectKey: "charge:{input.order_id}", Do: noop,
		Fingerprint: func(sc *onceflow.StepContext) (any, error) {
			var in struct{ Amount int }
			return in.Amount, sc.DecodeInput(&in)
		},
	}}})
	first := b.start(t, "charge", "a", map[string]any{"order_id": 1, "amount": 100})
	b.work(t)
	second := b.start(t, "charge", "b", map[string]any{"order_id": 1, "amount": 250})
	b.work(t)
	if s := b.steps(t, first.ID)["charge"]; s.State != store.StateCompleted {
		t.Fatalf("first charge %s", s.State)
	}
	s := b.steps(t, second.ID)["charge"]
	if s.State != store.StateNeedsReview || s.Reason != store.ReasonKeyConflict || s.Attempt != 0 {
		t.Fatalf("second charge %s %s attempt %d, want needs_review key_conflict without an attempt", s.State, s.Reason, s.Attempt)
	}
}

// 50 concurrent Starts with one run key create one run; different inputs conflict.
func TestConcurrentStartsCreateOneRun(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: noop}}})

	var wg sync.WaitGroup
	runs := make([]*onceflow.Run, 50)
	errs := make([]error, 50)
	for i := range 50 {
		wg.Go(func() { runs[i], errs[i] = b.client.Start(b.ctx, "w", "same-key", map[string]any{"n": 1}) })
	}
	wg.Wait()
	created := 0
	for i := range 50 {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if runs[i].ID != runs[0].ID {
			t.Fatalf("start %d got run %d, start 0 got %d", i, runs[i].ID, runs[0].ID)
		}
		if !runs[i].Duplicate {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d starts created a run, want 1", created)
	}

	for i := range 50 {
		wg.Go(func() { runs[i], errs[i] = b.client.Start(b.ctx, "w", "other-key", map[string]any{"n": i}) })
	}
	wg.Wait()
	conflicts, winners := 0, 0
	for i := range 50 {
		var ce *onceflow.RunConflictError
		switch {
		case errors.As(errs[i], &ce) && errors.Is(errs[i], onceflow.ErrRunConflict):
			conflicts++
		case errs[i] == nil && !runs[i].Duplicate:
			winners++
		default:
			t.Fatalf("start %d: run %+v err %v", i, runs[i], errs[i])
		}
	}
	if winners != 1 || conflicts != 49 {
		t.Fatalf("winners %d conflicts %d, want 1 and 49", winners, conflicts)
	}
	all, err := b.store.RunList(b.ctx, store.RunListParams{})
	if err != nil || len(all) != 2 {
		t.Fatalf("runs stored: %d (%v), want 2", len(all), err)
	}
}

// Bad input gets a typed error that says what to fix, and nothing is written.
func TestBadInputIsRefusedWithoutWriting(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "lead", Entity: "lead:{input.submission_id}", RequiredInput: []string{"email"},
		Steps: []onceflow.Step{{ID: "s", Do: noop}}})
	tests := []struct {
		name     string
		workflow string
		key      string
		input    any
		target   error
		says     string
	}{
		{"empty key", "lead", "", map[string]any{"submission_id": 1, "email": "x"}, onceflow.ErrInvalidKey, "is empty"},
		{"long key", "lead", strings.Repeat("k", 256), map[string]any{"submission_id": 1, "email": "x"}, onceflow.ErrInvalidKey, "256 bytes"},
		{"control character", "lead", "a\x00b", map[string]any{"submission_id": 1, "email": "x"}, onceflow.ErrInvalidKey, "control character"},
		{"bad utf-8", "lead", "a\xffb", map[string]any{"submission_id": 1, "email": "x"}, onceflow.ErrInvalidKey, "UTF-8"},
		{"padded key", "lead", " k", map[string]any{"submission_id": 1, "email": "x"}, onceflow.ErrInvalidKey, "white space"},
		{"unknown workflow", "nope", "k", nil, onceflow.ErrWorkflowNotFound, `"nope" is not registered`},
		{"malformed JSON", "lead", "k", []byte(`{"submission_id": `), onceflow.ErrInvalidInput, "not valid JSON"},
		{"not an object", "lead", "k", []byte(`[1,2]`), onceflow.ErrInvalidInput, "must be a JSON object"},
		{"string input", "lead", "k", "submission_id=1", onceflow.ErrInvalidInput, "Go string"},
		{"missing required field", "lead", "k", map[string]any{"submission_id": 1}, onceflow.ErrInvalidInput, "required field email is missing"},
		{"missing entity field", "lead", "k", map[string]any{"email": "x"}, onceflow.ErrInvalidInput, "input.submission_id is missing"},
		{"nested too deeply", "lead", "k", []byte(`{"submission_id":1,"email":"x","x":` + strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64) + `}`),
			onceflow.ErrInvalidInput, "nests objects and lists 65 levels deep; the limit is 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.client.Start(b.ctx, tt.workflow, tt.key, tt.input)
			if !errors.Is(err, tt.target) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error %v, want %v saying %q", err, tt.target, tt.says)
			}
		})
	}
	if runs, _ := b.store.RunList(b.ctx, store.RunListParams{}); len(runs) != 0 {
		t.Fatalf("%d runs written by refused starts", len(runs))
	}
	if evs := b.events(t, store.EventListParams{}); len(evs) != 0 {
		t.Fatalf("%d events written by refused starts", len(evs))
	}
}

func TestRegisterRefusesBadDefinitions(t *testing.T) {
	b := setup(t)
	ok := onceflow.Step{ID: "s", Do: noop}
	tests := []struct {
		name string
		w    onceflow.Workflow
		says string
	}{
		{"bad name", onceflow.Workflow{Name: "has space", Steps: []onceflow.Step{ok}}, "the name must be"},
		{"no steps", onceflow.Workflow{Name: "w"}, "no steps"},
		{"nil Do", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s"}}}, "Do is nil"},
		{"duplicate step", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{ok, ok}}, "used twice"},
		{"unknown need", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: noop, Needs: []string{"x"}}}}, `needs "x"`},
		{"cycle", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "a", Do: noop, Needs: []string{"b"}}, {ID: "b", Do: noop, Needs: []string{"a"}}}}, "cycle"},
		{"bad template", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: noop, EffectKey: "k:{input.x"}}}, "never closed"},
		{"template reads a non-ancestor", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "a", Do: noop}, {ID: "b", Do: noop, EffectKey: "k:{steps.a.output.id}"}}}, "not a step it needs"},
		{"template reads a secret", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: noop, EffectKey: "k:{env.TOKEN}"}}}, "it may read"},
		{"entity reads a step", onceflow.Workflow{Name: "w", Entity: "x:{steps.s.output.id}", Steps: []onceflow.Step{ok}}, "entity template"},
		{"bad failure action", onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: noop, OnFailure: "explode"}}}, "OnFailure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.client.Register(tt.w)
			var de *onceflow.DefinitionError
			if !errors.As(err, &de) || !errors.Is(err, onceflow.ErrInvalidWorkflow) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error %v, want a DefinitionError saying %q", err, tt.says)
			}
		})
	}
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{ok}})
	if err := b.client.Register(onceflow.Workflow{Name: "w", Steps: []onceflow.Step{ok}}); !errors.Is(err, onceflow.ErrInvalidWorkflow) || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("second registration: %v", err)
	}
}

// A key template whose field is missing parks the step with a message naming the field:
// never an empty or partial key.
func TestMissingKeyFieldParksStep(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "crm", Do: func(context.Context, *onceflow.StepContext) (any, error) { return map[string]any{"name": "x"}, nil }},
		{ID: "email", Needs: []string{"crm"}, EffectKey: "welcome:{steps.crm.output.lead_id}", Do: noop},
	}})
	run := b.start(t, "w", "k", nil)
	b.work(t)
	s := b.steps(t, run.ID)["email"]
	if s.State != store.StateNeedsReview || s.Reason != store.ReasonInvalidKey || !strings.Contains(s.LastError, "steps.crm.output.lead_id is missing") {
		t.Fatalf("email: %s %s %q", s.State, s.Reason, s.LastError)
	}
	if s.EffectKey != "" {
		t.Fatalf("a partial key was stored: %q", s.EffectKey)
	}
}

// An unknown outcome at a destination that cannot deduplicate goes to review; with the
// default policy it is retried with the same key and the attempt knows.
func TestUnknownOutcome(t *testing.T) {
	b := setup(t)
	var seen []onceflow.ErrorClass
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "sms", OnUnknown: onceflow.ReviewUnknown, Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.UnknownOutcomeError(errors.New("connection reset after the request was sent"))
		}},
		{ID: "crm", Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			seen = append(seen, sc.PreviousOutcome)
			if sc.Attempt == 1 {
				return nil, onceflow.UnknownOutcomeError(errors.New("timeout"))
			}
			return nil, nil
		}},
	}})
	run := b.start(t, "w", "k", nil)
	b.work(t)
	b.clock.Advance(time.Hour)
	b.work(t)
	steps := b.steps(t, run.ID)
	if s := steps["sms"]; s.State != store.StateNeedsReview || s.Reason != store.ReasonOutcomeUnknown {
		t.Fatalf("sms: %s %s", s.State, s.Reason)
	}
	if eff, err := b.store.EffectGetByKey(b.ctx, steps["sms"].EffectKey); err != nil || eff.State != store.EffectInFlight {
		t.Fatalf("an unknown outcome must keep the key held: %+v %v", eff, err)
	}
	if s := steps["crm"]; s.State != store.StateCompleted || s.Attempt != 2 {
		t.Fatalf("crm: %s attempt %d", s.State, s.Attempt)
	}
	if !reflect.DeepEqual(seen, []onceflow.ErrorClass{"", onceflow.Unknown}) {
		t.Fatalf("previous outcomes seen %v", seen)
	}
}

// Steps see the outputs of the steps they need, and a panic is a retryable error.
func TestOutputsFlowAndPanicsAreRetried(t *testing.T) {
	b := setup(t)
	panicked := false
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "a", Do: func(context.Context, *onceflow.StepContext) (any, error) { return map[string]any{"id": 77}, nil }},
		{ID: "b", Needs: []string{"a"}, EffectKey: "b:{steps.a.output.id}", Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			if !panicked {
				panicked = true
				panic("boom")
			}
			var out struct{ ID int }
			if err := sc.DecodeOutput("a", &out); err != nil {
				return nil, err
			}
			return map[string]any{"got": out.ID, "key": sc.EffectKey}, nil
		}},
	}})
	run := b.start(t, "w", "k", nil)
	b.work(t)
	s := b.steps(t, run.ID)["b"]
	if s.State != store.StateRetrying || !strings.Contains(s.LastError, "panicked: boom") {
		t.Fatalf("after panic: %s %q", s.State, s.LastError)
	}
	b.clock.Advance(time.Minute)
	b.work(t)
	s = b.steps(t, run.ID)["b"]
	if s.State != store.StateCompleted || string(s.Output) != `{"got":77,"key":"b:77"}` {
		t.Fatalf("b: %s %s", s.State, s.Output)
	}
}

// A false condition skips the step and what needs it; other branches run.
func TestWhenFalseSkipsStep(t *testing.T) {
	b := setup(t)
	ran := map[string]bool{}
	mark := func(id string) onceflow.StepFunc {
		return func(context.Context, *onceflow.StepContext) (any, error) { ran[id] = true; return nil, nil }
	}
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "sms", Do: mark("sms"), When: func(sc *onceflow.StepContext) (bool, error) {
			var in struct{ Phone string }
			return in.Phone != "", sc.DecodeInput(&in)
		}},
		{ID: "sms_receipt", Needs: []string{"sms"}, Do: mark("sms_receipt")},
		{ID: "task", Do: mark("task")},
	}})
	run := b.start(t, "w", "k", map[string]any{"email": "a@example.com"})
	b.work(t)
	steps := b.steps(t, run.ID)
	if steps["sms"].State != store.StateSkipped || steps["sms"].Reason != "condition_false" || ran["sms"] {
		t.Fatalf("sms: %s %s ran=%v", steps["sms"].State, steps["sms"].Reason, ran["sms"])
	}
	if steps["sms_receipt"].State != store.StateSkipped || steps["sms_receipt"].Reason != store.ReasonDependencySkipped || ran["sms_receipt"] {
		t.Fatalf("sms_receipt: %s %s", steps["sms_receipt"].State, steps["sms_receipt"].Reason)
	}
	if steps["task"].State != store.StateCompleted || !ran["task"] {
		t.Fatalf("task: %s", steps["task"].State)
	}
	if r := b.run(t, run.ID); r.State != store.StateCompleted {
		t.Fatalf("run %s", r.State)
	}
}

// Validate reports every problem, each with the step and field at fault.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := onceflow.Workflow{Name: "w", Entity: "x:{steps.a.output.id}", Steps: []onceflow.Step{
		{ID: "a", Do: noop, OnFailure: "explode"},
		{ID: "b", Needs: []string{"zzz"}},
	}}.Validate()
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var de *onceflow.DefinitionError
		if !errors.As(e, &de) {
			t.Fatalf("%v is not a DefinitionError", e)
		}
		got = append(got, de.Step+"/"+de.Field)
	}
	want := []string{"/entity", "a/on_failure", "b/do", "b/needs"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("problems %v, want %v", got, want)
	}
}

// A step that finds nothing to do ends skipped with its reason, and so do its dependents.
func TestSkipStepFromFunction(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{
		{ID: "mark_paid", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.SkipStep("transition_invalid", errors.New("order:1 is already paid"))
		}},
		{ID: "invoice", Needs: []string{"mark_paid"}, Do: noop},
	}})
	run := b.start(t, "w", "k", nil)
	b.work(t)
	steps := b.steps(t, run.ID)
	if s := steps["mark_paid"]; s.State != store.StateSkipped || s.Reason != "transition_invalid" || s.LastError != "order:1 is already paid" {
		t.Fatalf("mark_paid: %s %s %q", s.State, s.Reason, s.LastError)
	}
	if s := steps["invoice"]; s.State != store.StateSkipped || s.Attempt != 0 {
		t.Fatalf("invoice: %s attempt %d", s.State, s.Attempt)
	}
	if r := b.run(t, run.ID); r.State != store.StateCompleted {
		t.Fatalf("run %s", r.State)
	}
}

// A key started by another client (another process, or before a restart) is not among the
// keys this client remembers: its Start goes through the group commit, where the unique
// constraint finds the run, and answers exactly as the index lookup does.
func TestStartFindsKeysOfAnotherClient(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "lead", Steps: []onceflow.Step{{ID: "a", Do: noop}}})
	first := b.start(t, "lead", "form-1", map[string]any{"id": 1})
	other, err := onceflow.New(onceflow.Config{Store: b.store, WorkerID: "other", Clock: b.clock.Now, ClockSync: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Register(onceflow.Workflow{Name: "lead", Steps: []onceflow.Step{{ID: "a", Do: noop}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // through the group commit, then through the lookup
		r, err := other.Start(b.ctx, "lead", "form-1", map[string]any{"id": 1})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Duplicate || r.ID != first.ID {
			t.Fatalf("start %d by another client: run %d duplicate=%v, want run %d duplicate", i+1, r.ID, r.Duplicate, first.ID)
		}
	}
	var conflict *onceflow.RunConflictError
	if _, err := other.Start(b.ctx, "lead", "form-1", map[string]any{"id": 2}); !errors.As(err, &conflict) || conflict.RunID != first.ID {
		t.Fatalf("other input: %v, want a RunConflictError naming run %d", err, first.ID)
	}
	if err := other.Flush(b.ctx); err != nil {
		t.Fatal(err)
	}
	runs, err := b.store.RunList(b.ctx, store.RunListParams{Workflow: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	if got := eventTypes(b.events(t, store.EventListParams{RunID: first.ID}), ""); slices.Index(got, store.EventRunDeduplicated) < 0 {
		t.Fatalf("events %v: no %s", got, store.EventRunDeduplicated)
	}
}

// Config.MaxInputDepth bounds a run's input wherever it comes from: a start, and the
// correction of a replay; a refused correction changes nothing.
func TestMaxInputDepth(t *testing.T) {
	b := setup(t, func(c *onceflow.Config) { c.MaxInputDepth = 3 })
	b.register(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "s", Do: func(context.Context, *onceflow.StepContext) (any, error) {
		return nil, onceflow.PermanentError(errors.New("refused"))
	}}}})
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	run, err := b.client.Start(b.ctx, "w", "k3", json.RawMessage(`{"x":`+nest(2)+`}`))
	if err != nil {
		t.Fatalf("an input 3 levels deep: %v", err)
	}
	if _, err := b.client.Start(b.ctx, "w", "k4", json.RawMessage(`{"x":`+nest(3)+`}`)); !errors.Is(err, onceflow.ErrInvalidInput) ||
		!strings.Contains(err.Error(), "nests objects and lists 4 levels deep; the limit is 3") {
		t.Fatalf("an input 4 levels deep: %v", err)
	}
	b.work(t)
	req := onceflow.ReplayRequest{RunID: run.ID, Step: "s", MergePatch: json.RawMessage(`{"x":` + nest(3) + `}`), Actor: "alice"}
	if _, err := b.client.ReviewReplay(b.ctx, req); !errors.Is(err, onceflow.ErrInvalidInput) || !strings.Contains(err.Error(), "the limit is 3") {
		t.Fatalf("a correction 4 levels deep: %v", err)
	}
	if got := string(b.run(t, run.ID).Input); got != `{"x":{"a":{"a":1}}}` {
		t.Fatalf("the refused correction changed the input: %s", got)
	}
}

// Work returns when no step is left due: a claim that only postponed a step still waiting
// out its delay is not the end, even with one worker, while another step is due behind it.
func TestWorkGoesOnPastADelayedStep(t *testing.T) {
	b := setup(t, func(c *onceflow.Config) { c.Workers = 1 })
	ran := 0
	do := func(context.Context, *onceflow.StepContext) (any, error) { ran++; return nil, nil }
	b.register(t, onceflow.Workflow{Name: "later", Steps: []onceflow.Step{{ID: "s", Delay: time.Hour, Do: do}}})
	b.register(t, onceflow.Workflow{Name: "now", Steps: []onceflow.Step{{ID: "s", Do: do}}})
	b.start(t, "later", "l-1", nil)
	b.clock.Advance(time.Second)
	b.start(t, "now", "n-1", nil)
	b.clock.Advance(time.Second)
	b.work(t)
	if ran != 1 {
		t.Fatalf("Work ran %d steps and returned; the step of run n-1 was due behind the delayed one", ran)
	}
}
