package onceflow_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// leads is the workflow of the batch tests: one step, the entity from the input's id.
func leads() onceflow.Workflow {
	return onceflow.Workflow{Name: "leads", Entity: "lead:{input.id}", Steps: []onceflow.Step{{ID: "crm", Do: noop}}}
}

// newBatchClient returns a client on st with a manual clock, and leads registered.
func newBatchClient(t *testing.T, st store.Store, mod ...func(*onceflow.Config)) *onceflow.Client {
	t.Helper()
	clk := newClock()
	cfg := onceflow.Config{Store: st, WorkerID: "batch-worker", Clock: clk.Now, ClockSync: -1, Rand: func() float64 { return 0.5 }}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := onceflow.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(leads()); err != nil {
		t.Fatal(err)
	}
	return c
}

func lead(id int) map[string]any { return map[string]any{"id": id} }

// statuses returns the status of each result.
func statuses(res []onceflow.StartResult) []onceflow.StartStatus {
	out := make([]onceflow.StartStatus, len(res))
	for i, r := range res {
		out[i] = r.Status
	}
	return out
}

// StartMany answers each item on its own — new keys created, known keys duplicates or
// conflicts, repeats inside the call the duplicates of or conflicts with their first item,
// bad keys and bad inputs invalid without failing the others — writes one run per key and
// the events a Start of each would, and a client that remembers nothing (another process)
// gets the same answers from the database.
func TestStartMany(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			st := be.open(t)
			ctx := t.Context()
			c := newBatchClient(t, st)
			known, err := c.Start(ctx, "leads", "known", lead(1))
			if err != nil {
				t.Fatal(err)
			}
			items := []onceflow.StartItem{
				{RunKey: "new-1", Input: lead(10)},
				{RunKey: "new-2", Input: lead(11)},
				{RunKey: "known", Input: lead(1)},                                         // duplicate of a run started before
				{RunKey: "known", Input: lead(2)},                                         // conflict with it
				{RunKey: "", Input: lead(12)},                                             // invalid key
				{RunKey: "bad-input", Input: "not an object"},                             // invalid input
				{RunKey: "new-1", Input: lead(10)},                                        // duplicate of item 0
				{RunKey: "new-2", Input: lead(99)},                                        // conflict with item 1
				{RunKey: "neg-entity", Input: lead(-1)},                                   // created: lead:-1 is a valid entity
				{RunKey: "bidi\u202ekey", Input: lead(13)},                                // invalid key
				{RunKey: "entity", Input: map[string]any{"id": strings.Repeat("x", 300)}}, // the entity is too long
			}
			res, err := c.StartMany(ctx, "leads", items)
			if err != nil {
				t.Fatalf("StartMany: %v", err)
			}
			want := []onceflow.StartStatus{onceflow.StartCreated, onceflow.StartCreated, onceflow.StartDuplicate, onceflow.StartConflict,
				onceflow.StartInvalid, onceflow.StartInvalid, onceflow.StartDuplicate, onceflow.StartConflict, onceflow.StartCreated,
				onceflow.StartInvalid, onceflow.StartInvalid}
			if got := statuses(res); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("statuses = %v, want %v", got, want)
			}
			if res[2].Run.ID != known.ID || !res[2].Run.Duplicate || res[6].Run.ID != res[0].Run.ID || !res[6].Run.Duplicate {
				t.Fatalf("duplicates answered runs %d and %d, want %d and %d", res[2].Run.ID, res[6].Run.ID, known.ID, res[0].Run.ID)
			}
			var ce *onceflow.RunConflictError
			if !errors.As(res[3].Err, &ce) || ce.RunID != known.ID || res[3].Run != nil {
				t.Fatalf("item 3: %+v, want a conflict with run %d", res[3], known.ID)
			}
			if !errors.As(res[7].Err, &ce) || ce.RunID != res[1].Run.ID {
				t.Fatalf("item 7: %+v, want a conflict with run %d (item 1)", res[7], res[1].Run.ID)
			}
			if !errors.Is(res[4].Err, onceflow.ErrInvalidKey) || !errors.Is(res[9].Err, onceflow.ErrInvalidKey) {
				t.Fatalf("items 4 and 9: %v, %v; want key errors", res[4].Err, res[9].Err)
			}
			var ie *onceflow.InputError
			if !errors.As(res[5].Err, &ie) || !errors.As(res[10].Err, &ie) || ie.Field != "input.id" {
				t.Fatalf("items 5 and 10: %v, %v; want input errors, the second naming input.id", res[5].Err, res[10].Err)
			}
			if res[0].Run.Entity != "lead:10" || res[0].Run.Duplicate || res[0].Run.RunKey != "new-1" {
				t.Fatalf("item 0's run: %+v", res[0].Run)
			}

			runs, err := st.RunList(ctx, store.RunListParams{Workflow: "leads", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			keys := map[string]int{}
			for _, r := range runs {
				keys[r.RunKey]++
			}
			if len(runs) != 4 || keys["known"] != 1 || keys["new-1"] != 1 || keys["new-2"] != 1 || keys["neg-entity"] != 1 {
				t.Fatalf("the store holds runs %v, want known, new-1, new-2 and neg-entity once each", keys)
			}
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			evs, err := st.EventList(ctx, store.EventListParams{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			count := map[store.EventType]int{}
			for _, e := range evs {
				if e.Type == store.EventRunCreated || e.Type == store.EventRunDeduplicated {
					count[e.Type]++
					if e.Actor != "api" {
						t.Errorf("%s of run %d by %q, want api", e.Type, e.RunID, e.Actor)
					}
				}
			}
			if count[store.EventRunCreated] != 4 || count[store.EventRunDeduplicated] != 4 {
				t.Fatalf("events %v, want 4 runs created and 4 starts deduplicated (two duplicates, two conflicts)", count)
			}

			// Another client, which remembers nothing: the database answers.
			other := newBatchClient(t, st)
			again, err := other.StartMany(ctx, "leads", items)
			if err != nil {
				t.Fatalf("StartMany again: %v", err)
			}
			want[0], want[1], want[8] = onceflow.StartDuplicate, onceflow.StartDuplicate, onceflow.StartDuplicate
			if got := statuses(again); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("statuses from another client = %v, want %v", got, want)
			}
			for _, i := range []int{0, 1, 2, 6, 8} {
				if again[i].Run.ID != res[i].Run.ID && !(i == 2 && again[i].Run.ID == known.ID) {
					t.Fatalf("item %d: run %d from another client, want %d", i, again[i].Run.ID, res[i].Run.ID)
				}
			}

			// The runs created are executed.
			for range 10 {
				if n, err := c.Work(ctx); err != nil || n == 0 {
					break
				}
			}
			for _, i := range []int{0, 1, 8} {
				r, err := c.GetRun(ctx, res[i].Run.ID)
				if err != nil || r.State != onceflow.StateCompleted {
					t.Fatalf("run of item %d: %+v, %v; want completed", i, r, err)
				}
			}
		})
	}
}

