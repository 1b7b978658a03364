package cli

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// purgeFixture is a database whose runs ran a year ago: run "done" completed a charge
// (kept forever) and a receipt (kept 90 days); run "review" waits for review.
type purgeFixture struct {
	path         string
	done, review int64
}

func setupPurge(t *testing.T) purgeFixture {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	defer st.Close()
	yearAgo := time.Now().Add(-365 * 24 * time.Hour)
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "test-worker", Clock: func() time.Time { return yearAgo }, ClockSync: -1})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, *onceflow.StepContext) (any, error) { return map[string]bool{"ok": true}, nil }
	for _, w := range []onceflow.Workflow{
		{Name: "order", Steps: []onceflow.Step{
			{ID: "charge", EffectKey: "charge:{input.id}", Do: ok},
			{ID: "receipt", Needs: []string{"charge"}, EffectKey: "receipt:{input.id}", Retention: 90 * 24 * time.Hour, Do: ok},
		}},
		{Name: "refund", Steps: []onceflow.Step{
			{ID: "notice", EffectKey: "refund-notice:{input.id}", Retention: 24 * time.Hour, Do: ok},
			{ID: "refund", EffectKey: "refund:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return nil, onceflow.PermanentError(errors.New("the card was closed"))
			}},
		}},
	} {
		if err := c.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	done, err := c.Start(ctx, "order", "evt-1", map[string]any{"id": 7})
	if err != nil {
		t.Fatal(err)
	}
	review, err := c.Start(ctx, "refund", "evt-2", map[string]any{"id": 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	return purgeFixture{path: path, done: done.ID, review: review.ID}
}

func purgeJSON(t *testing.T, args ...string) purgeView {
	t.Helper()
	r := runOK(t, append([]string{"purge", "--json"}, args...)...)
	var v purgeView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("purge --json: %v\n%s", err, r.stdout)
	}
	if v.PurgeReport == nil {
		t.Fatalf("purge --json printed no report: %s", r.stdout)
	}
	return v
}

func TestPurge(t *testing.T) {
	t.Parallel()
	f := setupPurge(t)
	db := "sqlite://" + f.path

	dry := purgeJSON(t, "--db", db, "--older-than", "90d", "--dry-run")
	if !dry.DryRun || dry.Runs.Count != 1 || dry.Effects.Count != 1 || dry.Steps.Count != 2 || dry.Attempts.Count != 2 || dry.Events.Count == 0 {
		t.Fatalf("dry run = %+v, want the finished run (2 steps, 2 attempts, its events) and the receipt's key", dry.PurgeReport)
	}
	if dry.RunsBefore.IsZero() || dry.Now.Sub(dry.RunsBefore) != 90*24*time.Hour {
		t.Errorf("dry run: now %s, runs_before %s; want 90 days apart", dry.Now, dry.RunsBefore)
	}

	got := purgeJSON(t, "--db", db, "--older-than", "90d", "--actor", "ops:ada")
	if got.DryRun || got.Batches != 1 || got.Actor != "ops:ada" {
		t.Errorf("purge: dry_run %v, batches %d, actor %q; want a real purge in 1 batch by ops:ada", got.DryRun, got.Batches, got.Actor)
	}
	for _, k := range [][2]store.PurgeCount{{dry.Runs, got.Runs}, {dry.Steps, got.Steps}, {dry.Attempts, got.Attempts}, {dry.Events, got.Events}, {dry.Effects, got.Effects}} {
		if k[0].Count != k[1].Count || !k[0].Oldest.Equal(k[1].Oldest) || !k[0].Newest.Equal(k[1].Newest) {
			t.Errorf("purge deleted %+v, the dry run announced %+v", k[1], k[0])
		}
	}

	st := openSQLite(t, f.path)
	defer st.Close()
	ctx := context.Background()
	if _, err := st.RunGetByID(ctx, f.done); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("finished run after the purge: %v, want ErrNotFound", err)
	}
	if r, err := st.RunGetByID(ctx, f.review); err != nil || r.State != store.StateNeedsReview {
		t.Errorf("run in review after the purge: %+v, %v; want it kept", r, err)
	}
	for key, kept := range map[string]bool{"charge:7": true, "receipt:7": false, "refund-notice:7": true} {
		_, err := st.EffectGetByKey(ctx, key)
		if (kept && err != nil) || (!kept && !errors.Is(err, store.ErrNotFound)) {
			t.Errorf("ledger key %s: %v; kept = %v expected", key, err, kept)
		}
	}
	evs, err := st.EventList(ctx, store.EventListParams{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var audited bool
	for _, e := range evs {
		if e.Type == store.EventRetentionPurged && e.Actor == "ops:ada" {
			audited = true
		}
	}
	if !audited {
		t.Error("no retention.purged event by ops:ada")
	}

	// Nothing left: the text report says so.
	r := runOK(t, "purge", "--db", db)
	for _, want := range []string{"purged " + db + " in 0 batch(es)", "runs: none (no --older-than)", "ledger keys  0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("purge printed\n%s\nwant %q in it", r.stdout, want)
		}
	}
}

func TestPurgeUsage(t *testing.T) {
	t.Parallel()
	f := setupPurge(t)
	for _, args := range [][]string{
		{"--older-than", "0d"},
		{"--older-than", "soon"},
		{"--older-than", "-3h"},
		{"--older-than", "59m"}, // shorter than the time a running client answers a repeated key from memory
		{"--batch-size", "0"},
		{"extra"},
	} {
		r := run(t, append([]string{"purge", "--db", "sqlite://" + f.path}, args...)...)
		if r.code != exitUsage {
			t.Errorf("purge %v: exit %d (%s), want %d", args, r.code, r.stderr, exitUsage)
		}
	}
	r := run(t, "purge", "--db", "sqlite://"+filepath.Join(t.TempDir(), "missing.db"))
	if r.code != exitError || !strings.Contains(r.stderr, "no database at") {
		t.Errorf("purge of a missing database: exit %d, %q", r.code, r.stderr)
	}
}
