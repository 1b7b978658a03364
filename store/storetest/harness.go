package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// base is the suite's clock origin; every test states its times relative to it.
var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// Defaults the harness fills into params left zero.
const (
	defaultWorkflow = "orders"
	defaultOwner    = "w1"
	defaultLeaseFor = 30 * time.Second
	defaultWaitFor  = 10 * time.Second
)

// harness bundles a fresh store with the helpers the tests share.
type harness struct {
	t        *testing.T
	s        store.Store
	ctx      context.Context
	newStore func(t *testing.T) store.Store
}

func newHarness(t *testing.T, newStore func(t *testing.T) store.Store) *harness {
	t.Helper()
	return &harness{t: t, s: newStore(t), ctx: t.Context(), newStore: newStore}
}

// sub runs fn as a parallel subtest with a fresh store of its own.
func (h *harness) sub(name string, fn func(h *harness)) {
	h.t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(newHarness(t, h.newStore))
	})
}

// step returns a StepInsert.
func step(name string, needs ...string) store.StepInsert {
	return store.StepInsert{Name: name, Needs: needs}
}

// insert calls RunInsert, filling defaults (workflow orders, input {}, Now base).
func (h *harness) insert(p store.RunInsertParams) (*store.Run, bool) {
	h.t.Helper()
	if p.Workflow == "" {
		p.Workflow = defaultWorkflow
	}
	if p.Input == nil {
		p.Input = json.RawMessage(`{}`)
	}
	if p.InputHash == "" {
		p.InputHash = "hash-" + p.RunKey
	}
	if p.Actor == "" {
		p.Actor = "test"
	}
	if p.Now.IsZero() {
		p.Now = base
	}
	run, created, err := h.s.RunInsert(h.ctx, p)
	if err != nil {
		h.t.Fatalf("RunInsert(%s, %s): %v", p.Workflow, p.RunKey, err)
	}
	if run == nil {
		h.t.Fatalf("RunInsert(%s, %s) returned a nil run", p.Workflow, p.RunKey)
	}
	return run, created
}

// newRun inserts a run that must be new.
func (h *harness) newRun(p store.RunInsertParams) *store.Run {
	h.t.Helper()
	run, created := h.insert(p)
	if !created {
		h.t.Fatalf("RunInsert(%s, %s): created = false for a new run key", p.Workflow, p.RunKey)
	}
	return run
}

// run inserts a new run of the default workflow with the given key and steps.
func (h *harness) run(key string, steps ...store.StepInsert) *store.Run {
	h.t.Helper()
	return h.newRun(store.RunInsertParams{RunKey: key, Entity: "entity:" + key, Steps: steps})
}

// runWithKeys inserts a new run whose input names the effect keys of some steps (see
// specFromInput): keys maps a step name to its key, and "<step>.fp" to its fingerprint.
func (h *harness) runWithKeys(key string, now time.Time, keys map[string]string, steps ...store.StepInsert) *store.Run {
	h.t.Helper()
	input, err := json.Marshal(keys)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.newRun(store.RunInsertParams{RunKey: key, Entity: "entity:" + key, Input: input, Now: now, Steps: steps})
}

// specFromInput is the Prepare the suite uses: a step whose name is a field of its run's
// input acts under that field's value as key and "<step>.fp" as fingerprint; any other step
// gets a key of its own, keyOf(run, step), and fingerprint "fp-<step>".
func specFromInput(c *store.ClaimCandidate) (store.EffectSpec, error) {
	var in map[string]string
	if len(c.Run.Input) > 0 {
		if err := json.Unmarshal(c.Run.Input, &in); err != nil {
			return store.EffectSpec{}, fmt.Errorf("input: %w", err)
		}
	}
	if k, ok := in[c.Step.Name]; ok {
		return store.EffectSpec{Key: k, Fingerprint: in[c.Step.Name+".fp"]}, nil
	}
	return store.EffectSpec{Key: keyOf(c.Run, c.Step.Name), Fingerprint: "fp-" + c.Step.Name}, nil
}

// keyOf is the effect key specFromInput gives a step not named in its run's input.
func keyOf(run *store.Run, stepName string) string {
	return run.Workflow + "/" + run.RunKey + "/" + stepName
}

