package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openStore opens the store at path and closes it when the test ends.
func openStore(t *testing.T, path string, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// rawDB opens a second, independent database/sql connection to the file.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) store.Store {
		return openStore(t, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	})
}

var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func insertRun(t *testing.T, s store.Store, key string) *store.Run {
	t.Helper()
	run, _, err := s.RunInsert(t.Context(), store.RunInsertParams{
		Workflow: "orders", RunKey: key, Entity: "order:" + key, Input: json.RawMessage(`{}`), InputHash: "h",
		Now: base, Steps: []store.StepInsert{{Name: "a"}},
	})
	if err != nil {
		t.Fatalf("RunInsert: %v", err)
	}
	return run
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	cases := []struct {
		synchronous string
		want        string // PRAGMA synchronous: 1 NORMAL, 2 FULL, 3 EXTRA
	}{
		{"", "2"},
		{"FULL", "2"},
		{"normal", "1"},
		{"EXTRA", "3"},
	}
	for _, tc := range cases {
		t.Run("synchronous="+tc.synchronous, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "onceflow.db")
			s := openStore(t, path, sqlite.Options{Synchronous: tc.synchronous})

			// The journal mode is a property of the file: another connection sees it.
			var mode string
			if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if mode != "wal" {
				t.Errorf("journal_mode = %q, want wal", mode)
			}
			// synchronous belongs to each connection: read it on the store's writer.
			for pragma, want := range map[string]string{"synchronous": tc.want, "journal_mode": "wal", "foreign_keys": "1"} {
				got, err := sqlite.WriterPragma(t.Context(), s, pragma)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("writer PRAGMA %s = %q, want %q", pragma, got, want)
				}
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name    string
		path    string
		opts    sqlite.Options
		wantErr string
	}{
		{"BadSynchronous", filepath.Join(dir, "a.db"), sqlite.Options{Synchronous: "OFF"}, `synchronous "OFF" is not one of FULL, NORMAL, EXTRA`},
		{"MissingDirectory", filepath.Join(dir, "missing", "a.db"), sqlite.Options{}, "does not exist"},
		{"EmptyPath", "", sqlite.Options{}, "empty path"},
		{"QueryInPath", filepath.Join(dir, "a.db?mode=ro"), sqlite.Options{}, "must not contain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), tc.path, tc.opts)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q, %+v) succeeded, want an error", tc.path, tc.opts)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Open(%q, %+v) = %v, want an error containing %q", tc.path, tc.opts, err, tc.wantErr)
			}
		})
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := insertRun(t, s, "k1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, path, sqlite.Options{})
	got, err := s2.RunGetByID(t.Context(), run.ID)
	if err != nil {
		t.Fatalf("RunGetByID after reopening: %v", err)
	}
	if got.RunKey != "k1" || got.Entity != "order:k1" || !got.CreatedAt.Equal(base) {
		t.Errorf("run after reopening = %+v, want %+v", got, run)
	}
	again, created, err := s2.RunInsert(t.Context(), store.RunInsertParams{Workflow: "orders", RunKey: "k1", Input: json.RawMessage(`{}`), Now: base})
	if err != nil || created || again.ID != run.ID {
		t.Errorf("RunInsert of the same key after reopening = run %v, created %v, %v; want run %d, false", again, created, err, run.ID)
	}
	applied, known, err := s2.SchemaVersion(t.Context())
	if n := len(migrationFiles(t)); err != nil || applied != n || known != n {
		t.Errorf("SchemaVersion = %d, %d, %v; want %d, %d", applied, known, err, n, n)
	}
}

