package onceflow

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// writesFixture is a client on a fresh store with a one-step workflow and three runs whose
// steps it claimed: each record of a batch can then apply, lose its lease or be invalid.
type writesFixture struct {
	c       *Client
	bw      store.BatchWriter
	now     time.Time
	claimed []*store.ClaimedStep // the steps of runs form-1, form-2, form-3, in that order
	runs    map[string]*Run
	commits recordCommits
}

// recordCommits counts, through Config.Metrics, the items of each commit of records.
type recordCommits struct {
	mu    sync.Mutex
	sizes []int
}

func (r *recordCommits) Observe(m Measurement) {
	if m.Kind == MeasureCommit && m.Step == CommitRecords {
		r.mu.Lock()
		r.sizes = append(r.sizes, m.Count)
		r.mu.Unlock()
	}
}

func newWritesFixture(t *testing.T, st store.Store) *writesFixture {
	t.Helper()
	bw, ok := st.(store.BatchWriter)
	if !ok {
		t.Fatalf("%T is not a store.BatchWriter", st)
	}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	f := &writesFixture{bw: bw, now: now, runs: map[string]*Run{}}
	c, err := New(Config{Store: st, WorkerID: "batcher", Clock: func() time.Time { return now }, Metrics: &f.commits})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *StepContext) (any, error) { return nil, nil }
	if err := c.Register(Workflow{Name: "form", Steps: []Step{{ID: "crm", EffectKey: "lead:{input.n}", Do: noop}}}); err != nil {
		t.Fatal(err)
	}
	f.c = c
	for i, key := range []string{"form-1", "form-2", "form-3"} {
		r, err := c.Start(t.Context(), "form", key, map[string]any{"n": i + 1})
		if err != nil {
			t.Fatal(err)
		}
		f.runs[key] = r
	}
	res, err := c.claimSteps(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Claimed) != 3 {
		t.Fatalf("claimed %d steps, want the three runs' steps", len(res.Claimed))
	}
	byRun := map[int64]*store.ClaimedStep{}
	for _, cs := range res.Claimed {
		byRun[cs.Run.ID] = cs
	}
	for _, key := range []string{"form-1", "form-2", "form-3"} {
		cs := byRun[f.runs[key].ID]
		if cs == nil {
			t.Fatalf("the step of run %s was not claimed", key)
		}
		f.claimed = append(f.claimed, cs)
	}
	return f
}

