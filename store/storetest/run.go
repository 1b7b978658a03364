package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

var migrateTests = []subtest{
	{"Idempotent", testMigrateIdempotent},
}

var runTests = []subtest{
	{"InsertCreatesRunAndSteps", testRunInsertCreates},
	{"InsertDeduplicates", testRunInsertDeduplicates},
	{"InsertConcurrentSameKey", testRunInsertConcurrent},
	{"GetByIDUnknown", testRunGetByIDUnknown},
	{"ListFilters", testRunListFilters},
}

func testMigrateIdempotent(h *harness) {
	for i := range 2 {
		if err := h.s.Migrate(h.ctx); err != nil {
			h.t.Fatalf("Migrate call %d on a migrated store: %v", i+1, err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = h.s.Migrate(h.ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		h.t.Fatalf("concurrent Migrate: %v", err)
	}
	run := h.run("k1", step("a"))
	wantEqual(h.t, "run state after migrating again", run.State, store.StatePending)
}

func testRunInsertCreates(h *harness) {
	p := store.RunInsertParams{
		Workflow: "leads", RunKey: "sub-1", Entity: "lead:8812", Input: json.RawMessage(`{"email": "a@example.com"}`),
		InputHash: "h1", Actor: "api", Now: base,
		Steps: []store.StepInsert{step("a"), step("b", "a"), step("c", "a", "b")},
	}
	run := h.newRun(p)
	if run.ID <= 0 {
		h.t.Fatalf("run ID = %d, want > 0", run.ID)
	}
	check := func(what string, r *store.Run) {
		h.t.Helper()
		if r.ID != run.ID || r.Workflow != "leads" || r.RunKey != "sub-1" || r.Entity != "lead:8812" ||
			r.InputHash != "h1" || r.State != store.StatePending {
			h.t.Errorf("%s = %+v, want run %d leads/sub-1 lead:8812 h1 pending", what, r, run.ID)
		}
		h.wantJSON(what+" input", r.Input, `{"email": "a@example.com"}`)
		h.wantTime(what+" CreatedAt", r.CreatedAt, base)
		h.wantTime(what+" UpdatedAt", r.UpdatedAt, base)
	}
	check("inserted run", run)
	check("RunGetByID", h.getRun(run.ID))

	list, err := h.s.StepListByRun(h.ctx, run.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(list) != 3 {
		h.t.Fatalf("StepListByRun: %d steps, want 3", len(list))
	}
	for i, want := range p.Steps {
		s := list[i]
		if s.Name != want.Name || !slices.Equal(s.Needs, want.Needs) {
			h.t.Errorf("step %d = %s needs %q, want %s needs %q (insertion order)", i, s.Name, s.Needs, want.Name, want.Needs)
		}
		if s.ID <= 0 || s.RunID != run.ID || s.Workflow != "leads" || s.State != store.StatePending ||
			s.Waiting != len(want.Needs) || s.Attempt != 0 || s.EffectKey != "" || s.LeaseOwner != "" || s.LastOutcome != "" {
			h.t.Errorf("step %s = %+v, want pending in run %d with waiting %d and no attempt, key or lease", s.Name, s, run.ID, len(want.Needs))
		}
		h.wantTime("step "+s.Name+" CreatedAt", s.CreatedAt, base)
	}
	h.wantTime("NextAt of a step without needs", list[0].NextAt, base)

	evs := h.runEvents(run.ID)
	h.wantTypes("new run", evs, store.EventRunCreated)
	if e := evs[0]; e.RunID != run.ID || e.Workflow != "leads" || e.Entity != "lead:8812" || e.Actor != "api" {
		h.t.Errorf("run.created = %+v, want run %d leads lead:8812 by api", e, run.ID)
	}
}

func testRunInsertDeduplicates(h *harness) {
	first := h.newRun(store.RunInsertParams{RunKey: "k", Entity: "order:1", InputHash: "h1", Steps: []store.StepInsert{step("a"), step("b", "a")}})

	again, created := h.insert(store.RunInsertParams{RunKey: "k", Entity: "order:1", Input: json.RawMessage(`{"other": true}`),
		InputHash: "h2", Now: at(time.Minute), Steps: []store.StepInsert{step("x")}})
	if created {
		h.t.Fatal("second RunInsert with the same key: created = true")
	}
	if again.ID != first.ID || again.InputHash != "h1" || again.RunKey != "k" {
		h.t.Errorf("second RunInsert returned run %d hash %s, want the first run %d with hash h1", again.ID, again.InputHash, first.ID)
	}
	h.wantJSON("deduplicated run input", again.Input, `{}`)
	if got := h.steps(first.ID); len(got) != 2 || got["a"] == nil || got["b"] == nil {
		h.t.Errorf("steps after a deduplicated insert = %d (%v), want the first insert's a and b", len(got), got)
	}
	evs := h.runEvents(first.ID)
	h.wantTypes("deduplicated run", evs, store.EventRunCreated, store.EventRunDeduplicated)
	if e := evs[1]; e.RunID != first.ID || e.Workflow != defaultWorkflow || e.Entity != "order:1" {
		h.t.Errorf("run.deduplicated = %+v, want run %d %s order:1", e, first.ID, defaultWorkflow)
	}

	other := h.newRun(store.RunInsertParams{Workflow: "leads", RunKey: "k", Steps: []store.StepInsert{step("a")}})
	if other.ID == first.ID {
		h.t.Errorf("same run key in another workflow returned run %d, want a new run", other.ID)
	}
}

func testRunInsertConcurrent(h *harness) {
	const n = 20
	type result struct {
		id      int64
		created bool
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			run, created, err := h.s.RunInsert(h.ctx, store.RunInsertParams{
				Workflow: defaultWorkflow, RunKey: "same", Input: json.RawMessage(`{}`), InputHash: "h",
				Actor: fmt.Sprintf("caller-%d", i), Now: base, Steps: []store.StepInsert{step("a"), step("b", "a")},
			})
			if err == nil {
				results[i] = result{id: run.ID, created: created}
			} else {
				results[i] = result{err: err}
			}
		})
	}
	wg.Wait()
	var creators int
	for i, r := range results {
		if r.err != nil {
			h.t.Fatalf("RunInsert %d: %v", i, r.err)
		}
		if r.created {
			creators++
		}
		if r.id != results[0].id {
			h.t.Errorf("RunInsert %d returned run %d, RunInsert 0 returned run %d", i, r.id, results[0].id)
		}
	}
	wantEqual(h.t, "inserts with created=true", creators, 1)
	wantEqual(h.t, "steps of the run", len(h.steps(results[0].id)), 2)
	evs := h.runEvents(results[0].id)
	wantEqual(h.t, "run.created events", len(ofType(evs, store.EventRunCreated)), 1)
	wantEqual(h.t, "run.deduplicated events", len(ofType(evs, store.EventRunDeduplicated)), n-1)
	runs, err := h.s.RunList(h.ctx, store.RunListParams{})
	if err != nil {
		h.t.Fatal(err)
	}
	wantEqual(h.t, "runs", len(runs), 1)
}

func testRunGetByIDUnknown(h *harness) {
	run := h.run("k", step("a"))
	for _, id := range []int64{run.ID + 1000, 0, -1} {
		r, err := h.s.RunGetByID(h.ctx, id)
		if !errors.Is(err, store.ErrNotFound) {
			h.t.Errorf("RunGetByID(%d) = %+v, %v; want ErrNotFound", id, r, err)
		}
	}
}

func testRunListFilters(h *harness) {
	// Inserted a second apart, so their steps fall due in this order.
	specs := []struct{ workflow, key, entity string }{
		{"orders", "k1", "order:1"},
		{"orders", "k2", "order:2"},
		{"leads", "k1", "lead:1"},
		{"orders", "k3", "order:1"},
		{"leads", "k2", "lead:2"},
	}
	runs := make([]*store.Run, len(specs))
	for i, sp := range specs {
		runs[i] = h.newRun(store.RunInsertParams{Workflow: sp.workflow, RunKey: sp.key, Entity: sp.entity,
			Now: at(time.Duration(i) * time.Second), Steps: []store.StepInsert{step("a")}})
	}
	// The oldest due step is runs[0]'s: claiming one makes that run processing.
	res := h.claim(store.StepClaimParams{Now: at(time.Minute), Limit: 1, Workflows: []string{"orders", "leads"}})
	h.wantClaimed(res, 0, 0, 0, h.step(runs[0].ID, "a"))

	cases := []struct {
		name string
		p    store.RunListParams
		want []int // indexes into runs, newest first
	}{
		{"all", store.RunListParams{}, []int{4, 3, 2, 1, 0}},
		{"workflow", store.RunListParams{Workflow: "orders"}, []int{3, 1, 0}},
		{"state", store.RunListParams{State: store.StateProcessing}, []int{0}},
		{"state and workflow", store.RunListParams{State: store.StatePending, Workflow: "orders"}, []int{3, 1}},
		{"entity", store.RunListParams{Entity: "order:1"}, []int{3, 0}},
		{"run key", store.RunListParams{RunKey: "k1"}, []int{2, 0}},
		{"run key and workflow", store.RunListParams{RunKey: "k1", Workflow: "leads"}, []int{2}},
		{"before id", store.RunListParams{BeforeID: runs[3].ID}, []int{2, 1, 0}},
		{"created since", store.RunListParams{CreatedSince: at(2 * time.Second)}, []int{4, 3, 2}},
		{"created until", store.RunListParams{CreatedUntil: at(2 * time.Second)}, []int{1, 0}},
		{"created between", store.RunListParams{CreatedSince: at(time.Second), CreatedUntil: at(3 * time.Second), Workflow: "orders"}, []int{1}},
		{"limit", store.RunListParams{Limit: 2}, []int{4, 3}},
		{"page", store.RunListParams{BeforeID: runs[3].ID, Limit: 2}, []int{2, 1}},
		{"no match", store.RunListParams{Workflow: "nope"}, nil},
	}
	for _, tc := range cases {
		got, err := h.s.RunList(h.ctx, tc.p)
		if err != nil {
			h.t.Fatalf("RunList %s: %v", tc.name, err)
		}
		var gotIDs, wantIDs []int64
		for _, r := range got {
			gotIDs = append(gotIDs, r.ID)
		}
		for _, i := range tc.want {
			wantIDs = append(wantIDs, runs[i].ID)
		}
		if !slices.Equal(gotIDs, wantIDs) {
			h.t.Errorf("RunList %s (%+v) = runs %v, want %v", tc.name, tc.p, gotIDs, wantIDs)
		}
	}
}