func TestSchemaMigrations(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	s := openStore(t, path, sqlite.Options{})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	rows, err := rawDB(t, path).Query(`SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s", v, name))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := migrationFiles(t); !slices.Equal(got, want) {
		t.Errorf("schema_migrations = %q, want %q", got, want)
	}
}

// migrationFiles lists the embedded migrations as "N name", from the files themselves.
func migrationFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v", err)
	}
	var out []string
	for i, n := range names {
		base := strings.TrimSuffix(filepath.Base(n), ".sql")
		_, name, _ := strings.Cut(base, "_")
		out = append(out, fmt.Sprintf("%d %s", i+1, name))
	}
	return out
}

// TestEventsAppendOnly: stored events and the rows that derive events refuse an update
// that would change an event an operator has seen (triggers), even written by hand.
func TestEventsAppendOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	s := openStore(t, path, sqlite.Options{})
	run := insertRun(t, s, "k1")
	insertRun(t, s, "k1") // run.deduplicated, a stored event
	now := base.Add(time.Second)
	res, err := s.StepClaim(t.Context(), store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: 1, Workflows: []string{"orders"},
		Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "k1/a"}, nil }})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	before, err := s.EventList(t.Context(), store.EventListParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, q := range []struct{ sql, refusal string }{
		{`UPDATE events SET type = 'forged', reason = 'x' WHERE run_id = ?`, "append-only"},
		{`UPDATE runs SET run_key = 'forged', created_by = 'x' WHERE id = ?`, "written once"},
		{`UPDATE steps SET claimed_at = 1, lease_owner = 'x' WHERE run_id = ?`, "written once"},
	} {
		if _, err := db.Exec(q.sql, run.ID); err == nil || !strings.Contains(err.Error(), q.refusal) {
			t.Errorf("%s = %v, want a trigger to refuse it (%s)", q.sql, err, q.refusal)
		}
	}
	c := res.Claimed[0]
	errs, err := s.StepRecord(t.Context(), []store.StepRecordParams{{StepID: c.Step.ID, Owner: "w1", Attempt: 1, Now: now.Add(time.Second),
		Outcome: store.OutcomeSuccess, NextState: store.StateCompleted}})
	if err != nil || errs[0] != nil {
		t.Fatalf("record: %v %v", errs, err)
	}
	if _, err := db.Exec(`UPDATE attempts SET outcome = 'forged', worker = 'x' WHERE run_id = ?`, run.ID); err == nil || !strings.Contains(err.Error(), "written once") {
		t.Errorf("UPDATE attempts = %v, want a trigger to refuse it", err)
	}
	after, err := s.EventList(t.Context(), store.EventListParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 4 || len(after) != 6 || fmt.Sprint(eventTypes(after)) != "[run.created run.deduplicated step.claimed run.state_changed step.completed run.state_changed]" {
		t.Fatalf("events %v then %v", eventTypes(before), eventTypes(after))
	}
	for i, e := range before {
		if a := after[i]; a.ID != e.ID || a.Type != e.Type || a.Reason != e.Reason || a.Actor != e.Actor || string(a.Detail) != string(e.Detail) {
			t.Errorf("event %d after the refused updates = %+v %s, want %+v %s", i, a, a.Detail, e, e.Detail)
		}
	}
}

func eventTypes(evs []*store.Event) []store.EventType {
	var out []store.EventType
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestClosedStore(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunGetByID(t.Context(), 1); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunGetByID on a closed store = %v, want a non-NotFound error", err)
	}
}

// Close waits for the write in progress instead of finalizing its statements under it (a
// test's cleanup closing the store beside a repeated start's background write crashed
// inside the driver): every write racing Close either commits or is refused, and under
// -race the two never touch the statements at once.
func TestCloseWaitsForTheWriteInProgress(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	start := make(chan struct{})
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			<-start
			_, _, err := s.RunInsert(t.Context(), store.RunInsertParams{Workflow: "w", RunKey: fmt.Sprintf("k%d", i), Input: []byte(`{}`),
				InputHash: "h", Steps: []store.StepInsert{{Name: "a"}}, Actor: "test", Now: now})
			errs <- err
		}()
	}
	close(start)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if err := <-errs; err != nil && !strings.Contains(err.Error(), "closed") {
			t.Errorf("a write racing Close: %v; want it committed or refused as closed", err)
		}
	}
	if _, _, err := s.RunInsert(t.Context(), store.RunInsertParams{Workflow: "w", RunKey: "after", Input: []byte(`{}`), InputHash: "h",
		Steps: []store.StepInsert{{Name: "a"}}, Actor: "test", Now: now}); err == nil || !strings.Contains(err.Error(), "the store is closed") {
		t.Errorf("a write after Close: %v; want it refused, the store closed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// A write whose context ends while it begins leaves the held write connection outside any
// transaction: the next write begins (a BEGIN cut short had begun the transaction, and
// every later write failed with "cannot start a transaction within a transaction" — a
// worker's shutdown then could not record its interrupted step).
func TestWriteCutShortLeavesNoTransactionOpen(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	insert := func(ctx context.Context, key string) error {
		_, _, err := s.RunInsert(ctx, store.RunInsertParams{Workflow: "w", RunKey: key, Input: []byte(`{}`), InputHash: "h",
			Steps: []store.StepInsert{{Name: "a"}}, Actor: "test", Now: now})
		return err
	}
	for i := range 400 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%40)*time.Microsecond)
		_ = insert(ctx, fmt.Sprintf("cut-%d", i))
		cancel()
		if err := insert(t.Context(), fmt.Sprintf("next-%d", i)); err != nil {
			t.Fatalf("the write after one cut short after %d µs: %v", i%40, err)
		}
	}
}
