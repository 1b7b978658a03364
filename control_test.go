package onceflow_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// A cancel while a step runs: the waiting steps are cancelled at once and never run; the
// running attempt finishes, is recorded and its effect kept in the ledger; the run is
// cancelled, and the audit trail names the actor and the note.
func TestCancelRunWhileAStepRuns(t *testing.T) {
	b := setup(t)
	var calls atomic.Int32
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer dest.Close()
	started, release := make(chan struct{}), make(chan struct{})
	b.register(t, onceflow.Workflow{Name: "order", Entity: "order:{input.id}", Steps: []onceflow.Step{
		{ID: "charge", EffectKey: "charge:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			close(started)
			<-release
			return map[string]string{"charge": "ch_1"}, nil
		}},
		{ID: "receipt", Needs: []string{"charge"}, EffectKey: "receipt:{input.id}", Do: noop},
		{ID: "crm", EffectKey: "crm:{input.id}", Retry: onceflow.RetryPolicy{Initial: time.Minute},
			Do: func(ctx context.Context, _ *onceflow.StepContext) (any, error) {
				resp, err := http.Get(dest.URL)
				if err == nil {
					resp.Body.Close()
				}
				return nil, errors.New("crm unavailable")
			}},
	}})
	r := b.start(t, "order", "k1", map[string]any{"id": 1001})
	worked := make(chan error, 1)
	go func() { _, err := b.client.Work(b.ctx); worked <- err }()
	waitStarted(t, "charge", started, worked) // charge runs; crm fails once and waits a minute
	for deadline := time.Now().Add(10 * time.Second); b.steps(t, r.ID)["crm"].State != store.StateRetrying; {
		if time.Now().After(deadline) {
			t.Fatalf("crm never recorded its failure: %+v", b.steps(t, r.ID)["crm"])
		}
		time.Sleep(time.Millisecond) // polling an observable condition
	}

	res, err := b.client.CancelRun(b.ctx, r.ID, "ops:ada", "customer withdrew the order")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Cancelled)
	if !slices.Equal(res.Cancelled, []string{"crm", "receipt"}) || !slices.Equal(res.Running, []string{"charge"}) || res.Run.State != onceflow.StateCancelled {
		t.Fatalf("cancel = %+v (run %s)", res, res.Run.State)
	}
	close(release)
	if err := <-worked; err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	if n := b.work(t); n != 0 {
		t.Errorf("%d steps executed after the cancel", n)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the crm received %d requests, want 1 (none after the cancel)", n)
	}
	steps := b.steps(t, r.ID)
	for _, n := range []string{"charge", "receipt", "crm"} {
		if steps[n].State != store.StateCancelled {
			t.Errorf("step %s: %s", n, steps[n].State)
		}
	}
	if eff, err := b.store.EffectGetByKey(b.ctx, "charge:1001"); err != nil || eff.State != store.EffectCompleted || string(eff.Result) != `{"charge":"ch_1"}` {
		t.Errorf("the running charge's effect: %+v, %v", eff, err)
	}
	if _, err := b.store.EffectGetByKey(b.ctx, "crm:1001"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused crm key is still held: %v", err)
	}
	if got := b.run(t, r.ID).State; got != store.StateCancelled {
		t.Errorf("run state %s", got)
	}
	var cancelled *store.Event
	for _, e := range b.events(t, store.EventListParams{RunID: r.ID}) {
		if e.Type == store.EventRunCancelled {
			cancelled = e
		}
	}
	if cancelled == nil || cancelled.Actor != "ops:ada" || !strings.Contains(string(cancelled.Detail), `"note":"customer withdrew the order"`) {
		t.Errorf("run.cancelled event: %+v", cancelled)
	}
	if _, err := b.client.CancelRun(b.ctx, r.ID, "ops:ada", ""); !errors.Is(err, onceflow.ErrRunFinished) {
		t.Errorf("second cancel: %v", err)
	}
	if _, err := b.client.CancelRun(b.ctx, 999, "ops:ada", ""); !errors.Is(err, onceflow.ErrNotFound) {
		t.Errorf("cancel of an unknown run: %v", err)
	}
}

