package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// A bulk replay of 100 parked items obeys the same rule: not one request for the steps
// that completed, one for each step that had not, as each item's preview said.
func TestBulkReplayOfHundred(t *testing.T) {
	b := setup(t, func(c *onceflow.Config) { c.Workers = 20 })
	s := newSink(t)
	b.register(t, orderFlow(s))
	s.refuse("/mail", "mail service suspended")
	var runs []*onceflow.Run
	for i := range 100 {
		runs = append(runs, b.start(t, "order-flow", fmt.Sprintf("evt-%d", i), map[string]any{"order_id": 2000 + i, "email": fmt.Sprintf("c%d@example.com", i)}))
	}
	b.work(t)
	if got := s.counts(); got["/crm"] != 100 || got["/invoice"] != 100 || got["/mail"] != 100 || got["/chat"] != 0 {
		t.Fatalf("requests before the replay: %v", got)
	}
	s.refuse("/mail", "")

	filter := onceflow.ReviewFilter{Workflow: "order-flow", Step: "mail", Reason: store.ReasonPermanentError}
	preview, err := b.client.ReviewBulk(b.ctx, onceflow.BulkRequest{Filter: filter, Action: onceflow.BulkReplay, Actor: "bob", Note: "mail service is back", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(preview) != 100 {
		t.Fatalf("bulk preview covers %d items, want 100", len(preview))
	}
	before := map[int64]map[string]store.Step{}
	for _, r := range runs {
		before[r.ID] = b.snapshot(t, r.ID)
	}
	keysBefore := s.keyCounts()
	for _, it := range preview {
		if !it.OK || it.Plan == nil || planActions(it.Plan) != "crm:skip invoice:skip mail:run chat:run" {
			t.Fatalf("bulk preview of run %d: ok %v err %v plan %v", it.RunID, it.OK, it.Err, it.Plan)
		}
	}
	if items, _ := b.client.ReviewList(b.ctx, onceflow.ReviewFilter{Limit: 200}); len(items) != 100 {
		t.Fatalf("the bulk preview changed the queue: %d items", len(items))
	}

	// The confirmation names the previewed items, each with its version and its plan.
	// With another correction than the preview's, every plan differs and nothing is done.
	var targets []onceflow.BulkTarget
	for _, it := range preview {
		targets = append(targets, onceflow.BulkTarget{RunID: it.RunID, Step: it.Step, Version: it.Version, PlanDigest: it.Plan.Digest})
	}
	other, err := b.client.ReviewBulk(b.ctx, onceflow.BulkRequest{Items: targets, Action: onceflow.BulkReplay, Actor: "bob",
		MergePatch: json.RawMessage(`{"email":"someone@example.com"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range other {
		if it.OK || !errors.Is(it.Err, onceflow.ErrPlanChanged) {
			t.Fatalf("a confirmation with another correction than its preview's: run %d ok %v err %v", it.RunID, it.OK, it.Err)
		}
	}
	if got := s.counts(); got["/mail"] != 100 {
		t.Fatalf("the refused confirmation sent mail: %v", got)
	}
	done, err := b.client.ReviewBulk(b.ctx, onceflow.BulkRequest{Items: targets, Action: onceflow.BulkReplay, Actor: "bob", Note: "mail service is back"})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range done {
		if !it.OK || it.Err != nil {
			t.Errorf("bulk replay of run %d: %v", it.RunID, it.Err)
		}
	}
	if len(done) != 100 {
		t.Fatalf("bulk replay covered %d items", len(done))
	}
	b.work(t)
	if got := s.counts(); got["/crm"] != 100 || got["/invoice"] != 100 || got["/mail"] != 200 || got["/chat"] != 100 {
		t.Errorf("requests after the bulk replay: %v, want crm 100, invoice 100, mail 200, chat 100", got)
	}
	for _, it := range preview {
		b.wantPlanHappened(t, s, it.Plan, before[it.RunID], keysBefore)
	}
	for _, r := range runs {
		if st := b.run(t, r.ID).State; st != store.StateCompleted {
			t.Errorf("run %d is %s after the bulk replay", r.ID, st)
		}
	}
	if d := s.duplicates(); len(d) > 0 {
		t.Errorf("business actions carried out twice: %v", d)
	}
	entries, err := b.client.Audit(b.ctx, onceflow.AuditQuery{RunID: runs[57].ID})
	if err != nil {
		t.Fatal(err)
	}
	wantActed(t, entries, "bob", "mail service is back", store.EventReviewReplayed)
}

// leadFlow is crm → task; task's key reads crm's output, so a hand-made output steers it.
func leadFlow(s *sink) onceflow.Workflow {
	return onceflow.Workflow{
		Name: "lead-flow", Entity: "lead:{input.lead}", RequiredInput: []string{"lead"},
		Steps: []onceflow.Step{
			{ID: "crm", EffectKey: "lead-create:{input.lead}", Do: send(s, "/crm")},
			{ID: "task", Needs: []string{"crm"}, EffectKey: "task:{steps.crm.output.id}", Do: send(s, "/task")},
		},
	}
}

// Resolving by hand records the output, completes the key in the ledger (another run with
// the key reuses it) and lets the dependent step continue.
func TestResolveByHandReleasesDependents(t *testing.T) {
	b := setup(t)
	s := newSink(t)
	b.register(t, leadFlow(s))
	s.refuse("/crm", "duplicate e-mail")
	run := b.start(t, "lead-flow", "form-8812", map[string]any{"lead": 8812})
	b.work(t)
	if st := b.steps(t, run.ID)["crm"]; st.State != store.StateNeedsReview || st.Reason != store.ReasonPermanentError {
		t.Fatalf("crm: %s %s", st.State, st.Reason)
	}
	s.refuse("/crm", "")

	res, err := b.client.ReviewResolve(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "carol", Note: "lead created by hand in the CRM",
		Output: map[string]any{"id": 77}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StepState != store.StateCompleted || res.Ledger != store.LedgerCompleted {
		t.Errorf("resolve result %+v", res)
	}
	eff, err := b.store.EffectGetByKey(b.ctx, "lead-create:8812")
	if err != nil || eff.State != store.EffectCompleted || eff.RunID != run.ID || string(eff.Result) != `{"id":77}` {
		t.Fatalf("ledger row after resolve: %+v, %v", eff, err)
	}
	b.work(t)
	if got := s.counts(); got["/crm"] != 1 || got["/task"] != 1 || s.keyRequests("task:77") != 1 {
		t.Errorf("requests after resolve: %v (task:77 %d), want the task once under task:77 and no more crm", got, s.keyRequests("task:77"))
	}
	if st := b.run(t, run.ID).State; st != store.StateCompleted {
		t.Errorf("run %s, want completed", st)
	}

	// Another run that produces the same key reuses the hand-made result.
	other := b.start(t, "lead-flow", "form-8812-again", map[string]any{"lead": 8812})
	b.work(t)
	if got := s.counts(); got["/crm"] != 1 || got["/task"] != 1 {
		t.Errorf("requests after a second run of the same lead: %v", got)
	}
	if st := b.steps(t, other.ID)["crm"]; st.State != store.StateCompleted || st.Reason != "effect_reused" {
		t.Errorf("second run's crm: %s %s", st.State, st.Reason)
	}

	key, err := b.client.Key(b.ctx, "lead-create:8812")
	if err != nil {
		t.Fatal(err)
	}
	if key.State != "completed" || key.Effect.RunID != run.ID || len(key.Uses) != 2 || key.Uses[1].RunID != other.ID {
		t.Errorf("key report: state %s effect %+v uses %+v", key.State, key.Effect, key.Uses)
	}
	wantActed(t, key.Events, "carol", "lead created by hand", store.EventReviewResolved)
	var why []string
	for _, e := range key.Events {
		why = append(why, e.Why)
	}
	if all := strings.Join(why, "\n"); !strings.Contains(all, "not acted on: key lead-create:8812 was completed by run") ||
		!strings.Contains(all, "parked for review after attempt 1 (permanent error: the destination refused for good)") {
		t.Errorf("the key's events do not say why:\n%s", all)
	}
}

// Abandoning ends the step and the run failed, and cancels what needed the step.
func TestAbandonEndsRunFailed(t *testing.T) {
	b := setup(t)
	s := newSink(t)
	b.register(t, leadFlow(s))
	s.refuse("/crm", "account closed")
	run := b.start(t, "lead-flow", "form-1", map[string]any{"lead": 1})
	b.work(t)
	res, err := b.client.ReviewAbandon(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "dave", Note: "spam submission"})
	if err != nil {
		t.Fatal(err)
	}
	if res.StepState != store.StateFailed || res.RunState != store.StateFailed {
		t.Errorf("abandon result %+v", res)
	}
	steps := b.steps(t, run.ID)
	if steps["crm"].Reason != store.ReasonAbandoned || steps["task"].State != store.StateCancelled {
		t.Errorf("steps after abandon: crm %s/%s task %s", steps["crm"].State, steps["crm"].Reason, steps["task"].State)
	}
	if n := b.work(t); n != 0 || s.counts()["/task"] != 0 {
		t.Errorf("work after abandon ran %d steps, task requests %d", n, s.counts()["/task"])
	}
	entries, err := b.client.Audit(b.ctx, onceflow.AuditQuery{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	wantActed(t, entries, "dave", "spam submission", store.EventReviewAbandoned)
	_, err = b.client.ReviewAbandon(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "dave"})
	if !errors.Is(err, onceflow.ErrNotInReview) {
		t.Errorf("abandon twice: %v", err)
	}
}

// An item whose outcome is unknown needs an explicit decision; every other action is
// refused with a clear error.
func TestOutcomeUnknownNeedsADecision(t *testing.T) {
	newRun := func(t *testing.T) (*bundle, *sink, *onceflow.Run) {
		b := setup(t)
		s := newSink(t)
		w := leadFlow(s)
		w.Steps[0].OnUnknown = onceflow.ReviewUnknown // a destination that cannot be asked
		b.register(t, w)
		s.dropAfterApply("/crm", true)
		run := b.start(t, "lead-flow", "form-5", map[string]any{"lead": 5})
		b.work(t)
		s.dropAfterApply("/crm", false)
		items, err := b.client.ReviewList(b.ctx, onceflow.ReviewFilter{Reason: store.ReasonOutcomeUnknown})
		if err != nil || len(items) != 1 || !items[0].EffectMayExist {
			t.Fatalf("review items: %+v, %v", items, err)
		}
		return b, s, run
	}

	t.Run("Refusals", func(t *testing.T) {
		b, _, run := newRun(t)
		events := len(b.events(t, store.EventListParams{}))
		a := onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "erin"}
		_, errRetry := b.client.ReviewRetry(b.ctx, a)
		_, errResolve := b.client.ReviewResolve(b.ctx, a)
		_, errAbandon := b.client.ReviewAbandon(b.ctx, a)
		_, errReplay := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Step: "crm", Actor: "erin"})
		_, errRunReplay := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Actor: "erin"})
		for name, err := range map[string]error{"retry": errRetry, "resolve": errResolve, "abandon": errAbandon, "replay": errReplay} {
			var re *onceflow.ReviewError
			if !errors.Is(err, onceflow.ErrEffectMayExist) || !errors.As(err, &re) ||
				!strings.Contains(err.Error(), "outcome is unknown") || !strings.Contains(err.Error(), "send-again") || !strings.Contains(err.Error(), "it-happened") {
				t.Errorf("%s of an unknown outcome: %v", name, err)
			}
		}
		if !errors.Is(errRunReplay, onceflow.ErrNothingToReplay) {
			t.Errorf("replay of the run: %v", errRunReplay)
		}
		if n := len(b.events(t, store.EventListParams{})); n != events {
			t.Errorf("refused actions wrote %d events", n-events)
		}
	})
	t.Run("ItHappened", func(t *testing.T) {
		b, s, run := newRun(t)
		if _, err := b.client.ReviewResolve(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "erin", ItHappened: true,
			Note: "the CRM shows the lead", Output: json.RawMessage(`{"id":"crm-5"}`)}); err != nil {
			t.Fatal(err)
		}
		b.work(t)
		if got := s.counts(); got["/crm"] != 1 || s.keyRequests("task:crm-5") != 1 {
			t.Errorf("requests: %v", got)
		}
		if eff, err := b.store.EffectGetByKey(b.ctx, "lead-create:5"); err != nil || eff.State != store.EffectCompleted {
			t.Errorf("ledger: %+v %v", eff, err)
		}
	})
	t.Run("SendAgain", func(t *testing.T) {
		b, s, run := newRun(t)
		res, err := b.client.ReviewRetry(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "erin", SendAgain: true, Note: "the CRM deduplicates"})
		if err != nil || res.StepState != store.StateRetrying {
			t.Fatalf("send again: %+v, %v", res, err)
		}
		b.work(t)
		if n := s.keyRequests("lead-create:5"); n != 2 {
			t.Errorf("requests under lead-create:5: %d, want 2 (the same key sent again)", n)
		}
		if d := s.duplicates(); len(d) != 1 {
			// The sink does not deduplicate: the effect was applied before the connection was
			// cut and again now. Sending again is the operator's explicit bet that the
			// destination deduplicates by the key, which is why it must be chosen.
			t.Errorf("applied: %v", d)
		}
		if st := b.run(t, run.ID).State; st != store.StateCompleted {
			t.Errorf("run %s", st)
		}
	})
}

// A manual retry gives the step a fresh attempt budget: the policy counts again from it.
func TestRetryGivesFreshAttemptBudget(t *testing.T) {
	b := setup(t)
	s := newSink(t)
	w := leadFlow(s)
	w.Steps[0].Retry = onceflow.RetryPolicy{MaxAttempts: 2, Initial: time.Second}
	w.Steps[0].Do = func(context.Context, *onceflow.StepContext) (any, error) {
		return nil, errors.New("503 from the CRM")
	}
	b.register(t, w)
	run := b.start(t, "lead-flow", "form-9", map[string]any{"lead": 9})
	drain := func() {
		for range 10 {
			b.work(t)
			b.clock.Advance(time.Minute)
		}
	}
	drain()
	crm := b.steps(t, run.ID)["crm"]
	if crm.State != store.StateNeedsReview || crm.Reason != store.ReasonAttemptsExhausted || crm.Attempt != 2 {
		t.Fatalf("crm: %s %s attempt %d", crm.State, crm.Reason, crm.Attempt)
	}
	if _, err := b.client.ReviewRetry(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "frank", Note: "CRM maintenance is over"}); err != nil {
		t.Fatal(err)
	}
	drain()
	crm = b.steps(t, run.ID)["crm"]
	if crm.State != store.StateNeedsReview || crm.Attempt != 4 || crm.AttemptBase != 2 {
		t.Fatalf("after a manual retry: %s attempt %d base %d, want needs_review after 2 more attempts", crm.State, crm.Attempt, crm.AttemptBase)
	}
	entries, err := b.client.Audit(b.ctx, onceflow.AuditQuery{RunID: run.ID, Since: b.clock.Now().Add(-15 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var retried, parked string
	for _, e := range entries {
		switch e.Type {
		case store.EventStepRetryPlanned:
			retried = e.Why
		case store.EventStepNeedsReview:
			parked = e.Why
		}
	}
	if !strings.Contains(retried, "attempt 3 failed; error: 503 from the CRM [retryable]; retried") ||
		!strings.Contains(retried, "policy: up to 2 attempts counted after attempt 2 (the last manual retry or replay)") {
		t.Errorf("retry explained as %q", retried)
	}
	if !strings.Contains(parked, "parked for review after attempt 4 (attempts exhausted)") || !strings.Contains(parked, "policy: up to 2 attempts counted after attempt 2") {
		t.Errorf("review explained as %q", parked)
	}
	if all, _ := b.client.Audit(b.ctx, onceflow.AuditQuery{RunID: run.ID}); len(all) <= len(entries) {
		t.Errorf("--since did not narrow the audit: %d of %d events", len(entries), len(all))
	}
}

// Bad requests are refused with typed errors and clear messages, and write nothing.
func TestReviewBadRequests(t *testing.T) {
	b := setup(t)
	s := newSink(t)
	b.register(t, orderFlow(s))
	run := b.start(t, "order-flow", "evt-1", map[string]any{"order_id": 1, "email": "nope"})
	b.work(t)
	events := len(b.events(t, store.EventListParams{}))
	input := string(b.run(t, run.ID).Input)

	cases := []struct {
		name   string
		do     func() error
		target error
		says   string
	}{
		{"unknown run", func() error {
			_, err := b.client.ReviewRetry(b.ctx, onceflow.ReviewAction{RunID: 999, Step: "mail", Actor: "gina"})
			return err
		}, onceflow.ErrNotFound, "run 999 does not exist"},
		{"unknown step", func() error {
			_, err := b.client.ReviewResolve(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "fax", Actor: "gina"})
			return err
		}, onceflow.ErrNotFound, `has no step "fax"`},
		{"step not in review", func() error {
			_, err := b.client.ReviewAbandon(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "crm", Actor: "gina"})
			return err
		}, onceflow.ErrNotInReview, "the step is completed, not in review"},
		{"replay of a step not in review", func() error {
			_, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Step: "chat", Actor: "gina"})
			return err
		}, onceflow.ErrNotInReview, `"chat" is pending, not needs_review`},
		{"no actor", func() error {
			_, err := b.client.ReviewRetry(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "mail"})
			return err
		}, onceflow.ErrInvalidReview, "the actor is required"},
		{"merge patch not JSON", func() error {
			_, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Actor: "gina", MergePatch: json.RawMessage(`{"email":`)})
			return err
		}, onceflow.ErrInvalidPatch, "merge patch: it is not valid JSON"},
		{"merge patch not an object", func() error {
			_, err := b.client.ReviewPreview(b.ctx, onceflow.ReplayRequest{RunID: run.ID, MergePatch: json.RawMessage(`["email"]`)})
			return err
		}, onceflow.ErrInvalidPatch, "must be a JSON object"},
		{"correction removes a required field", func() error {
			_, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Actor: "gina", MergePatch: json.RawMessage(`{"email":null}`)})
			return err
		}, onceflow.ErrInvalidInput, "lacks a required field: email"},
		{"replacement lacks a required field", func() error {
			_, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Actor: "gina", Input: json.RawMessage(`{"email":"a@b.c"}`)})
			return err
		}, onceflow.ErrInvalidInput, "lacks a required field: order_id"},
		{"replacement not an object", func() error {
			_, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Actor: "gina", Input: json.RawMessage(`"x"`)})
			return err
		}, onceflow.ErrInvalidInput, "must be a JSON object"},
		{"patch and replacement", func() error {
			_, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Actor: "gina", Input: json.RawMessage(`{}`), MergePatch: json.RawMessage(`{}`)})
			return err
		}, onceflow.ErrInvalidReview, "not both"},
		{"output not JSON", func() error {
			_, err := b.client.ReviewResolve(b.ctx, onceflow.ReviewAction{RunID: run.ID, Step: "mail", Actor: "gina", Output: json.RawMessage(`{`)})
			return err
		}, onceflow.ErrInvalidReview, "the output is not JSON"},
		{"bulk action unknown", func() error {
			_, err := b.client.ReviewBulk(b.ctx, onceflow.BulkRequest{Action: "delete", Actor: "gina"})
			return err
		}, onceflow.ErrInvalidReview, `"delete" is not retry`},
	}
	for _, tc := range cases {
		err := tc.do()
		if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.target, tc.says)
		}
	}
	if n := len(b.events(t, store.EventListParams{})); n != events {
		t.Errorf("refused requests wrote %d events", n-events)
	}
	if got := string(b.run(t, run.ID).Input); got != input {
		t.Errorf("input changed to %s", got)
	}
	if revs, _ := b.store.RunRevisionList(b.ctx, run.ID); len(revs) != 0 {
		t.Errorf("%d revisions written", len(revs))
	}
	if st := b.steps(t, run.ID)["mail"]; st.State != store.StateNeedsReview {
		t.Errorf("mail is %s", st.State)
	}
}

// The preview predicts reuse, wait, blocked, review and skipped as well as run, and the
// replay then does exactly that.
func TestReplayPreviewMatchesWhatHappens(t *testing.T) {
	b := setup(t)
	s := newSink(t)
	// branch: p (its outcome becomes unknown) → q; r, whose key another run completes; u,
	// whose key another run holds in flight; v, whose condition becomes false; w needs v.
	b.register(t, onceflow.Workflow{
		Name: "branches", Entity: "case:{input.id}", RequiredInput: []string{"id"},
		Steps: []onceflow.Step{
			{ID: "p", EffectKey: "p:{input.id}", Do: send(s, "/p"), OnUnknown: onceflow.ReviewUnknown},
			{ID: "q", Needs: []string{"p"}, EffectKey: "q:{input.id}", Do: send(s, "/q")},
			{ID: "r", EffectKey: "shared:{input.id}", Do: send(s, "/r")},
			{ID: "u", EffectKey: "held:{input.id}", Do: send(s, "/u")},
			{ID: "v", EffectKey: "v:{input.id}", Do: send(s, "/v"), When: func(sc *onceflow.StepContext) (bool, error) {
				var in struct{ Skip bool }
				err := sc.DecodeInput(&in)
				return !in.Skip, err
			}},
			{ID: "w", Needs: []string{"v"}, EffectKey: "w:{input.id}", Do: send(s, "/w")},
			{ID: "x", EffectKey: "x:{input.id}", Do: send(s, "/x")},
		},
	})
	b.register(t, onceflow.Workflow{Name: "other", Steps: []onceflow.Step{
		{ID: "r", EffectKey: "shared:{input.id}", Do: send(s, "/r")},
		{ID: "u", EffectKey: "held:{input.id}", Do: send(s, "/u"), OnUnknown: onceflow.ReviewUnknown},
	}})
	for _, path := range []string{"/r", "/u", "/v", "/x"} {
		s.refuse(path, "down")
	}
	s.dropAfterApply("/p", true)
	run := b.start(t, "branches", "case-1", map[string]any{"id": 1})
	b.work(t)
	steps := b.steps(t, run.ID)
	for name, want := range map[string]store.State{"p": store.StateNeedsReview, "q": store.StatePending, "r": store.StateNeedsReview,
		"u": store.StateNeedsReview, "v": store.StateNeedsReview, "w": store.StatePending, "x": store.StateNeedsReview} {
		if steps[name].State != want {
			t.Fatalf("step %s is %s, want %s", name, steps[name].State, want)
		}
	}
	// Another run completes shared:1 and holds held:1 in flight (its outcome unknown).
	s.refuse("/r", "")
	s.refuse("/u", "")
	s.dropAfterApply("/u", true)
	b.start(t, "other", "o-1", map[string]any{"id": 1})
	b.work(t)
	s.refuse("/x", "")

	req := onceflow.ReplayRequest{RunID: run.ID, MergePatch: json.RawMessage(`{"skip":true}`), Actor: "hana", Note: "v is not wanted after all"}
	plan, err := b.client.ReviewPreview(b.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := "p:review q:blocked r:reuse u:wait v:skipped w:skipped x:run"
	if got := planActions(plan); got != want {
		t.Fatalf("preview %q, want %q", got, want)
	}
	if ps := plan.Step("r"); ps.ByRun == run.ID || ps.ByStep != "r" || !strings.Contains(ps.Why, "from the ledger") {
		t.Errorf("reuse does not name the run that completed the key: %+v", ps)
	}
	if ps := plan.Step("u"); ps.ByRun == run.ID || !strings.Contains(ps.Why, "in flight") {
		t.Errorf("wait does not name the holder: %+v", ps)
	}
	if ps := plan.Step("q"); !strings.Contains(ps.Why, "needs p, which will not run") {
		t.Errorf("blocked: %+v", ps)
	}
	before, keysBefore := b.snapshot(t, run.ID), s.keyCounts()
	if _, err := b.client.ReviewReplay(b.ctx, req); err != nil {
		t.Fatal(err)
	}
	b.work(t)
	b.wantPlanHappened(t, s, plan, before, keysBefore)
	if st := b.run(t, run.ID).State; st != store.StateNeedsReview {
		t.Errorf("run %s, want needs_review (p waits for a decision)", st)
	}
}

// A note naming the run's personal data does not carry it into the audit trail.
func TestReviewNotesAreMasked(t *testing.T) {
	b := setup(t, func(c *onceflow.Config) { c.Redact = onceflow.Redaction{Fields: []string{"email"}} })
	s := newSink(t)
	b.register(t, orderFlow(s))
	run := b.start(t, "order-flow", "evt-7", map[string]any{"order_id": 7, "email": "grace-at-example.com"})
	b.work(t)
	if _, err := b.client.ReviewReplay(b.ctx, onceflow.ReplayRequest{RunID: run.ID, Actor: "ivan", MergePatch: json.RawMessage(`{"email":"grace@example.com"}`),
		Note: "was grace-at-example.com, now grace@example.com"}); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.events(t, store.EventListParams{RunID: run.ID}) {
		if strings.Contains(string(e.Detail), "grace") {
			t.Errorf("%s detail carries the e-mail address: %s", e.Type, e.Detail)
		}
	}
	revs, err := b.store.RunRevisionList(b.ctx, run.ID)
	if err != nil || len(revs) != 1 || strings.Contains(revs[0].Note, "grace") || !strings.Contains(revs[0].Note, "[redacted]") {
		t.Errorf("revision note: %+v %v", revs, err)
	}
}