// records returns three records of the claimed steps: the first applies, the second's
// attempt is not the step's (its lease is lost), the third's next state is not one a
// record may set.
func (f *writesFixture) records() (applies, lost, invalid store.StepRecordParams) {
	rec := func(cs *store.ClaimedStep) store.StepRecordParams {
		return store.StepRecordParams{StepID: cs.Step.ID, Owner: cs.Step.LeaseOwner, Attempt: cs.Step.Attempt, Now: f.now,
			Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"id": "lead-1"}`), NextState: store.StateCompleted}
	}
	applies, lost, invalid = rec(f.claimed[0]), rec(f.claimed[1]), rec(f.claimed[2])
	lost.Attempt += 5
	invalid.NextState = "done"
	return applies, lost, invalid
}

// checkRecords checks the three records' results, and the steps they left.
func (f *writesFixture) checkRecords(t *testing.T, applies, lost, invalid error) {
	t.Helper()
	if applies != nil {
		t.Errorf("the record that applies got %v, want nil", applies)
	}
	if !errors.Is(lost, store.ErrLeaseLost) {
		t.Errorf("the record of a lost lease got %v, want ErrLeaseLost", lost)
	}
	if invalid == nil || errors.Is(invalid, store.ErrLeaseLost) || !strings.Contains(invalid.Error(), `next state "done"`) {
		t.Errorf("the invalid record got %v, want its own error naming the next state \"done\"", invalid)
	}
	want := []store.State{store.StateCompleted, store.StateProcessing, store.StateProcessing}
	for i, cs := range f.claimed {
		list, err := f.c.store.StepListByRun(context.Background(), cs.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].State != want[i] {
			t.Errorf("run %s's step after the batch: %+v, want %s", cs.Run.RunKey, list, want[i])
		}
	}
}

func writesBackends() []struct {
	name string
	open func(t *testing.T) store.Store
} {
	return []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store {
			st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"postgres", func(t *testing.T) store.Store {
			u, schema := testsvc.PostgresSchema(t, "onceflow_writes_")
			st, err := postgres.Open(t.Context(), u, postgres.Options{Schema: schema})
			if err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("open the PostgreSQL test database: %v", err)
				}
				t.Skipf("the PostgreSQL test database is unreachable: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
	}
}

// One batch of writes mixes starts, records with different outcomes and a claim: each
// item gets its own result, whatever the items around it.
func TestABatchOfWritesAnswersEachItemItsOwnResult(t *testing.T) {
	for _, be := range writesBackends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f := newWritesFixture(t, be.open(t))
			applies, lost, invalid := f.records()
			fresh, err := f.c.runInsertParams(t.Context(), nil, "form", "form-4", map[string]any{"n": 4})
			if err != nil {
				t.Fatal(err)
			}
			repeat, err := f.c.runInsertParams(t.Context(), nil, "form", "form-2", map[string]any{"n": 2})
			if err != nil {
				t.Fatal(err)
			}
			items := []writeItem{
				{record: &applies},
				{start: &fresh},
				{record: &lost},
				{claim: 1},
				{record: &invalid},
				{start: &repeat},
			}
			out, err := f.c.commitWrites(t.Context(), f.bw, items)
			if err != nil {
				t.Fatalf("commitWrites: %v", err)
			}
			if len(out) != len(items) {
				t.Fatalf("%d results for %d items", len(out), len(items))
			}
			f.checkRecords(t, out[0].err, out[2].err, out[4].err)
			if s := out[1].start; s.Err != nil || !s.Created || s.Run == nil || s.Run.RunKey != "form-4" {
				t.Errorf("the new start got %+v, want run form-4 created", s)
			}
			if s := out[5].start; s.Err != nil || s.Created || s.Run == nil || s.Run.ID != f.runs["form-2"].ID {
				t.Errorf("the repeated start got %+v, want run form-2 (%d), not created", s, f.runs["form-2"].ID)
			}
			// The claim sees what the batch's start wrote: form-4's step is the only one due.
			if cl := out[3].claimed; cl == nil || len(cl.Claimed) != 1 || cl.Claimed[0].Run.RunKey != "form-4" {
				t.Errorf("the claim got %+v, want the step of run form-4", cl)
			}
		})
	}
}

// Records submitted by three workers while the database's one writer is busy are
// committed in one batch, and each worker is answered with its own record's result.
func TestEachCallerOfABatchedRecordGetsItsOwnResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newWritesFixture(t, st)
	applies, lost, invalid := f.records()

	// Another connection holds the write lock: the next batch waits for it.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// A claim (of nothing: every step is claimed) takes the committer; its batch waits.
	f.c.writes.Go(writeItem{claim: 1})
	deadline := time.Now().Add(10 * time.Second)
	for f.c.writes.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the claim's batch did not start within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, p := range []store.StepRecordParams{applies, lost, invalid} {
		wg.Go(func() {
			res, err := f.c.recordStep(ctx, p, false)
			if err != nil {
				t.Errorf("record %d: the batch failed: %v", i, err)
			}
			errs[i] = res.err
		})
	}
	for f.c.writes.Pending() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d records wait for a batch after 10 s, want 3", f.c.writes.Pending())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	f.checkRecords(t, errs[0], errs[1], errs[2])
	f.commits.mu.Lock()
	defer f.commits.mu.Unlock()
	if !slices.Equal(f.commits.sizes, []int{3}) {
		t.Errorf("commits of records: %v items, want one commit of the three", f.commits.sizes)
	}
}
