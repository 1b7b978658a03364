package onceflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// sink is a counting HTTP destination: it counts requests per path and per
// Idempotency-Key, applies each key's effect once, and refuses or drops requests as the
// test decides.
type sink struct {
	*httptest.Server
	mu       sync.Mutex
	byPath   map[string]int
	byKey    map[string]int
	applied  map[string]int
	refusals map[string]string // path → message of a 422 while set
	drop     map[string]bool   // path → apply, then cut the connection
}

func newSink(t *testing.T) *sink {
	t.Helper()
	s := &sink{byPath: map[string]int{}, byKey: map[string]int{}, applied: map[string]int{}, refusals: map[string]string{}, drop: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.byPath[r.URL.Path]++
		s.byKey[key]++
		msg, refuse := s.refusals[r.URL.Path]
		if refuse == false && r.URL.Path == "/mail" {
			if email, _ := body["email"].(string); !strings.Contains(email, "@") {
				msg, refuse = fmt.Sprintf("mailbox %q does not exist", email), true
			}
		}
		drop := s.drop[r.URL.Path]
		if !refuse {
			s.applied[key]++
		}
		s.mu.Unlock()
		switch {
		case refuse:
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"error":%q}`, msg)
		case drop:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		default:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q}`, strings.TrimPrefix(r.URL.Path, "/")+"-"+key)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) refuse(path, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg == "" {
		delete(s.refusals, path)
		return
	}
	s.refusals[path] = msg
}

func (s *sink) dropAfterApply(path string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop[path] = on
}

// counts returns the requests per path.
func (s *sink) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.byPath {
		out[k] = v
	}
	return out
}

func (s *sink) keyRequests(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

func (s *sink) duplicates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, n := range s.applied {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s applied %d times", k, n))
		}
	}
	return out
}

// send is a step that posts the run's email and order to path with the effect key as
// Idempotency-Key: 5xx are retried, other 4xx are permanent (status and excerpt kept), a
// cut connection leaves the outcome unknown.
func send(s *sink, path string) onceflow.StepFunc {
	return func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
		var in map[string]any
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		body, _ := json.Marshal(map[string]any{"email": in["email"], "order": in["order_id"]})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, bytes.NewReader(body))
		if err != nil {
			return nil, onceflow.PermanentError(err)
		}
		req.Header.Set("Idempotency-Key", sc.EffectKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, onceflow.UnknownOutcomeError(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		switch {
		case resp.StatusCode >= 500:
			return nil, &onceflow.StepError{Class: onceflow.Retryable, ResponseStatus: resp.StatusCode, ResponseExcerpt: buf.String(),
				Err: fmt.Errorf("%s answered %d", path, resp.StatusCode)}
		case resp.StatusCode >= 400:
			return nil, &onceflow.StepError{Class: onceflow.Permanent, ResponseStatus: resp.StatusCode, ResponseExcerpt: buf.String(),
				Err: fmt.Errorf("%s refused: %d", path, resp.StatusCode)}
		}
		sc.RecordResponse(resp.StatusCode, buf.String())
		return json.RawMessage(buf.Bytes()), nil
	}
}

// orderFlow is crm → invoice → mail → chat; the mail destination refuses an e-mail
// address without '@' for good.
func orderFlow(s *sink) onceflow.Workflow {
	return onceflow.Workflow{
		Name: "order-flow", Entity: "order:{input.order_id}", RequiredInput: []string{"order_id", "email"},
		Steps: []onceflow.Step{
			{ID: "crm", EffectKey: "crm:{input.order_id}", Do: send(s, "/crm")},
			{ID: "invoice", Needs: []string{"crm"}, EffectKey: "invoice:{input.order_id}", Do: send(s, "/invoice")},
			{ID: "mail", Needs: []string{"invoice"}, EffectKey: "mail:{input.order_id}", Do: send(s, "/mail")},
			{ID: "chat", Needs: []string{"mail"}, EffectKey: "chat:{input.order_id}", Do: send(s, "/chat")},
		},
	}
}

// snapshot is a run's steps by name, to compare a plan with what happened.
func (b *bundle) snapshot(t *testing.T, runID int64) map[string]store.Step {
	t.Helper()
	out := map[string]store.Step{}
	for name, st := range b.steps(t, runID) {
		out[name] = *st
	}
	return out
}

