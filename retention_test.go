package onceflow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// A step's Retention travels to its ledger row; once a purge has forgotten the key, a new
// run performs the effect again, while keys kept forever are never performed twice and a
// run waiting for review keeps everything it has.
func TestRetentionForgetsOnlyWhatStepsAllow(t *testing.T) {
	b := setup(t)
	var mu sync.Mutex
	calls := map[string]int{}
	do := func(_ context.Context, sc *onceflow.StepContext) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[sc.EffectKey]++
		return map[string]int{"call": calls[sc.EffectKey]}, nil
	}
	const keep = 90 * 24 * time.Hour
	b.register(t, onceflow.Workflow{Name: "order", Steps: []onceflow.Step{
		{ID: "charge", EffectKey: "charge:{input.order_id}", Do: do}, // forever
		{ID: "receipt", Needs: []string{"charge"}, EffectKey: "receipt:{input.order_id}", Retention: keep, Do: do},
	}})
	b.register(t, onceflow.Workflow{Name: "refund", Steps: []onceflow.Step{
		{ID: "notice", EffectKey: "refund-notice:{input.order_id}", Retention: time.Hour, Do: do},
		{ID: "refund", EffectKey: "refund:{input.order_id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(errors.New("the card was closed"))
		}},
	}})
	completed := b.clock.Now()
	first := b.start(t, "order", "evt_1", map[string]any{"order_id": 1001})
	review := b.start(t, "refund", "evt_2", map[string]any{"order_id": 1001})
	b.work(t)
	if r := b.run(t, first.ID); r.State != store.StateCompleted {
		t.Fatalf("first run %s, want completed", r.State)
	}
	if r := b.run(t, review.ID); r.State != store.StateNeedsReview {
		t.Fatalf("refund run %s, want needs_review", r.State)
	}
	receipt, err := b.store.EffectGetByKey(b.ctx, "receipt:1001")
	if err != nil {
		t.Fatal(err)
	}
	if !receipt.RetainUntil.Equal(completed.Add(keep)) {
		t.Errorf("receipt kept until %s, want %s", receipt.RetainUntil, completed.Add(keep))
	}
	charge, err := b.store.EffectGetByKey(b.ctx, "charge:1001")
	if err != nil {
		t.Fatal(err)
	}
	if !charge.RetainUntil.IsZero() {
		t.Errorf("charge kept until %s, want forever (zero)", charge.RetainUntil)
	}
	reviewBefore := snapshotRun(t, b, review.ID)

	// Day 91: runs older than 30 days go; the receipt's and the notice's keys expired.
	b.clock.Advance(91 * 24 * time.Hour)
	now := b.clock.Now()
	p := store.RetentionPurgeParams{Now: now, RunsBefore: now.Add(-30 * 24 * time.Hour), Actor: "ops", DryRun: true}
	dry, err := b.store.RetentionPurge(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	p.DryRun = false
	got, err := b.store.RetentionPurge(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Runs.Count != 1 || got.Effects.Count != 1 {
		t.Errorf("purged %d runs and %d keys, want the first run and the receipt's key", got.Runs.Count, got.Effects.Count)
	}
	for _, c := range [][2]store.PurgeCount{{dry.Runs, got.Runs}, {dry.Steps, got.Steps}, {dry.Attempts, got.Attempts}, {dry.Events, got.Events}, {dry.Effects, got.Effects}} {
		if c[0] != c[1] {
			t.Errorf("dry run %+v, purge %+v", c[0], c[1])
		}
	}
	if _, err := b.store.RunGetByID(b.ctx, first.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("first run after the purge: %v, want ErrNotFound", err)
	}
	if after := snapshotRun(t, b, review.ID); after != reviewBefore {
		t.Errorf("run in review after the purge: %s, want %s", after, reviewBefore)
	}
	// The notice's key expired, but its run waits for review: kept.
	if _, err := b.store.EffectGetByKey(b.ctx, "refund-notice:1001"); err != nil {
		t.Errorf("key of a run in review: %v, want kept", err)
	}

	// The same business event again: the charge is remembered, the receipt is not.
	again := b.start(t, "order", "evt_1-redelivered", map[string]any{"order_id": 1001})
	b.work(t)
	if r := b.run(t, again.ID); r.State != store.StateCompleted {
		t.Fatalf("second run %s, want completed", r.State)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["charge:1001"] != 1 || calls["receipt:1001"] != 2 {
		t.Errorf("calls %v: want the charge once (kept forever) and the receipt twice (forgotten after 90 days)", calls)
	}
	if s := b.steps(t, again.ID)["charge"]; s.Reason != "effect_reused" {
		t.Errorf("charge in the second run: reason %q, want effect_reused", s.Reason)
	}
}

func snapshotRun(t *testing.T, b *bundle, id int64) string {
	t.Helper()
	r := b.run(t, id)
	attempts, err := b.store.AttemptListByRun(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s, %d steps, %d attempts, %d events", r.State, len(b.steps(t, id)), len(attempts),
		len(b.events(t, store.EventListParams{RunID: id})))
}

func TestRetentionMustNotBeNegative(t *testing.T) {
	err := onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "a", Do: noop, Retention: -time.Hour}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Retention must not be negative") {
		t.Fatalf("Validate = %v, want a problem with the negative retention", err)
	}
}

