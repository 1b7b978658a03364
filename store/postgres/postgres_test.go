package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/store/storetest"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "worker":
		os.Exit(childWorker())
	case "scheduler":
		os.Exit(childScheduler())
	}
	goleak.VerifyTestMain(testsvc.Report(m))
}

// testURL returns the test database's URL. Without one, or when the database cannot be
// reached, the test is skipped — unless CI=true, where that is a failure.
func testURL(t testing.TB) string {
	t.Helper()
	return testsvc.Postgres(t)
}

// admin opens a connection of its own to the test database, closed when the test ends.
func admin(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// newSchema names a fresh schema for one test and drops it, with everything in it, when
// the test ends (after the stores registered later are closed).
func newSchema(t testing.TB) string {
	t.Helper()
	_, schema := testsvc.PostgresSchema(t, "onceflow_test_")
	return schema
}

// openStore opens a store on schema and closes it when the test ends. params are added
// to the URL's query as key=value.
func openStore(t testing.TB, schema string, params ...string) *postgres.Store {
	t.Helper()
	u := testURL(t)
	if len(params) > 0 {
		v := url.Values{}
		for _, p := range params {
			k, val, _ := strings.Cut(p, "=")
			v.Set(k, val)
		}
		u = withParams(u, v)
	}
	s, err := postgres.Open(context.Background(), u, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// freshStore opens a store on a schema of its own.
func freshStore(t testing.TB) *postgres.Store {
	t.Helper()
	return openStore(t, newSchema(t))
}

func TestConformance(t *testing.T) {
	testURL(t)
	storetest.Exercise(t, func(t *testing.T) store.Store { return freshStore(t) })
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

// Several processes starting at once on an empty schema: one creates it and migrates, the
// others wait for the migration lock and find nothing left to do.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const openers = 6
	stores := make([]*postgres.Store, openers)
	errs := make([]error, openers)
	var wg sync.WaitGroup
	for i := range openers {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(t.Context(), testURL(t), postgres.Options{Schema: schema}) })
	}
	wg.Wait()
	for i, s := range stores {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
	}
	for i := range openers {
		wg.Go(func() { errs[i] = stores[i].Migrate(t.Context()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	want := migrationFiles(t)
	applied, known, err := stores[0].SchemaVersion(t.Context())
	if err != nil || applied != len(want) || known != len(want) {
		t.Errorf("SchemaVersion = %d, %d, %v; want %d, %d", applied, known, err, len(want), len(want))
	}
	rows, err := admin(t).Query(t.Context(), `SELECT version::text || ' ' || name FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+` ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("schema_migrations = %q, want %q", got, want)
	}
	if got := stores[3].Schema(); got != schema {
		t.Errorf("Schema() = %q, want %q", got, schema)
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
		_, name, _ := strings.Cut(strings.TrimSuffix(filepath.Base(n), ".sql"), "_")
		out = append(out, fmt.Sprintf("%d %s", i+1, name))
	}
	return out
}

// Concurrent transitions of one new entity: under different effect keys exactly one
// applies and the others are refused; under one effect key one applies and the others
// report it as replayed.
func TestEntityTransitionConcurrent(t *testing.T) {
	t.Parallel()
	s := freshStore(t)
	const n = 8
	for _, sameKey := range []bool{false, true} {
		entity := fmt.Sprintf("order:same-key-%v", sameKey)
		results := make([]*store.TransitionResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			key := fmt.Sprintf("pay:%s:%d", entity, i)
			if sameKey {
				key = "pay:" + entity
			}
			wg.Go(func() {
				results[i], errs[i] = s.EntityTransition(t.Context(), store.EntityTransitionParams{Key: entity, From: []string{"pending"}, Initial: "pending",
					To: "paid", EffectKey: key, RunID: int64(i + 1), Now: base})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("same key %v: %v", sameKey, err)
		}
		var applied, replayed, refused int
		for _, r := range results {
			switch {
			case r.Applied && r.Replayed:
				replayed++
			case r.Applied:
				applied++
			default:
				refused++
			}
			if r.State != "paid" {
				t.Errorf("same key %v: result %+v, want state paid", sameKey, r)
			}
		}
		if applied != 1 || (sameKey && replayed != n-1) || (!sameKey && refused != n-1) {
			t.Errorf("same key %v: applied %d, replayed %d, refused %d", sameKey, applied, replayed, refused)
		}
		if e, err := s.EntityGetByKey(t.Context(), entity); err != nil || e.Version != 1 {
			t.Errorf("same key %v: entity %+v, %v; want version 1", sameKey, e, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	u := testURL(t)
	cases := []struct {
		name, url string
		opts      postgres.Options
		wantErr   string
	}{
		{"BadURL", "postgres://%zz", postgres.Options{}, "postgres: open"},
		{"LongSchema", u, postgres.Options{Schema: strings.Repeat("s", 64)}, "not a valid PostgreSQL name"},
		{"Unreachable", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", postgres.Options{}, "postgres:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := postgres.Open(t.Context(), tc.url, tc.opts)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q, %+v) succeeded, want an error", tc.url, tc.opts)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Open(%q, %+v) = %v, want an error containing %q", tc.url, tc.opts, err, tc.wantErr)
			}
		})
	}
}

// TestEventsAppendOnly: stored events and the rows that derive events refuse an update
// that would change an event an operator has seen (triggers), even written by hand.
func TestEventsAppendOnly(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	run := insertRun(t, s, "k1")
	insertRun(t, s, "k1") // run.deduplicated, a stored event
	now := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	res, err := s.StepClaim(t.Context(), store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: 1, Workflows: []string{run.Workflow},
		Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "k1/a"}, nil }})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	before, err := s.EventList(t.Context(), store.EventListParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	db := admin(t)
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	for _, q := range []struct{ sql, refusal string }{
		{`UPDATE ` + table("events") + ` SET type = 'forged', reason = 'x' WHERE run_id = $1`, "append-only"},
		{`UPDATE ` + table("runs") + ` SET run_key = 'forged', created_by = 'x' WHERE id = $1`, "written once"},
		{`UPDATE ` + table("steps") + ` SET claimed_at = now(), lease_owner = 'x' WHERE run_id = $1`, "written once"},
	} {
		if _, err := db.Exec(t.Context(), q.sql, run.ID); err == nil || !strings.Contains(err.Error(), q.refusal) {
			t.Errorf("%s = %v, want a trigger to refuse it (%s)", q.sql, err, q.refusal)
		}
	}
	c := res.Claimed[0]
	errs, err := s.StepRecord(t.Context(), []store.StepRecordParams{{StepID: c.Step.ID, Owner: "w1", Attempt: 1, Now: now.Add(time.Second),
		Outcome: store.OutcomeSuccess, NextState: store.StateCompleted}})
	if err != nil || errs[0] != nil {
		t.Fatalf("record: %v %v", errs, err)
	}
	if _, err := db.Exec(t.Context(), `UPDATE `+table("attempts")+` SET outcome = 'forged', worker = 'x' WHERE run_id = $1`, run.ID); err == nil ||
		!strings.Contains(err.Error(), "written once") {
		t.Errorf("UPDATE attempts = %v, want a trigger to refuse it", err)
	}
	after, err := s.EventList(t.Context(), store.EventListParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	var types []store.EventType
	for _, e := range after {
		types = append(types, e.Type)
	}
	if len(before) != 4 || fmt.Sprint(types) != "[run.created run.deduplicated step.claimed run.state_changed step.completed run.state_changed]" {
		t.Fatalf("events %d then %v", len(before), types)
	}
	for i, e := range before {
		if a := after[i]; a.ID != e.ID || a.Type != e.Type || a.Reason != e.Reason || a.Actor != e.Actor || string(a.Detail) != string(e.Detail) {
			t.Errorf("event %d after the refused updates = %+v %s, want %+v %s", i, a, a.Detail, e, e.Detail)
		}
	}
}

// Text PostgreSQL cannot store (NUL bytes, invalid UTF-8) in an error or a response
// excerpt from a destination must not make the record fail: it is replaced.
func TestRecordUnstorableText(t *testing.T) {
	t.Parallel()
	s := freshStore(t)
	run := insertRun(t, s, "k1")
	res, err := s.StepClaim(t.Context(), store.StepClaimParams{Owner: "w1", Now: base, LeaseFor: time.Minute, Limit: 1, Workflows: []string{"orders"},
		Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "k"}, nil }})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("StepClaim = %+v, %v", res, err)
	}
	c := res.Claimed[0]
	errs, err := s.StepRecord(t.Context(), []store.StepRecordParams{{
		StepID: c.Step.ID, Owner: "w1", Attempt: 1, Now: base.Add(time.Second), Outcome: store.OutcomeRetryable,
		Error: "bad\x00byte \xff", ResponseExcerpt: "\x00\x00", NextState: store.StateRetrying, NextAt: base.Add(time.Minute),
		Detail: map[string]any{"raw": "nul\x00 and a literal \\u0000"},
	}})
	if err != nil || errs[0] != nil {
		t.Fatalf("StepRecord = %v, %v", errs, err)
	}
	atts, err := s.AttemptListByRun(t.Context(), run.ID)
	if err != nil || len(atts) != 1 {
		t.Fatalf("AttemptListByRun = %v, %v", atts, err)
	}
	if got := atts[0].Error; got != "bad\uFFFDbyte \uFFFD" {
		t.Errorf("attempt error = %q", got)
	}
	evs, err := s.EventList(t.Context(), store.EventListParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(evs[len(evs)-2].Detail, &d); err != nil {
		t.Fatal(err)
	}
	if d["raw"] != "nul\uFFFD and a literal \\u0000" {
		t.Errorf("detail raw = %q (event %s)", d["raw"], evs[len(evs)-2].Type)
	}
}

// EventList shows events in commit order: an event committed with a larger ID while a
// transaction holding a smaller one is open stays hidden until that transaction ends, so
// that a reader paging with AfterID never skips one.
func TestEventListCommitOrder(t *testing.T) {
	t.Parallel()
	s := freshStore(t)
	ctx := t.Context()
	first := insertRun(t, s, "first")

	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	open, created, err := s.RunInsertTx(ctx, tx, store.RunInsertParams{Workflow: "orders", RunKey: "open", Input: json.RawMessage(`{}`), Now: base,
		Steps: []store.StepInsert{{Name: "a"}}})
	if err != nil || !created {
		t.Fatalf("RunInsertTx = %v, %v", created, err)
	}
	later := insertRun(t, s, "later")

	keys := func() []int64 {
		t.Helper()
		var out []int64
		for after := int64(0); ; {
			evs, err := s.EventList(ctx, store.EventListParams{AfterID: after, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				return out
			}
			out = append(out, evs[0].RunID)
			after = evs[0].ID
		}
	}
	if got := keys(); !slices.Equal(got, []int64{first.ID}) {
		t.Errorf("events while the transaction is open: runs %v, want only %d (the later run %d is behind the open one)", got, first.ID, later.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := keys(); !slices.Equal(got, []int64{first.ID, open.ID, later.ID}) {
		t.Errorf("events after commit: runs %v, want %d, %d, %d", got, first.ID, open.ID, later.ID)
	}
}

// A reader tailing the audit trail with AfterID while several writers append to it
// concurrently (so that their transactions commit out of ID order) sees every event.
func TestEventListTailNeverSkips(t *testing.T) {
	t.Parallel()
	s := freshStore(t)
	const writers, runsEach = 4, 50
	var wg sync.WaitGroup
	var writing atomic.Int32
	writing.Store(writers)
	for w := range writers {
		wg.Go(func() {
			defer writing.Add(-1)
			for i := range runsEach {
				insertRun(t, s, fmt.Sprintf("w%d-%d", w, i))
			}
		})
	}
	var tailed []int64
	for after := int64(0); ; {
		done := writing.Load() == 0 // read before listing: nothing is written after
		page, err := s.EventList(t.Context(), store.EventListParams{AfterID: after, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			tailed = append(tailed, e.ID)
			after = e.ID
		}
		if done && len(page) == 0 {
			break
		}
	}
	wg.Wait()
	all, err := s.EventList(t.Context(), store.EventListParams{Limit: 10 * writers * runsEach})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range all {
		ids = append(ids, e.ID)
	}
	if len(ids) != writers*runsEach || !slices.Equal(tailed, ids) {
		t.Errorf("the tail saw %d events, the trail has %d (of %d written); missed: %v", len(tailed), len(ids), writers*runsEach, missing(ids, tailed))
	}
}

// missing returns the elements of all that are not in seen.
func missing(all, seen []int64) []int64 {
	var out []int64
	for _, id := range all {
		if !slices.Contains(seen, id) {
			out = append(out, id)
		}
	}
	return out
}

func TestRunInsertTx(t *testing.T) {
	t.Parallel()
	s := freshStore(t)
	ctx := t.Context()

	t.Run("NotATx", func(t *testing.T) {
		_, _, err := s.RunInsertTx(ctx, "tx", store.RunInsertParams{Workflow: "orders", RunKey: "k", Input: json.RawMessage(`{}`), Now: base})
		if err == nil || !strings.Contains(err.Error(), "want a pgx.Tx") {
			t.Errorf("RunInsertTx with a string = %v, want a clear error", err)
		}
	})
	t.Run("ErrorKeepsCallerTxUsable", func(t *testing.T) {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		// Two steps with the same name break the unique (run_id, name) constraint.
		_, _, err = s.RunInsertTx(ctx, tx, store.RunInsertParams{Workflow: "orders", RunKey: "dup-steps", Input: json.RawMessage(`{}`), Now: base,
			Steps: []store.StepInsert{{Name: "a"}, {Name: "a"}}})
		if err == nil {
			t.Fatal("RunInsertTx with duplicate step names succeeded")
		}
		run, created, err := s.RunInsertTx(ctx, tx, store.RunInsertParams{Workflow: "orders", RunKey: "good", Input: json.RawMessage(`{}`), Now: base,
			Steps: []store.StepInsert{{Name: "a"}}})
		if err != nil || !created {
			t.Fatalf("RunInsertTx after a failed one = %v, %v; want the caller's transaction still usable", created, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		runs, err := s.RunList(ctx, store.RunListParams{})
		if err != nil || len(runs) != 1 || runs[0].ID != run.ID {
			t.Errorf("runs after commit = %v, %v; want only run %d", runs, err, run.ID)
		}
	})
	t.Run("OtherSearchPath", func(t *testing.T) {
		// The caller's connection searches another schema: the run still lands in the store's.
		conn := admin(t)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(ctx, `SET LOCAL search_path TO pg_catalog`); err != nil {
			t.Fatal(err)
		}
		run, _, err := s.RunInsertTx(ctx, tx, store.RunInsertParams{Workflow: "orders", RunKey: "elsewhere", Input: json.RawMessage(`{}`), Now: base})
		if err != nil {
			t.Fatal(err)
		}
		var path string
		if err := tx.QueryRow(ctx, `SHOW search_path`).Scan(&path); err != nil || path != "pg_catalog" {
			t.Errorf("caller's search_path after RunInsertTx = %q, %v; want pg_catalog restored", path, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RunGetByID(ctx, run.ID); err != nil {
			t.Errorf("RunGetByID(%d) after commit: %v", run.ID, err)
		}
	})
}

// A run inserted through one store makes another store's notification channel fire, and
// the channel closes when its context ends.
func TestNotifications(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := b.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insertRun(t, a, "k1")
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("notification channel closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10 s of a RunInsert on another store")
	}
	cancel()
	for range ch { // drains, and ends when the channel is closed
	}
}

// The listener reconnects after its connection is killed, and says so with a value since
// notifications may have been missed.
func TestNotificationsReconnect(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	app := "onceflow_listen_" + schema[len(schema)-8:]
	a, b := openStore(t, schema), openStore(t, schema, "application_name="+app)
	ch, err := b.Notifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The listening connection carries the store's application_name; if nothing was
	// killed, the test below would pass without any reconnection.
	if n := terminateBackends(t, admin(t), app); n == 0 {
		t.Fatalf("found no connection named %s to kill: the listening connection does not carry the store's application_name", app)
	}
	deadline := time.After(20 * time.Second)
	for i := 0; ; i++ {
		// Each insert after the reconnection is notified; the reconnection itself sends one.
		insertRun(t, a, fmt.Sprintf("k%d", i))
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatal("the notification channel closed after the listening connection was killed: the listener gave up instead of reconnecting")
			}
			return
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notification within 20 s after the listening connection was killed")
		}
	}
}

// startTxBundle is a client on a fresh schema with a one-step workflow that counts calls.
type startTxBundle struct {
	store  *postgres.Store
	client *onceflow.Client
	calls  atomic.Int64
	done   chan string // run keys whose step ran
}

func newStartTxBundle(t *testing.T) *startTxBundle {
	t.Helper()
	b := &startTxBundle{store: freshStore(t), done: make(chan string, 10)}
	// Polling is slowed down to an hour: only a notification can wake the worker quickly.
	c, err := onceflow.New(onceflow.Config{Store: b.store, WorkerID: "w1", PollInterval: time.Hour, ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "orders", Steps: []onceflow.Step{{ID: "confirm", Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
		b.calls.Add(1)
		b.done <- sc.RunKey
		return map[string]any{"ok": true}, nil
	}}}}); err != nil {
		t.Fatal(err)
	}
	b.client = c
	return b
}

func TestStartTx(t *testing.T) {
	t.Parallel()
	b := newStartTxBundle(t)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- b.client.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	pool := b.store.Pool()

	// Rolled back: nothing exists, nothing runs.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.StartTx(ctx, tx, "orders", "order-1", map[string]any{"order": 1}); err != nil {
		t.Fatalf("StartTx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if runs, err := b.client.Store().RunList(ctx, store.RunListParams{}); err != nil || len(runs) != 0 {
		t.Fatalf("runs after a rollback = %d, %v; want none", len(runs), err)
	}
	if evs, err := b.client.Store().EventList(ctx, store.EventListParams{}); err != nil || len(evs) != 0 {
		t.Fatalf("events after a rollback = %d, %v; want none", len(evs), err)
	}

	// Committed: the run exists and is executed, woken by the notification the commit
	// delivers (the poll interval is an hour).
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.client.StartTx(ctx, tx, "orders", "order-2", map[string]any{"order": 2})
	if err != nil {
		t.Fatalf("StartTx: %v", err)
	}
	if _, err := b.client.GetRun(ctx, run.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRun before the commit = %v, want ErrNotFound (not visible yet)", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case key := <-b.done:
		if key != "order-2" {
			t.Fatalf("executed run %q, want order-2", key)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the committed run was not executed within 20 s")
	}
	waitRunState(t, b.client, run.ID, store.StateCompleted)

	// The same key again in another transaction: the existing run, a duplicate.
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.client.StartTx(ctx, tx, "orders", "order-2", map[string]any{"order": 2})
	if err != nil || again.ID != run.ID || !again.Duplicate {
		t.Fatalf("StartTx of a started key = %+v, %v; want run %d, duplicate", again, err, run.ID)
	}
	var conflict *onceflow.RunConflictError
	if _, err := b.client.StartTx(ctx, tx, "orders", "order-2", map[string]any{"order": 3}); !errors.As(err, &conflict) {
		t.Fatalf("StartTx of a started key with another input = %v, want a *RunConflictError", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("step calls = %d, want 1", n)
	}
}

func TestStartTxErrors(t *testing.T) {
	t.Parallel()
	b := newStartTxBundle(t)
	if _, err := b.client.StartTx(t.Context(), struct{}{}, "orders", "k", nil); err == nil || !strings.Contains(err.Error(), "pgx.Tx") {
		t.Errorf("StartTx with a non-transaction = %v, want an error naming pgx.Tx", err)
	}

	// A store that cannot join the caller's transaction.
	lite, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	c, err := onceflow.New(onceflow.Config{Store: lite})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "orders", Steps: []onceflow.Step{{ID: "a", Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartTx(t.Context(), nil, "orders", "k", nil); err == nil || !strings.Contains(err.Error(), "cannot join") {
		t.Errorf("StartTx on SQLite = %v, want an error saying the store cannot join the transaction", err)
	}
}

// waitRunState polls a run until it reaches want.
func waitRunState(t *testing.T, c *onceflow.Client, id int64, want store.State) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d is %s after 30 s, want %s", id, r.State, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withParams returns the URL u with extra query parameters.
func withParams(u string, params url.Values) string {
	if strings.Contains(u, "?") {
		return u + "&" + params.Encode()
	}
	return u + "?" + params.Encode()
}

// Text PostgreSQL cannot store in a run's key or a step's effect key fails only its own
// item: the param gets its own error, the candidate is parked with an invalid key, and the
// others of the batch go on.
func TestBatchUnstorableText(t *testing.T) {
	t.Parallel()
	s := freshStore(t)
	params := func(key string) store.RunInsertParams {
		return store.RunInsertParams{Workflow: "orders", RunKey: key, Input: json.RawMessage(`{}`), Now: base, Steps: []store.StepInsert{{Name: "a"}}}
	}
	res, err := s.RunInsertMany(t.Context(), []store.RunInsertParams{params("good"), params("bad\x00key"), params("also-good")})
	if err != nil {
		t.Fatalf("RunInsertMany: %v", err)
	}
	if res[0].Err != nil || !res[0].Created || res[1].Err == nil || res[1].Run != nil || res[2].Err != nil || !res[2].Created {
		t.Fatalf("RunInsertMany = %+v, want the middle param refused alone", res)
	}
	claim, err := s.StepClaim(t.Context(), store.StepClaimParams{Owner: "w1", Now: base, LeaseFor: time.Minute, Limit: 10, Workflows: []string{"orders"},
		Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			if c.Run.RunKey == "good" {
				return store.EffectSpec{Key: "nul\x00key"}, nil
			}
			return store.EffectSpec{Key: "fine"}, nil
		}})
	if err != nil {
		t.Fatalf("StepClaim: %v", err)
	}
	if len(claim.Claimed) != 1 || claim.Claimed[0].Run.ID != res[2].Run.ID || claim.Parked != 1 {
		t.Fatalf("StepClaim = %+v, want also-good claimed and good parked", claim)
	}
	steps, err := s.StepListByRun(t.Context(), res[0].Run.ID)
	if err != nil || len(steps) != 1 || steps[0].State != store.StateNeedsReview || steps[0].Reason != store.ReasonInvalidKey {
		t.Errorf("steps of good = %+v, %v; want a parked with reason %s", steps, err, store.ReasonInvalidKey)
	}
}