// A paused workflow accepts runs but its steps are not claimed, by this client or by one
// opened later on the same database (the pause is durable), until it is resumed; other
// workflows go on.
func TestPauseWorkflowIsDurable(t *testing.T) {
	b := setup(t)
	var ran []string
	do := func(_ context.Context, sc *onceflow.StepContext) (any, error) {
		ran = append(ran, sc.Workflow)
		return nil, nil
	}
	wfs := []onceflow.Workflow{
		{Name: "leads", Steps: []onceflow.Step{{ID: "s", EffectKey: "lead:{input.id}", Do: do}}},
		{Name: "orders", Steps: []onceflow.Step{{ID: "s", EffectKey: "order:{input.id}", Do: do}}},
	}
	for _, w := range wfs {
		b.register(t, w)
	}
	if changed, err := b.client.PauseWorkflow(b.ctx, "leads", "ops:ada", "the CRM is down"); err != nil || !changed {
		t.Fatalf("pause: %v %v", changed, err)
	}
	lead := b.start(t, "leads", "l1", map[string]any{"id": 1})
	b.start(t, "orders", "o1", map[string]any{"id": 1})
	b.work(t)
	if !slices.Equal(ran, []string{"orders"}) || b.steps(t, lead.ID)["s"].State != store.StatePending {
		t.Fatalf("ran %v while leads was paused", ran)
	}

	// Another client on the same file, as after a restart: still paused.
	st2, err := sqlite.Open(b.ctx, b.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	c2, err := onceflow.New(onceflow.Config{Store: st2, WorkerID: "second", Clock: b.clock.Now, ClockSync: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wfs {
		if err := c2.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c2.Work(b.ctx); err != nil || n != 0 {
		t.Fatalf("the second client executed %d steps of a paused workflow (%v)", n, err)
	}
	list, err := c2.PausedWorkflows(b.ctx)
	if err != nil || len(list) != 1 || list[0].Workflow != "leads" || list[0].Actor != "ops:ada" || list[0].Note != "the CRM is down" {
		t.Fatalf("PausedWorkflows = %+v, %v", list, err)
	}
	if changed, err := c2.ResumeWorkflow(b.ctx, "leads", "ops:bob", "the CRM is back"); err != nil || !changed {
		t.Fatalf("resume: %v %v", changed, err)
	}
	if n, err := c2.Work(b.ctx); err != nil || n != 1 {
		t.Fatalf("after the resume: %d steps, %v", n, err)
	}
	if _, err := b.client.PauseWorkflow(b.ctx, "not a name!", "ops", ""); !errors.Is(err, onceflow.ErrInvalidWorkflow) {
		t.Errorf("pause of a bad name: %v", err)
	}
}

// A name that is not registered, has no run and is not paused — a typo — is neither
// paused nor resumed: ErrWorkflowNotFound, and nothing is stored. A name known by its runs
// or by its pause alone is acted on, registered here or not.
func TestPauseUnknownWorkflow(t *testing.T) {
	b := setup(t)
	for _, do := range []func(context.Context, string, string, string) (bool, error){b.client.PauseWorkflow, b.client.ResumeWorkflow} {
		if changed, err := do(b.ctx, "does-not-exist", "ops", ""); !errors.Is(err, onceflow.ErrWorkflowNotFound) || changed {
			t.Fatalf("pause or resume of an unknown workflow: %v %v", changed, err)
		}
	}
	if list, err := b.client.PausedWorkflows(b.ctx); err != nil || len(list) != 0 {
		t.Fatalf("paused after refusals: %v %v", list, err)
	}
	// Runs of a workflow this client does not register (another process does).
	if _, _, err := b.store.RunInsert(b.ctx, store.RunInsertParams{Workflow: "elsewhere", RunKey: "k", Input: []byte(`{}`), InputHash: "h",
		Steps: []store.StepInsert{{Name: "s"}}, Actor: "test", Now: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if changed, err := b.client.PauseWorkflow(b.ctx, "elsewhere", "ops", ""); err != nil || !changed {
		t.Fatalf("pause of a workflow with runs: %v %v", changed, err)
	}
	// Known by its pause alone: a second client, without its runs' workflow registered.
	c2, err := onceflow.New(onceflow.Config{Store: b.store})
	if err != nil {
		t.Fatal(err)
	}
	b.register(t, onceflow.Workflow{Name: "fresh", Steps: []onceflow.Step{{ID: "s", Do: noop}}})
	if changed, err := b.client.PauseWorkflow(b.ctx, "fresh", "ops", ""); err != nil || !changed {
		t.Fatalf("pause of a registered workflow without runs: %v %v", changed, err)
	}
	if changed, err := c2.ResumeWorkflow(b.ctx, "fresh", "ops", ""); err != nil || !changed {
		t.Fatalf("resume of a paused workflow the client does not know: %v %v", changed, err)
	}
}