// claim calls StepClaim, filling defaults (owner w1 at base, lease 30 s, limit 10, workflow
// orders, specFromInput, wait 10 s).
func (h *harness) claim(p store.StepClaimParams) *store.ClaimResult {
	h.t.Helper()
	res, err := h.s.StepClaim(h.ctx, claimDefaults(p))
	if err != nil {
		h.t.Fatalf("StepClaim: %v", err)
	}
	if res == nil {
		h.t.Fatal("StepClaim returned a nil result")
	}
	return res
}

func claimDefaults(p store.StepClaimParams) store.StepClaimParams {
	if p.Owner == "" {
		p.Owner = defaultOwner
	}
	if p.Now.IsZero() {
		p.Now = base
	}
	if p.LeaseFor == 0 {
		p.LeaseFor = defaultLeaseFor
	}
	if p.Limit == 0 {
		p.Limit = 10
	}
	if p.Workflows == nil {
		p.Workflows = []string{defaultWorkflow}
	}
	if p.Prepare == nil {
		p.Prepare = specFromInput
	}
	if p.WaitFor == 0 {
		p.WaitFor = defaultWaitFor
	}
	return p
}

// claimOne claims at now and requires exactly one step handed out, which it returns.
func (h *harness) claimOne(now time.Time, owner string) *store.ClaimedStep {
	h.t.Helper()
	res := h.claim(store.StepClaimParams{Now: now, Owner: owner, Limit: 1})
	if len(res.Claimed) != 1 {
		h.t.Fatalf("StepClaim at %s: claimed %d steps, want 1 (%+v)", now.Sub(base), len(res.Claimed), res)
	}
	return res.Claimed[0]
}

// wantClaimed checks which steps a claim handed out, by ID and in order, and its counters.
func (h *harness) wantClaimed(res *store.ClaimResult, reused, parked, waiting int, steps ...*store.Step) {
	h.t.Helper()
	var got, want []string
	for _, c := range res.Claimed {
		got = append(got, fmt.Sprintf("run %d step %d %s", c.Step.RunID, c.Step.ID, c.Step.Name))
	}
	for _, s := range steps {
		want = append(want, fmt.Sprintf("run %d step %d %s", s.RunID, s.ID, s.Name))
	}
	if !slices.Equal(got, want) {
		h.t.Errorf("claimed %q, want %q", got, want)
	}
	if res.Reused != reused || res.Parked != parked || res.Waiting != waiting {
		h.t.Errorf("claim result reused/parked/waiting = %d/%d/%d, want %d/%d/%d",
			res.Reused, res.Parked, res.Waiting, reused, parked, waiting)
	}
}

// succeed is the record of a successful attempt of cs at now.
func succeed(cs *store.ClaimedStep, now time.Time, output string) store.StepRecordParams {
	return store.StepRecordParams{
		StepID: cs.Step.ID, Owner: cs.Step.LeaseOwner, Attempt: cs.Step.Attempt, Now: now,
		Outcome: store.OutcomeSuccess, ResponseStatus: 200, ResponseExcerpt: "ok",
		Output: json.RawMessage(output), NextState: store.StateCompleted, Actor: cs.Step.LeaseOwner,
	}
}

// retry is the record of a retryable failure of cs at now, due again at next.
func retry(cs *store.ClaimedStep, now, next time.Time) store.StepRecordParams {
	return store.StepRecordParams{
		StepID: cs.Step.ID, Owner: cs.Step.LeaseOwner, Attempt: cs.Step.Attempt, Now: now,
		Outcome: store.OutcomeRetryable, Error: "503 service unavailable", ResponseStatus: 503,
		NextState: store.StateRetrying, NextAt: next, Reason: store.ReasonRetryableError,
		Detail: map[string]any{"backoff": next.Sub(now).String()},
	}
}

// giveUp is the record of a failed attempt of cs at now that ends in state.
func giveUp(cs *store.ClaimedStep, now time.Time, outcome store.Outcome, state store.State, reason store.Reason) store.StepRecordParams {
	return store.StepRecordParams{
		StepID: cs.Step.ID, Owner: cs.Step.LeaseOwner, Attempt: cs.Step.Attempt, Now: now,
		Outcome: outcome, Error: "destination said no", ResponseStatus: 422,
		NextState: state, Reason: reason,
	}
}