// A caller StartManyFrom refuses starts nothing, whatever the items; a call with more
// items than MaxStartMany starts nothing either.
func TestStartManyRefusedStartsNothing(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			st := be.open(t)
			ctx := t.Context()
			c := newBatchClient(t, st, func(cfg *onceflow.Config) { cfg.MaxStartMany = 3 })
			items := []onceflow.StartItem{{RunKey: "a", Input: lead(1)}, {RunKey: "b", Input: lead(2)}}
			_, err := c.StartManyFrom(ctx, onceflow.Caller{Token: "importer", Workflows: []string{"orders"}}, "leads", items)
			var re *onceflow.StartRefusedError
			if !errors.As(err, &re) || re.Reason != onceflow.RefusedNotInList {
				t.Fatalf("StartManyFrom by a token limited to orders: %v, want a refusal (not in the token's list)", err)
			}
			if _, err := c.StartMany(ctx, "nope", items); !errors.Is(err, onceflow.ErrWorkflowNotFound) {
				t.Fatalf("StartMany of an unknown workflow: %v, want ErrWorkflowNotFound", err)
			}
			four := append(items, onceflow.StartItem{RunKey: "c", Input: lead(3)}, onceflow.StartItem{RunKey: "d", Input: lead(4)})
			if _, err := c.StartMany(ctx, "leads", four); !errors.Is(err, onceflow.ErrTooManyItems) || !strings.Contains(err.Error(), "at most 3") {
				t.Fatalf("StartMany of 4 items with MaxStartMany 3: %v, want ErrTooManyItems saying at most 3", err)
			}
			runs, err := st.RunList(ctx, store.RunListParams{Limit: 10})
			if err != nil || len(runs) != 0 {
				t.Fatalf("runs after refused calls: %d (%v), want none", len(runs), err)
			}
			res, err := c.StartManyFrom(ctx, onceflow.Caller{Token: "importer"}, "leads", items)
			if err != nil || res[0].Status != onceflow.StartCreated || res[1].Status != onceflow.StartCreated {
				t.Fatalf("StartManyFrom by a token without a list: %+v, %v; want both created", res, err)
			}
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			evs, err := st.EventList(ctx, store.EventListParams{RunID: res[0].Run.ID})
			if err != nil || len(evs) == 0 || evs[0].Type != store.EventRunCreated || evs[0].Actor != "token:importer" {
				t.Fatalf("events of the run the token started: %v (%v), want run.created by token:importer first", evs, err)
			}
		})
	}
}