// wantPlanHappened checks that what a replay did, between before and now, is what its
// plan said: skip, kept and reuse sent nothing; run acted exactly once, under the planned
// key; blocked and wait left the step pending; review left it in review; skipped
// skipped it.
func (b *bundle) wantPlanHappened(t *testing.T, s *sink, plan *onceflow.ReplayPlan, before map[string]store.Step, keyRequestsBefore map[string]int) {
	t.Helper()
	after := b.snapshot(t, plan.RunID)
	for _, ps := range plan.Steps {
		was, now := before[ps.Step], after[ps.Step]
		sent := s.keyRequests(now.EffectKey) - keyRequestsBefore[now.EffectKey]
		what := fmt.Sprintf("run %d step %s planned %s (%s)", plan.RunID, ps.Step, ps.Action, ps.Why)
		switch ps.Action {
		case onceflow.ReplaySkip, onceflow.ReplayKept:
			if now.State != store.StateCompleted || now.Attempt != was.Attempt || !now.UpdatedAt.Equal(was.UpdatedAt) || sent != 0 {
				t.Errorf("%s: now %s attempt %d (was %d), %d requests sent", what, now.State, now.Attempt, was.Attempt, sent)
			}
		case onceflow.ReplayReuse:
			if now.State != store.StateCompleted || now.Reason != "effect_reused" || now.Attempt != was.Attempt || sent != 0 {
				t.Errorf("%s: now %s reason %s attempt %d (was %d), %d requests sent", what, now.State, now.Reason, now.Attempt, was.Attempt, sent)
			}
		case onceflow.ReplayRun:
			if now.State != store.StateCompleted || now.Attempt != was.Attempt+1 || sent != 1 {
				t.Errorf("%s: now %s attempt %d (was %d), %d requests sent, want completed after one more attempt and one request", what, now.State, now.Attempt, was.Attempt, sent)
			}
			if ps.EffectKey != "" && ps.EffectKey != now.EffectKey {
				t.Errorf("%s: acted under key %q, planned %q", what, now.EffectKey, ps.EffectKey)
			}
		case onceflow.ReplayWait, onceflow.ReplayBlocked:
			if now.State != store.StatePending || now.Attempt != was.Attempt || sent != 0 {
				t.Errorf("%s: now %s attempt %d (was %d), %d requests sent, want still pending", what, now.State, now.Attempt, was.Attempt, sent)
			}
		case onceflow.ReplayReview:
			if now.State != store.StateNeedsReview || sent != 0 {
				t.Errorf("%s: now %s, %d requests sent, want needs_review", what, now.State, sent)
			}
		case onceflow.ReplaySkipped:
			if now.State != store.StateSkipped || sent != 0 {
				t.Errorf("%s: now %s, %d requests sent, want skipped", what, now.State, sent)
			}
		default:
			t.Errorf("%s: unknown action", what)
		}
	}
}

func (s *sink) keyCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.byKey {
		out[k] = v
	}
	return out
}

func planActions(p *onceflow.ReplayPlan) string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Step+":"+string(s.Action))
	}
	return strings.Join(out, " ")
}

