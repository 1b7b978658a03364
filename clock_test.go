package onceflow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// skewed is a machine's clock off by d.
func skewed(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// pgShared opens a schema of its own in the PostgreSQL test database and returns a
// function that opens one more store on it (one per process in a deployment).
func pgShared(t *testing.T) func() *postgres.Store {
	t.Helper()
	u, schema := testsvc.PostgresSchema(t, "onceflow_clock_")
	return func() *postgres.Store {
		t.Helper()
		st, err := postgres.Open(t.Context(), u, postgres.Options{Schema: schema})
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("open the PostgreSQL test database: %v", err)
			}
			t.Skipf("the PostgreSQL test database is unreachable: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
}

// readDBClock reads the database's clock, as the test's own witness of the time.
func readDBClock(st *postgres.Store) (time.Time, error) {
	var now time.Time
	err := st.Pool().QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now)
	return now, err
}

func dbClock(t *testing.T, st *postgres.Store) time.Time {
	t.Helper()
	now, err := readDBClock(st)
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// leaderOf returns who holds the leadership called name ("" for nobody yet).
func leaderOf(t *testing.T, st *postgres.Store, name string) string {
	t.Helper()
	var owner string
	err := st.Pool().QueryRow(context.Background(), `SELECT owner FROM leaders WHERE name = $1`, name).Scan(&owner)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return owner
}

// clockTolerance is how far the engine's time may be from the database's clock, as the
// test reads it: the measurement's error is half a round trip on loopback, plus the time
// the test takes to read the clock after what it checks.
const clockTolerance = 250 * time.Millisecond

// Two processes on one PostgreSQL whose clocks are 90 s ahead and 90 s behind (and a third
// that only starts runs, at the right time) agree on every decision, as they all take the
// database's clock: the fast one reaps none of the slow one's live leases, so no step is
// executed twice; no per-second tick fires before its time by the database's clock, none
// is lost or skipped; a delay waits its time; and when the leader of the schedules stops,
// the other takes over within the documented four scheduling intervals.
func TestTwoClocksOnePostgres(t *testing.T) {
	ctx := t.Context()
	open := pgShared(t)
	witness := open()

	dest := newDestination(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	send := func(c context.Context, sc *onceflow.StepContext) (any, error) {
		out, err := post(dest.URL)(c, sc)
		if err != nil {
			return nil, err
		}
		select {
		case <-release:
		case <-c.Done():
			return nil, c.Err()
		}
		return out, nil
	}
	steps := onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "send", EffectKey: "send:{input.id}", Do: send}}}
	var (
		mu    sync.Mutex
		ranAt time.Time // the database's clock when the delayed step ran
	)
	delayed := onceflow.Workflow{Name: "d", Steps: []onceflow.Step{{ID: "later", Delay: 3 * time.Second,
		Do: func(context.Context, *onceflow.StepContext) (any, error) {
			now, err := readDBClock(witness)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			ranAt = now
			mu.Unlock()
			return nil, nil
		}}}}
	tick := onceflow.Workflow{Name: "tick", Steps: []onceflow.Step{{ID: "noop", Do: noop}}}
	perSecond := onceflow.Schedule{Workflow: "tick", Cron: "* * * * * *"}

	newClient := func(id string, clock func() time.Time, wfs ...onceflow.Workflow) *onceflow.Client {
		t.Helper()
		c, err := onceflow.New(onceflow.Config{Store: open(), WorkerID: id, Clock: clock,
			PollInterval: 20 * time.Millisecond, ReapInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wfs {
			if err := c.Register(w); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	fast := newClient("fast", skewed(90*time.Second), delayed, tick)
	slow := newClient("slow", skewed(-90*time.Second), steps, tick)
	starter := newClient("starter", time.Now, delayed)
	for _, c := range []*onceflow.Client{fast, slow} {
		if err := c.RegisterSchedule(perSecond); err != nil {
			t.Fatal(err)
		}
	}

	// Every 100 ms, no tick run may exist before its time by the database's clock.
	watchCtx, stopWatch := context.WithCancel(ctx)
	early := make(chan string, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			runs, err := witness.RunList(watchCtx, store.RunListParams{Workflow: "tick", Limit: 10000})
			if err != nil {
				return
			}
			now, err := readDBClock(witness)
			if err != nil {
				return
			}
			for _, r := range runs {
				at, err := time.Parse(time.RFC3339, strings.TrimPrefix(r.RunKey, "tick:"))
				if err != nil {
					early <- fmt.Sprintf("run key %q: %v", r.RunKey, err)
					return
				}
				if at.After(now.Add(clockTolerance)) {
					early <- fmt.Sprintf("the tick of %s was fired %s early by the database's clock (run %d, at %s)",
						at.Format(time.RFC3339), at.Sub(now).Round(time.Millisecond), r.ID, now.Format(time.RFC3339Nano))
					return
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	checkEarly := func() {
		t.Helper()
		select {
		case msg := <-early:
			t.Error(msg)
		default:
		}
	}
	t.Cleanup(func() { stopWatch(); <-watched })

	stopFast := serve(t, fast)
	waitFor(t, "the fast process to lead the schedules", func() bool { return leaderOf(t, witness, "scheduler") == "fast" })
	stopSlow := serve(t, slow)

	// The slow process claims four steps and works on them; the fast one learns the
	// workflow, and its reaper looks at their leases.
	var runs []*onceflow.Run
	for i := range 4 {
		r, err := slow.Start(ctx, "w", fmt.Sprint("k", i), map[string]any{"id": i})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	waitFor(t, "the slow process to act on the four steps", func() bool {
		n, _, _ := dest.snapshot()
		return n >= 4
	})
	for _, r := range runs {
		list, err := witness.StepListByRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s := list[0]; s.State != store.StateProcessing || s.LeaseOwner != "slow" {
			t.Errorf("run %s: step %s (%s), lease of %q, while the slow process works on it; want processing under its lease",
				r.RunKey, s.State, s.Reason, s.LeaseOwner)
		}
	}
	if err := fast.Register(steps); err != nil {
		t.Fatal(err)
	}
	if n, err := fast.Reap(ctx); err != nil || n != 0 {
		t.Errorf("the fast process reaped %d live leases of the slow one (%v); want none", n, err)
	}

	// A delay started by the third process waits its time by the database's clock.
	startedAt := dbClock(t, witness)
	d, err := starter.Start(ctx, "d", "d1", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delayed step to run", func() bool {
		r, err := witness.RunGetByID(ctx, d.ID)
		return err == nil && r.State == store.StateCompleted
	})
	mu.Lock()
	waited := ranAt.Sub(startedAt)
	mu.Unlock()
	if waited < 3*time.Second-clockTolerance {
		t.Errorf("the 3s delay ran %s after its start by the database's clock", waited.Round(time.Millisecond))
	}
	checkEarly()

	releaseAll()
	waitFor(t, "the four runs to complete", func() bool {
		for _, r := range runs {
			if got, err := witness.RunGetByID(ctx, r.ID); err != nil || got.State != store.StateCompleted {
				return false
			}
		}
		return true
	})
	if n, keys, _ := dest.snapshot(); n != 4 {
		t.Errorf("the destination was called %d times for four steps: %v", n, keys)
	}

	// The fast leader stops, after it fired ticks; the slow process takes the schedules
	// over in time.
	waitFor(t, "the fast process to fire two ticks", func() bool { return len(tickKeys(t, witness)) >= 2 })
	if got := leaderOf(t, witness, "scheduler"); got != "fast" {
		t.Fatalf("the schedules' leader is %q, want fast", got)
	}
	stopFast()
	stoppedAt := dbClock(t, witness)
	const failover = 4 * time.Second // four ScheduleIntervals: three of leadership, one until the next round
	deadline := time.Now().Add(15 * time.Second)
	for leaderOf(t, witness, "scheduler") != "slow" {
		if time.Now().After(deadline) {

			checkEarly()
			t.Fatalf("the slow process had not taken the schedules over 15s after the fast leader stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := dbClock(t, witness).Sub(stoppedAt); took > failover+time.Second {
		t.Fatalf("the slow process took the schedules over %s after the fast leader stopped; documented: %s", took.Round(time.Millisecond), failover)
	}
	before := len(tickKeys(t, witness))
	waitFor(t, "the slow process to fire two ticks", func() bool { return len(tickKeys(t, witness)) >= before+2 })
	stopSlow()
	stopWatch()
	<-watched
	checkEarly()

	// No tick was lost: one run per second from the first to the last, none skipped.
	keys := tickKeys(t, witness)
	for i := 1; i < len(keys); i++ {
		a, _ := time.Parse(time.RFC3339, strings.TrimPrefix(keys[i-1], "tick:"))
		b, _ := time.Parse(time.RFC3339, strings.TrimPrefix(keys[i], "tick:"))
		if b.Sub(a) != time.Second {
			t.Fatalf("ticks %s and %s follow each other: the ticks between were lost (%d ticks)", keys[i-1], keys[i], len(keys))
		}
	}
	evs, err := witness.EventList(ctx, store.EventListParams{Entity: "schedule:tick", Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == store.EventScheduleTickSkipped || e.Type == store.EventScheduleTickLate {
			t.Fatalf("%s: %s", e.Type, e.Detail)
		}
	}
	if fs, ss := fast.ClockStatus(), slow.ClockStatus(); fs.Source != onceflow.ClockSourceDatabase || ss.Source != onceflow.ClockSourceDatabase ||
		(fs.Skew-90*time.Second).Abs() > time.Second || (ss.Skew+90*time.Second).Abs() > time.Second {
		t.Fatalf("clock status fast %+v, slow %+v; want the database's clock, skews +90s and -90s", fs, ss)
	}
}

// tickKeys returns the run keys of the tick workflow, in time order.
func tickKeys(t *testing.T, st store.Store) []string {
	t.Helper()
	runs, err := st.RunList(context.Background(), store.RunListParams{Workflow: "tick", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range runs {
		keys = append(keys, r.RunKey)
	}
	slices.Sort(keys)
	return keys
}

// jumpClock is this machine's clock as an operator or NTP steps it: real time plus an
// offset the test changes at once.
type jumpClock struct{ off atomic.Int64 }

func (j *jumpClock) Now() time.Time       { return time.Now().Add(time.Duration(j.off.Load())) }
func (j *jumpClock) Jump(d time.Duration) { j.off.Add(int64(d)) }

// sqliteFile opens a SQLite file and returns the store and a plain connection to the same
// file for what the store does not show (the leaderships).
func sqliteFile(t *testing.T) (*sqlite.Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return st, db
}

// leaseOf returns when the leadership called name expires (microseconds, as SQLite keeps
// it; 0 for none).
func leaseOf(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var exp int64
	if err := db.QueryRow(`SELECT expires_at FROM leaders WHERE name = ?`, name).Scan(&exp); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return exp
}

// On SQLite the engine's time is the machine's clock, and when it jumps ten minutes
// forward while a step runs, no process (two share the file here) reaps the step's live
// lease: its worker renews it at the new time at once and the reapers wait one lease
// duration. The step runs once; a lease whose worker did vanish is still reaped after the
// wait.
func TestClockJumpForwardKeepsLiveLeases(t *testing.T) {
	ctx := t.Context()
	st, _ := sqliteFile(t)
	clk := &jumpClock{}
	var calls atomic.Int64 // of the live run's step
	running, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	w := onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "send", EffectKey: "send:{input.id}",
		Do: func(c context.Context, sc *onceflow.StepContext) (any, error) {
			if sc.RunKey != "live" {
				return map[string]any{"ok": true}, nil
			}
			if calls.Add(1) == 1 {
				close(running)
			}
			select {
			case <-release:
				return map[string]any{"ok": true}, nil
			case <-c.Done():
				return nil, c.Err()
			}
		}}}}
	var clients []*onceflow.Client
	for _, id := range []string{"a", "b"} {
		c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: id, Clock: clk.Now, LeaseFor: 2 * time.Second,
			PollInterval: 20 * time.Millisecond, ReapInterval: 20 * time.Millisecond, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(w); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	// A worker that vanishes holds one run's step; the other is left to the two processes.
	gone, err := clients[0].Start(ctx, "w", "gone", map[string]any{"id": 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.StepClaim(ctx, store.StepClaimParams{Owner: "vanished", Now: clk.Now(), LeaseFor: 2 * time.Second, Limit: 1,
		Workflows: []string{"w"}, Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "send:2"}, nil }})
	if err != nil || len(res.Claimed) != 1 || res.Claimed[0].Run.ID != gone.ID {
		t.Fatalf("claim by the vanished worker: %+v, %v", res, err)
	}
	live, err := clients[0].Start(ctx, "w", "live", map[string]any{"id": 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		serve(t, c)
	}
	t.Cleanup(releaseAll) // before the processes stop
	<-running
	before := stepOf(t, st, live.ID)

	clk.Jump(10 * time.Minute)
	waitFor(t, "the vanished worker's lease to be reaped", func() bool {
		return stepOf(t, st, gone.ID).LeaseOwner != "vanished"
	})
	if s := stepOf(t, st, live.ID); s.State != store.StateProcessing || s.LeaseOwner != before.LeaseOwner || s.Attempt != 1 ||
		!s.LeaseExpiresAt.After(before.LeaseExpiresAt.Add(10*time.Minute)) {
		t.Fatalf("after the jump the live step is %s (%s), lease of %q until %s, attempt %d; want it processing under its lease (%q), renewed at the new time",
			s.State, s.Reason, s.LeaseOwner, s.LeaseExpiresAt.Format(time.RFC3339), s.Attempt, before.LeaseOwner)
	}
	releaseAll()
	waitFor(t, "the live run to complete", func() bool {
		r, err := st.RunGetByID(ctx, live.ID)
		return err == nil && r.State == store.StateCompleted
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("the step ran %d times", n)
	}
	atts, err := st.AttemptListByRun(ctx, live.ID)
	if err != nil || len(atts) != 1 {
		t.Fatalf("attempts of the live run: %d, %v; want 1", len(atts), err)
	}
}

// stepOf returns the one step of a run.
func stepOf(t *testing.T, st store.Store, runID int64) *store.Step {
	t.Helper()
	list, err := st.StepListByRun(context.Background(), runID)
	if err != nil || len(list) != 1 {
		t.Fatalf("steps of run %d: %v, %v", runID, list, err)
	}
	return list[0]
}

// On SQLite a clock that jumps five minutes back fires no tick a second time: the
// schedule's cursor stays where it was, nothing fires until the clock reaches it again,
// and the ticks after it fire once each, on time.
func TestClockJumpBackwardFiresNoTickTwice(t *testing.T) {
	ctx := t.Context()
	st, db := sqliteFile(t)
	clk := &jumpClock{}
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "a", Clock: clk.Now, ScheduleInterval: 100 * time.Millisecond,
		PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "tick", Steps: []onceflow.Step{{ID: "noop", Do: noop}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterSchedule(onceflow.Schedule{Workflow: "tick", Cron: "* * * * * *"}); err != nil {
		t.Fatal(err)
	}
	stop := serve(t, c)
	waitFor(t, "two ticks", func() bool { return len(tickKeys(t, st)) >= 2 })

	clk.Jump(-5 * time.Minute)
	// The scheduler renews its leadership each round: three rounds by the clock behind.
	ahead := leaseOf(t, db, "scheduler")
	seen := map[int64]bool{}
	waitFor(t, "three scheduling rounds after the jump", func() bool {
		if exp := leaseOf(t, db, "scheduler"); exp < ahead-int64(4*time.Minute/time.Microsecond) {
			seen[exp] = true
		}
		return len(seen) >= 3
	})
	fired := tickKeys(t, st)
	clk.Jump(5 * time.Minute)
	waitFor(t, "two more ticks", func() bool { return len(tickKeys(t, st)) >= len(fired)+2 })
	stop()

	keys := tickKeys(t, st)
	for i := 1; i < len(keys); i++ {
		a, _ := time.Parse(time.RFC3339, strings.TrimPrefix(keys[i-1], "tick:"))
		b, _ := time.Parse(time.RFC3339, strings.TrimPrefix(keys[i], "tick:"))
		if b.Sub(a) != time.Second {
			t.Fatalf("ticks %s and %s follow each other (%v)", keys[i-1], keys[i], keys)
		}
	}
	evs, err := st.EventList(ctx, store.EventListParams{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		switch e.Type {
		case store.EventRunDeduplicated, store.EventScheduleTickSkipped, store.EventScheduleTickLate:
			t.Fatalf("%s (run %d, entity %s): %s", e.Type, e.RunID, e.Entity, e.Detail)
		}
	}
}

// skewMetrics records the clock measurements a client reports.
type skewMetrics struct {
	mu   sync.Mutex
	n    int
	last time.Duration
}

func (m *skewMetrics) Observe(o onceflow.Measurement) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o.Kind == onceflow.MeasureClockSkew {
		m.n, m.last = m.n+1, o.Duration
	}
}

func (m *skewMetrics) get() (int, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n, m.last
}

// A skew above ClockSkewWarning is logged at warn once when it appears, not at every
// measurement, and once at info when it is gone; it appearing again is warned again.
// This machine's clock moving by 90 s does not move the engine's time, which is the
// database's: no jump is logged.
func TestClockSkewWarnedOncePerCrossing(t *testing.T) {
	st := pgShared(t)()
	var logs syncBuffer
	clk := &jumpClock{}
	clk.Jump(90 * time.Second)
	m := &skewMetrics{}
	c, err := onceflow.New(onceflow.Config{Store: st, Clock: clk.Now, ClockSync: 20 * time.Millisecond, Metrics: m,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, c)
	count := func(msg string) int {
		n := 0
		for _, l := range records(t, &logs) {
			if s, _ := l["msg"].(string); strings.HasPrefix(s, msg) {
				n++
			}
		}
		return n
	}
	const warned, agrees, jumped = "this machine's clock differs from the database's", "this machine's clock agrees with the database's again", "clock jump"
	measured := func(what string, near time.Duration) {
		t.Helper()
		n0, _ := m.get()
		waitFor(t, what, func() bool {
			n, last := m.get()
			return n >= n0+3 && (last-near).Abs() < time.Second
		})
	}
	measured("three measurements of a skew of +90s", 90*time.Second)
	if w, a := count(warned), count(agrees); w != 1 || a != 0 {
		t.Fatalf("after three measurements of +90s: %d warnings, %d all-clear; want 1 and 0:\n%s", w, a, logs.String())
	}
	clk.Jump(-90 * time.Second)
	measured("three measurements of no skew", 0)
	if w, a := count(warned), count(agrees); w != 1 || a != 1 {
		t.Fatalf("after the skew went: %d warnings, %d all-clear; want 1 and 1:\n%s", w, a, logs.String())
	}
	clk.Jump(90 * time.Second)
	measured("three measurements of +90s again", 90*time.Second)
	if w, j := count(warned), count(jumped); w != 2 || j != 0 {
		t.Fatalf("after the skew came back: %d warnings, %d jumps logged; want 2 and none:\n%s", w, j, logs.String())
	}
	for _, l := range records(t, &logs) {
		if l["msg"] == warned+"; every decision uses the database's clock, but fix the machine's (NTP)" && l["skew"] != "+90.0s" {
			t.Errorf("warning %v: want skew +90.0s", l)
		}
	}
}