// A key the client remembers is answered without the database, on both stores: with the
// store closed, a repeated start of a remembered key with the same input is still its
// duplicate, while another input under it — a conflict, whose refusal is committed before
// it is answered — and a key it does not remember fail.
func TestRepeatedKeyAnsweredInProcess(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			st := be.open(t)
			ctx := t.Context()
			c := newBatchClient(t, st)
			first, err := c.Start(ctx, "leads", "k1", lead(1))
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.StartMany(ctx, "leads", []onceflow.StartItem{{RunKey: "k2", Input: lead(2)}})
			if err != nil || res[0].Status != onceflow.StartCreated {
				t.Fatalf("StartMany: %+v, %v", res, err)
			}
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			dup, err := c.Start(ctx, "leads", "k1", lead(1))
			if err != nil || !dup.Duplicate || dup.ID != first.ID || dup.Entity != "lead:1" || !dup.CreatedAt.Equal(first.CreatedAt) ||
				string(dup.Input) != string(first.Input) {
				t.Fatalf("repeated start with the store closed: %+v, %v; want the duplicate of run %d", dup, err, first.ID)
			}
			many, err := c.StartMany(ctx, "leads", []onceflow.StartItem{{RunKey: "k1", Input: lead(1)}, {RunKey: "k2", Input: lead(2)}})
			if err != nil || many[0].Status != onceflow.StartDuplicate || many[1].Status != onceflow.StartDuplicate || many[1].Run.ID != res[0].Run.ID {
				t.Fatalf("StartMany of remembered keys, store closed: %+v, %v; want two duplicates", many, err)
			}
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := c.Start(sctx, "leads", "k3", lead(3)); err == nil {
				t.Fatal("a new key started with the store closed")
			}
			if r, err := c.Start(sctx, "leads", "k2", lead(3)); err == nil || errors.Is(err, onceflow.ErrRunConflict) {
				t.Fatalf("a remembered key with another input, store closed: %+v, %v; want the database's error, not an answer from memory", r, err)
			}
		})
	}
}

// A remembered key is answered in process only while its run is younger than
// RecentKeysTTL: once that has passed the database answers, and a run another process
// purged meanwhile is started again.
func TestRepeatedKeyAfterTTL(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := newClock()
	c, err := onceflow.New(onceflow.Config{Store: st, Clock: clk.Now, ClockSync: -1, RecentKeysTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(leads()); err != nil {
		t.Fatal(err)
	}
	first, err := c.Start(ctx, "leads", "k", lead(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	// Another process purges the run: this client is not told.
	other, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if r, err := other.RetentionPurge(ctx, store.RetentionPurgeParams{Now: clk.Now(), RunsBefore: clk.Now().Add(-time.Minute), Actor: "test"}); err != nil || r.Runs.Count != 1 {
		t.Fatalf("purge: %+v, %v; want the run purged", r, err)
	}
	again, err := c.Start(ctx, "leads", "k", lead(1))
	if err != nil || again.Duplicate || again.ID == first.ID {
		t.Fatalf("start after the purge, past the TTL: %+v, %v; want a new run, not the purged run %d", again, err, first.ID)
	}
}
