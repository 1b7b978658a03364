package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// tempStore opens a store on a new database file, closed when the test ends.
func tempStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStepRecordManyRows records more steps in one call than a multi-row insert of the
// write path holds (128 rows): every record applies and releases its run's next step.
func TestStepRecordManyRows(t *testing.T) {
	t.Parallel()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 2*128 + 5
	var starts []store.RunInsertParams
	for i := range n {
		key := fmt.Sprintf("r%d", i)
		starts = append(starts, store.RunInsertParams{Workflow: "w", RunKey: key, Input: json.RawMessage(`{}`), Actor: "test", Now: now,
			Steps: []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}})
	}
	if _, err := s.RunInsertMany(t.Context(), starts); err != nil {
		t.Fatal(err)
	}
	res, err := s.StepClaim(t.Context(), store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: n, Workflows: []string{"w"},
		Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: c.Run.RunKey + "/" + c.Step.Name}, nil
		}})
	if err != nil || len(res.Claimed) != n {
		t.Fatalf("StepClaim: %d claimed, %v; want %d", len(res.Claimed), err, n)
	}
	var ps []store.StepRecordParams
	for i, c := range res.Claimed {
		p := store.StepRecordParams{StepID: c.Step.ID, Owner: "w1", Attempt: c.Step.Attempt, Now: now.Add(time.Second),
			Outcome: store.OutcomeSuccess, Output: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), NextState: store.StateCompleted}
		if i%100 == 7 {
			p.Owner = "w2" // not the lease holder
		}
		ps = append(ps, p)
	}
	errs, err := s.StepRecord(t.Context(), ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range res.Claimed {
		lost := i%100 == 7
		if got := errs[i] != nil; got != lost {
			t.Errorf("entry %d: %v, want lost lease %v", i, errs[i], lost)
		}
		steps, err := s.StepListByRun(t.Context(), c.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		a, b := steps[0], steps[1]
		wantA, wantWaiting := store.StateCompleted, 0
		if lost {
			wantA, wantWaiting = store.StateProcessing, 1
		}
		if a.State != wantA || b.Waiting != wantWaiting {
			t.Errorf("run %d: a %s, b waiting %d; want a %s, b waiting %d", c.Run.ID, a.State, b.Waiting, wantA, wantWaiting)
		}
		if !lost && string(a.Output) != fmt.Sprintf(`{"i": %d}`, i) {
			t.Errorf("run %d: a output %s", c.Run.ID, a.Output)
		}
	}
}

// TestKeysJSONCannotCarry: run keys and effect keys that are not valid UTF-8, which a
// list of keys passed as JSON could not carry, are found: a known run key gives its run,
// and a key held in the ledger makes the next step with it wait.
func TestKeysJSONCannotCarry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start := func(keys ...string) []store.RunInsertResult {
		t.Helper()
		var ps []store.RunInsertParams
		for _, k := range keys {
			ps = append(ps, store.RunInsertParams{Workflow: "orders", RunKey: k, Input: json.RawMessage(`{}`), InputHash: "h", Now: now,
				Steps: []store.StepInsert{{Name: "a"}}})
		}
		res, err := s.RunInsertMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Run == nil || r.Run.RunKey != keys[i] {
				t.Fatalf("start %q: %+v", keys[i], r)
			}
		}
		return res
	}
	first := start("bad\xff", "nul\x00x")
	again := start("bad\xff", "nul\x00x", "new")
	for i := range first {
		if again[i].Created || again[i].Run.ID != first[i].Run.ID {
			t.Errorf("known key %q: run %d created %v, want run %d not created", first[i].Run.RunKey, again[i].Run.ID, again[i].Created, first[i].Run.ID)
		}
	}
	if !again[2].Created {
		t.Errorf("new key: not created")
	}

	claim := func() *store.ClaimResult {
		t.Helper()
		res, err := s.StepClaim(ctx, store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: 1, Workflows: []string{"orders"},
			WaitFor: time.Second, Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
				return store.EffectSpec{Key: "key\xff"}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := claim(); len(res.Claimed) != 1 {
		t.Fatalf("first claim: %+v, want one step taken", res)
	}
	if res := claim(); len(res.Claimed) != 0 || res.Waiting != 1 {
		t.Errorf("second claim: %+v, want one step waiting for the key", res)
	}
}

// TestStartsManyRows: a large batch of starts, mixing new keys, known keys and keys
// repeated in the batch, gets the results and events starting them one by one would.
func TestStartsManyRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	params := func(keys ...string) []store.RunInsertParams {
		var ps []store.RunInsertParams
		for _, k := range keys {
			ps = append(ps, store.RunInsertParams{Workflow: "orders", RunKey: k, Input: json.RawMessage(`{}`), InputHash: "h", Now: now,
				Steps: []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}})
		}
		return ps
	}
	var old, batch []string
	for i := range 40 {
		old = append(old, fmt.Sprintf("old-%d", i))
	}
	if _, err := s.RunInsertMany(ctx, params(old...)); err != nil {
		t.Fatal(err)
	}
	known := map[string]int64{}
	for _, k := range old {
		r, err := s.RunGetByKey(ctx, "orders", k)
		if err != nil {
			t.Fatal(err)
		}
		known[k] = r.ID
	}
	// 40 new keys, each followed by a known one; new-0 again at the end.
	for i := range 40 {
		batch = append(batch, fmt.Sprintf("new-%d", i), old[i])
	}
	batch = append(batch, "new-0")
	res, err := s.RunInsertMany(ctx, params(batch...))
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i, r := range res {
		k := batch[i]
		switch {
		case r.Err != nil || r.Run == nil || r.Run.RunKey != k:
			t.Fatalf("start %d (%s): %+v", i, k, r)
		case known[k] != 0:
			if r.Created || r.Run.ID != known[k] {
				t.Errorf("known key %s: run %d created %v, want run %d", k, r.Run.ID, r.Created, known[k])
			}
		case i == len(batch)-1:
			if r.Created || r.Run.ID != res[0].Run.ID {
				t.Errorf("repeated key %s: run %d created %v, want run %d", k, r.Run.ID, r.Created, res[0].Run.ID)
			}
		default:
			if !r.Created || r.Run.ID <= last {
				t.Errorf("new key %s: run %d created %v, want a new run after %d", k, r.Run.ID, r.Created, last)
			}
			last = r.Run.ID
			if steps, err := s.StepListByRun(ctx, r.Run.ID); err != nil || len(steps) != 2 {
				t.Errorf("new key %s: %d steps, %v", k, len(steps), err)
			}
		}
	}
	evs, err := s.EventList(ctx, store.EventListParams{AfterID: 40, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(batch) {
		t.Fatalf("%d events, want %d", len(evs), len(batch))
	}
	for i, e := range evs {
		if want := res[i].Run.ID; e.RunID != want || (e.Type == store.EventRunCreated) != res[i].Created {
			t.Errorf("event %d: %s of run %d, want run %d created %v", i, e.Type, e.RunID, want, res[i].Created)
		}
	}
}