// record calls StepRecord and returns its per-entry errors.
func (h *harness) record(ps ...store.StepRecordParams) []error {
	h.t.Helper()
	errs, err := h.s.StepRecord(h.ctx, ps)
	if err != nil {
		h.t.Fatalf("StepRecord: %v", err)
	}
	if len(errs) != len(ps) {
		h.t.Fatalf("StepRecord returned %d entry errors for %d params", len(errs), len(ps))
	}
	return errs
}

// mustRecord calls StepRecord and requires every entry to apply.
func (h *harness) mustRecord(ps ...store.StepRecordParams) {
	h.t.Helper()
	for i, err := range h.record(ps...) {
		if err != nil {
			h.t.Fatalf("StepRecord entry %d (step %d): %v", i, ps[i].StepID, err)
		}
	}
}

// wantLeaseLost records p and requires ErrLeaseLost for it.
func (h *harness) wantLeaseLost(p store.StepRecordParams) {
	h.t.Helper()
	err := h.record(p)[0]
	if !errors.Is(err, store.ErrLeaseLost) {
		h.t.Fatalf("StepRecord(step %d, owner %q, attempt %d) = %v, want ErrLeaseLost", p.StepID, p.Owner, p.Attempt, err)
	}
}

// steps returns a run's steps by name.
func (h *harness) steps(runID int64) map[string]*store.Step {
	h.t.Helper()
	list, err := h.s.StepListByRun(h.ctx, runID)
	if err != nil {
		h.t.Fatalf("StepListByRun(%d): %v", runID, err)
	}
	m := make(map[string]*store.Step, len(list))
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// step returns one step of a run by name.
func (h *harness) step(runID int64, name string) *store.Step {
	h.t.Helper()
	s, ok := h.steps(runID)[name]
	if !ok {
		h.t.Fatalf("run %d has no step %q", runID, name)
	}
	return s
}

// getRun returns a run.
func (h *harness) getRun(id int64) *store.Run {
	h.t.Helper()
	r, err := h.s.RunGetByID(h.ctx, id)
	if err != nil {
		h.t.Fatalf("RunGetByID(%d): %v", id, err)
	}
	return r
}

// wantRunState checks a run's stored state.
func (h *harness) wantRunState(id int64, want store.State) {
	h.t.Helper()
	if got := h.getRun(id).State; got != want {
		h.t.Errorf("run %d state = %s, want %s", id, got, want)
	}
}

// wantStep checks a stored step's state, attempt and reason.
func (h *harness) wantStep(runID int64, name string, state store.State, attempt int, reason store.Reason) *store.Step {
	h.t.Helper()
	s := h.step(runID, name)
	if s.State != state || s.Attempt != attempt || s.Reason != reason {
		h.t.Errorf("run %d step %s: state/attempt/reason = %s/%d/%q, want %s/%d/%q",
			runID, name, s.State, s.Attempt, s.Reason, state, attempt, reason)
	}
	return s
}

// attempts returns a run's attempts.
func (h *harness) attempts(runID int64) []*store.Attempt {
	h.t.Helper()
	list, err := h.s.AttemptListByRun(h.ctx, runID)
	if err != nil {
		h.t.Fatalf("AttemptListByRun(%d): %v", runID, err)
	}
	return list
}

// effect returns the ledger row of key, which must exist.
func (h *harness) effect(key string) *store.Effect {
	h.t.Helper()
	e, err := h.s.EffectGetByKey(h.ctx, key)
	if err != nil {
		h.t.Fatalf("EffectGetByKey(%q): %v", key, err)
	}
	return e
}

// wantEffect checks the ledger row of key: its state and the step that holds it.
func (h *harness) wantEffect(key string, state store.EffectState, holder *store.Step) *store.Effect {
	h.t.Helper()
	e := h.effect(key)
	if e.Key != key || e.State != state || e.StepID != holder.ID || e.RunID != holder.RunID || e.StepName != holder.Name || e.Workflow != holder.Workflow {
		h.t.Errorf("effect %q = key %q state %s held by run %d step %d %s (%s), want state %s held by run %d step %d %s (%s)",
			key, e.Key, e.State, e.RunID, e.StepID, e.StepName, e.Workflow, state, holder.RunID, holder.ID, holder.Name, holder.Workflow)
	}
	return e
}

// wantNoEffect requires key to be free.
func (h *harness) wantNoEffect(key string) {
	h.t.Helper()
	e, err := h.s.EffectGetByKey(h.ctx, key)
	if !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("EffectGetByKey(%q) = %+v, %v; want ErrNotFound (key free)", key, e, err)
	}
}