// A key the client remembers having started, whose run a purge has since deleted, starts a
// new run, as it would on a client that never saw the key: the recent keys only choose
// how a start is answered, never what the answer is.
func TestStartAgainAfterThePurgeOnTheSameClient(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st := be.open(t)
			clk := newClock()
			c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "purged", Clock: clk.Now, Rand: func() float64 { return 0.5 }})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Register(onceflow.Workflow{Name: "form", Steps: []onceflow.Step{
				{ID: "crm", EffectKey: "lead-create:{input.id}", Retention: time.Hour, Do: noop},
			}}); err != nil {
				t.Fatal(err)
			}
			input := map[string]any{"id": 8812}
			// The client remembers the key it started.
			first, err := c.Start(ctx, "form", "form-8812", input)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Work(ctx); err != nil {
				t.Fatal(err)
			}

			// The purge's cutoff follows the run's last change, whichever clock wrote it
			// (PostgreSQL's).
			done, err := st.RunGetByID(ctx, first.ID)
			if err != nil {
				t.Fatal(err)
			}
			cutoff := done.UpdatedAt.Add(time.Second)
			purged, err := st.RetentionPurge(ctx, store.RetentionPurgeParams{Now: cutoff, RunsBefore: cutoff, Actor: "ops"})
			if err != nil {
				t.Fatal(err)
			}
			if purged.Runs.Count != 1 {
				t.Fatalf("purged %d runs, want the first one", purged.Runs.Count)
			}
			if _, err := st.RunGetByKey(ctx, "form", "form-8812"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the purged run's key: %v, want ErrNotFound", err)
			}

			second, err := c.Start(ctx, "form", "form-8812", input)
			if err != nil {
				t.Fatalf("Start of the purged run's key on the client that remembers it: %v; want a new run", err)
			}
			if second.Duplicate || second.ID == first.ID {
				t.Fatalf("Start after the purge = run %d (duplicate %v), want a new run (not %d)", second.ID, second.Duplicate, first.ID)
			}
			stored, err := st.RunGetByKey(ctx, "form", "form-8812")
			if err != nil || stored.ID != second.ID {
				t.Fatalf("the key after the second start: %+v, %v; want run %d stored", stored, err, second.ID)
			}
			if third, err := c.Start(ctx, "form", "form-8812", input); err != nil || third.ID != second.ID || !third.Duplicate {
				t.Fatalf("a repeated start after the second = %+v, %v; want run %d as a duplicate", third, err, second.ID)
			}
			if _, err := c.Work(ctx); err != nil {
				t.Fatal(err)
			}
			if r, err := c.GetRun(ctx, second.ID); err != nil || r.State != onceflow.StateCompleted {
				t.Fatalf("the new run: %+v, %v; want it completed", r, err)
			}
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// purgeElsewhere deletes a run as a purge in another process does, while the store's own
// writes wait: it takes the database's write lock (SQLite) or the runs table's (PostgreSQL)
// at once, and deletes the run when purge is called. Writes of the store that arrive in
// between wait for it to commit.
func purgeElsewhere(t *testing.T, st store.Store, runID int64) (purge func()) {
	t.Helper()
	ctx := t.Context()
	switch s := st.(type) {
	case *sqlite.Store:
		db, err := sql.Open("sqlite", s.Path())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		return func() {
			t.Helper()
			for _, q := range []string{`DELETE FROM events WHERE run_id = ?`, `DELETE FROM runs WHERE id = ?`} {
				if _, err := conn.ExecContext(ctx, q, runID); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
		}
	case *postgres.Store:
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		if _, err := tx.Exec(ctx, `LOCK TABLE runs IN EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		return func() {
			t.Helper()
			for _, q := range []string{`DELETE FROM events WHERE run_id = $1`, `DELETE FROM runs WHERE id = $1`} {
				if _, err := tx.Exec(ctx, q, runID); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatalf("no way to purge behind the back of a %T", st)
	return nil
}

// A repeated start answered from the client's recent keys says which run the key started;
// the write that records the repeat in the audit trail comes after the answer. When a
// purge deletes that run in between, the write creates nothing: no run that nobody
// started. A repeat with another input (refused as a conflict) has no such window: its
// event is committed before the refusal is answered.
func TestARepeatRecordedAfterThePurgeStartsNothing(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st := be.open(t)
			c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "repeats"})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Register(onceflow.Workflow{Name: "form", Steps: []onceflow.Step{{ID: "crm", EffectKey: "lead-create:{input.id}", Do: noop}}}); err != nil {
				t.Fatal(err)
			}
			first, err := c.Start(ctx, "form", "form-1", map[string]any{"id": 1})
			if err != nil {
				t.Fatal(err)
			}
			purge := purgeElsewhere(t, st, first.ID)
			again, err := c.Start(ctx, "form", "form-1", map[string]any{"id": 1})
			if err != nil || again.ID != first.ID || !again.Duplicate {
				t.Fatalf("repeated start of form-1 = %+v, %v; want run %d as a duplicate", again, err, first.ID)
			}
			purge()
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if r, err := st.RunGetByKey(ctx, "form", "form-1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("form-1 after the purge: %v; want no run, but the repeat's write created run %d with input %s", err, r.ID, r.Input)
			}

			second, err := c.Start(ctx, "form", "form-2", map[string]any{"id": 2})
			if err != nil {
				t.Fatal(err)
			}
			var conflict *onceflow.RunConflictError
			if _, err := c.Start(ctx, "form", "form-2", map[string]any{"id": 2, "changed": true}); !errors.As(err, &conflict) {
				t.Fatalf("repeated start of form-2 with another input: %v; want a conflict", err)
			}
			evs, err := st.EventList(ctx, store.EventListParams{RunID: second.ID})
			if err != nil {
				t.Fatal(err)
			}
			if last := evs[len(evs)-1]; last.Type != store.EventRunDeduplicated || !strings.Contains(strings.ReplaceAll(string(last.Detail), " ", ""), `"same_input":false`) {
				t.Fatalf("when the conflict was answered the trail of run %d ended with %s %s; want its run.deduplicated (same_input false) committed", second.ID, last.Type, last.Detail)
			}
		})
	}
}