// A run that failed at step 3 of 4 is corrected and replayed: steps 1–2 are not repeated
// (not one request), steps 3–4 run once, and the preview said exactly that beforehand.
func TestCorrectAndReplay(t *testing.T) {
	b := setup(t)
	s := newSink(t)
	b.register(t, orderFlow(s))
	run := b.start(t, "order-flow", "evt-1001", map[string]any{"order_id": 1001, "email": "ada-at-example.com"})
	b.work(t)
	if got := s.counts(); got["/crm"] != 1 || got["/invoice"] != 1 || got["/mail"] != 1 || got["/chat"] != 0 {
		t.Fatalf("requests before the replay: %v", got)
	}
	if r := b.run(t, run.ID); r.State != store.StateNeedsReview {
		t.Fatalf("run state %s, want needs_review", r.State)
	}

	// The review queue names the item and why.
	b.clock.Advance(2 * time.Hour)
	items, err := b.client.ReviewList(b.ctx, onceflow.ReviewFilter{Workflow: "order-flow", Reason: store.ReasonPermanentError, OlderThan: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 {
		t.Fatalf("%d review items, want 1", len(items))
	}
	it := items[0]
	if it.RunID != run.ID || it.Step != "mail" || it.Entity != "order:1001" || it.Attempts != 1 || it.ResponseStatus != 422 ||
		!strings.Contains(it.ResponseExcerpt, "does not exist") || it.LastError != "/mail refused: 422" || it.Age != 2*time.Hour || it.EffectMayExist {
		t.Errorf("review item = %+v", it)
	}
	if items, _ := b.client.ReviewList(b.ctx, onceflow.ReviewFilter{OlderThan: 3 * time.Hour}); len(items) != 0 {
		t.Errorf("items older than 3h: %d, want 0", len(items))
	}

	// The preview, before anything happens.
	events := len(b.events(t, store.EventListParams{}))
	req := onceflow.ReplayRequest{RunID: run.ID, Step: "mail", MergePatch: json.RawMessage(`{"email":"ada@example.com"}`), Actor: "alice", Note: "typo in the address, confirmed by phone"}
	plan, err := b.client.ReviewPreview(b.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := planActions(plan), "crm:kept invoice:kept mail:run chat:run"; got != want {
		t.Fatalf("preview %q, want %q", got, want)
	}
	if ps := plan.Step("crm"); ps.ByRun != run.ID || ps.ByStep != "crm" || ps.At.IsZero() || ps.EffectKey != "crm:1001" {
		t.Errorf("preview of crm does not say who completed it and when: %+v", ps)
	}
	if ps := plan.Step("chat"); len(ps.After) != 1 || ps.After[0] != "mail" || ps.EffectKey != "chat:1001" {
		t.Errorf("preview of chat: %+v", ps)
	}
	if !plan.Corrected || string(plan.Diff) != `{"email":"ada@example.com"}` || plan.Entity != "order:1001" {
		t.Errorf("preview correction: corrected %v diff %s entity %s", plan.Corrected, plan.Diff, plan.Entity)
	}
	if n := len(b.events(t, store.EventListParams{})); n != events {
		t.Fatalf("the preview wrote %d events", n-events)
	}
	if got := string(b.run(t, run.ID).Input); !strings.Contains(got, "ada-at-example.com") {
		t.Fatalf("the preview changed the input: %s", got)
	}

	before, keysBefore := b.snapshot(t, run.ID), s.keyCounts()
	res, err := b.client.ReviewReplay(b.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 1 || planActions(res.Plan) != planActions(plan) || len(res.Reset) != 1 || res.Reset[0] != "mail" {
		t.Fatalf("replay result: revision %d plan %q reset %v", res.Revision, planActions(res.Plan), res.Reset)
	}
	b.work(t)
	if got := s.counts(); got["/crm"] != 1 || got["/invoice"] != 1 || got["/mail"] != 2 || got["/chat"] != 1 {
		t.Errorf("requests after the replay: %v, want crm 1, invoice 1 (not repeated), mail 2, chat 1", got)
	}
	b.wantPlanHappened(t, s, plan, before, keysBefore)
	if d := s.duplicates(); len(d) > 0 {
		t.Errorf("business actions carried out twice: %v", d)
	}
	if r := b.run(t, run.ID); r.State != store.StateCompleted || !strings.Contains(string(r.Input), "ada@example.com") {
		t.Errorf("run after the replay: %s, input %s", r.State, r.Input)
	}
	revs, err := b.store.RunRevisionList(b.ctx, run.ID)
	if err != nil || len(revs) != 1 || revs[0].Actor != "alice" || string(revs[0].Diff) != `{"email":"ada@example.com"}` {
		t.Errorf("revisions: %+v, %v", revs, err)
	}

	// The audit trail has the correction and the replay, by alice, with the note.
	entries, err := b.client.Audit(b.ctx, onceflow.AuditQuery{Entity: "order:1001"})
	if err != nil {
		t.Fatal(err)
	}
	wantActed(t, entries, "alice", "typo in the address", store.EventRunInputCorrected, store.EventReviewReplayed)
}

// wantActed checks that each of types appears in entries, by actor, explained with the
// actor's name and note.
func wantActed(t *testing.T, entries []*onceflow.AuditEntry, actor, note string, types ...onceflow.EventType) {
	t.Helper()
	for _, typ := range types {
		found := false
		for _, e := range entries {
			if e.Type != typ {
				continue
			}
			found = true
			if e.Actor != actor || !strings.Contains(e.Why, actor) || !strings.Contains(e.Why, note) {
				t.Errorf("%s: actor %q, why %q; want %s and the note %q", typ, e.Actor, e.Why, actor, note)
			}
		}
		if !found {
			t.Errorf("no %s event in the audit answer", typ)
		}
	}
}