// events lists events.
func (h *harness) events(p store.EventListParams) []*store.Event {
	h.t.Helper()
	list, err := h.s.EventList(h.ctx, p)
	if err != nil {
		h.t.Fatalf("EventList(%+v): %v", p, err)
	}
	return list
}

// runEvents lists a run's events.
func (h *harness) runEvents(runID int64) []*store.Event {
	h.t.Helper()
	return h.events(store.EventListParams{RunID: runID})
}

// stepEvents lists the events about one step.
func (h *harness) stepEvents(s *store.Step) []*store.Event {
	h.t.Helper()
	var out []*store.Event
	for _, e := range h.runEvents(s.RunID) {
		if e.StepID == s.ID {
			out = append(out, e)
		}
	}
	return out
}

// types returns the events' types in order.
func types(evs []*store.Event) []store.EventType {
	out := make([]store.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// ofType returns the events of one type.
func ofType(evs []*store.Event, typ store.EventType) []*store.Event {
	var out []*store.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// wantTypes checks the types of evs, in order. A different number of events ends the case
// (callers go on to index evs by position); the same number with other types fails it.
func (h *harness) wantTypes(what string, evs []*store.Event, want ...store.EventType) {
	h.t.Helper()
	got := types(evs)
	if len(got) != len(want) {
		h.t.Fatalf("%s: %d events, want %d:\n got %q\nwant %q", what, len(got), len(want), got, want)
	}
	if !slices.Equal(got, want) {
		h.t.Errorf("%s: event types\n got %q\nwant %q", what, got, want)
	}
}

// last returns the last n events of evs, ending the case when there are fewer.
func (h *harness) last(what string, evs []*store.Event, n int) []*store.Event {
	h.t.Helper()
	if len(evs) < n {
		h.t.Fatalf("%s: %d events %q, want at least %d", what, len(evs), types(evs), n)
	}
	return evs[len(evs)-n:]
}

// only returns the single event of typ in evs.
func (h *harness) only(evs []*store.Event, typ store.EventType) *store.Event {
	h.t.Helper()
	got := ofType(evs, typ)
	if len(got) != 1 {
		h.t.Fatalf("%d events of type %s, want 1 (all: %q)", len(got), typ, types(evs))
	}
	return got[0]
}

// wantStepEvent checks that e describes step s of run at the given attempt and key.
func (h *harness) wantStepEvent(e *store.Event, run *store.Run, s *store.Step, key string, attempt int) {
	h.t.Helper()
	if e.RunID != run.ID || e.Workflow != run.Workflow || e.Entity != run.Entity || e.StepID != s.ID ||
		e.StepName != s.Name || e.EffectKey != key || e.Attempt != attempt {
		h.t.Errorf("event %s = run %d (%s, %s) step %d %s key %q attempt %d; want run %d (%s, %s) step %d %s key %q attempt %d",
			e.Type, e.RunID, e.Workflow, e.Entity, e.StepID, e.StepName, e.EffectKey, e.Attempt,
			run.ID, run.Workflow, run.Entity, s.ID, s.Name, key, attempt)
	}
}

// detailOf decodes an event's detail object, keeping numbers as json.Number.
func (h *harness) detailOf(e *store.Event) map[string]any {
	h.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(e.Detail))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		h.t.Fatalf("event %d %s: detail %s is not a JSON object: %v", e.ID, e.Type, e.Detail, err)
	}
	return m
}

// wantJSON compares two JSON documents by value.
func (h *harness) wantJSON(what string, got json.RawMessage, want string) {
	h.t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		h.t.Errorf("%s: %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		h.t.Fatalf("%s: want %q is not JSON: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		h.t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// wantTime compares instants.
func (h *harness) wantTime(what string, got, want time.Time) {
	h.t.Helper()
	if !got.Equal(want) {
		h.t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// wantEqual compares comparable values.
func wantEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
