package auditgolden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Store kinds.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Kinds lists the stores every scenario runs on.
var Kinds = []string{SQLite, Postgres}

// Base is the time every scenario starts at (a Monday, 09:00 UTC).
var Base = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// WorkerID names the scenarios' one worker.
const WorkerID = "golden-worker"

// Clock is a manual clock: it moves only when told, in whole milliseconds, in UTC.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at Base.
func NewClock() *Clock { return &Clock{now: Base} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d, which must be whole milliseconds.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 || d%time.Millisecond != 0 {
		panic(fmt.Sprintf("auditgolden: the clock moves forward by whole milliseconds, not %v", d))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// DB is a fresh, empty database of one kind, dropped when the test ends.
type DB struct {
	Kind string
	// URL names it as the command line's --db does.
	URL string
	// Path is the SQLite file; ConnString and Schema the PostgreSQL database and schema.
	Path       string
	ConnString string
	Schema     string
}

// NewDB names a new database of kind: a file in a temporary directory, or a schema of its
// own (with a random suffix) in the PostgreSQL test database, dropped when the test ends.
// Without ONCEFLOW_TEST_POSTGRES_URL a PostgreSQL test is skipped (failed under CI=true).
func NewDB(t testing.TB, kind string) DB {
	t.Helper()
	switch kind {
	case SQLite:
		path := filepath.Join(t.TempDir(), "onceflow.db")
		return DB{Kind: kind, URL: "sqlite://" + path, Path: path}
	case Postgres:
		u, schema := testsvc.PostgresSchema(t, "auditgolden_")
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		return DB{Kind: kind, URL: u + sep + "schema=" + schema, ConnString: u, Schema: schema}
	}
	t.Fatalf("auditgolden: unknown store kind %q", kind)
	return DB{}
}

// Open opens the database's store, which migrates it to the current schema.
func (db DB) Open(ctx context.Context) (store.Store, error) {
	if db.Kind == SQLite {
		return sqlite.Open(ctx, db.Path, sqlite.Options{})
	}
	return postgres.Open(ctx, db.ConnString, postgres.Options{Schema: db.Schema})
}

// Driver tells a scenario to the engine: one client with one worker on a manual clock,
// which every decision reads as it is.
type Driver struct {
	T      testing.TB
	Ctx    context.Context
	DB     DB
	Store  store.Store
	Client *onceflow.Client
	Clock  *Clock
	// Dest is the destination the scenarios' steps act on.
	Dest *Dest
}

// Config is the client configuration of every scenario.
func Config(st store.Store, clock *Clock) onceflow.Config {
	return onceflow.Config{
		Store: st, Workers: 1, WorkerID: WorkerID, Clock: clock.Now, ClockSync: -1,
		Rand: func() float64 { return 0.5 }, LeaseFor: 30 * time.Second,
	}
}

// NewDriver opens a fresh database of kind and a client on it. Everything is closed when
// the test ends.
func NewDriver(t testing.TB, kind string) *Driver {
	t.Helper()
	db := NewDB(t, kind)
	return Attach(t, db, NewClock(), NewDest())
}

// Attach opens db (migrating it) and a client on it with clock, acting on dest.
func Attach(t testing.TB, db DB, clock *Clock, dest *Dest) *Driver {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx)
	if err != nil {
		t.Fatalf("open the %s store: %v", db.Kind, err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := onceflow.New(Config(st, clock))
	if err != nil {
		t.Fatal(err)
	}
	return &Driver{T: t, Ctx: ctx, DB: db, Store: st, Client: c, Clock: clock, Dest: dest}
}

// Register registers workflows.
func (d *Driver) Register(ws ...onceflow.Workflow) {
	d.T.Helper()
	for _, w := range ws {
		if err := d.Client.Register(w); err != nil {
			d.T.Fatal(err)
		}
	}
}

// Schedule registers a schedule.
func (d *Driver) Schedule(s onceflow.Schedule) {
	d.T.Helper()
	if err := d.Client.RegisterSchedule(s); err != nil {
		d.T.Fatal(err)
	}
}

// Start starts a run and fails the test on an error.
func (d *Driver) Start(workflow, key string, input any) *onceflow.Run {
	d.T.Helper()
	r, err := d.Client.Start(d.Ctx, workflow, key, input)
	if err != nil {
		d.T.Fatalf("start %s %s: %v", workflow, key, err)
	}
	return r
}

// Flush writes the events of duplicate starts answered without the writer.
func (d *Driver) Flush() {
	d.T.Helper()
	if err := d.Client.Flush(d.Ctx); err != nil {
		d.T.Fatal(err)
	}
}

// Work executes every step due now and returns how many it handled. It calls Client.Work
// until a call finds nothing twice in a row: with one worker, a claim that only finds a
// step to postpone (a delay that has not passed) ends a call of Work while other steps are
// still due.
func (d *Driver) Work() int {
	d.T.Helper()
	total, idle := 0, 0
	for idle < 2 {
		n, err := d.Client.Work(d.Ctx)
		if err != nil {
			d.T.Fatalf("Work: %v", err)
		}
		if total += n; n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return total
}

// WorkLater runs Work in a goroutine; wait returns its error once it returned.
func (d *Driver) WorkLater() (wait func()) {
	done := make(chan error, 1)
	go func() {
		_, err := d.Client.Work(d.Ctx)
		done <- err
	}()
	return func() {
		d.T.Helper()
		select {
		case err := <-done:
			if err != nil {
				d.T.Fatalf("Work: %v", err)
			}
		case <-time.After(30 * time.Second):
			d.T.Fatal("Work did not return within 30 s")
		}
	}
}

// Reap reaps expired leases and returns how many.
func (d *Driver) Reap() int {
	d.T.Helper()
	n, err := d.Client.Reap(d.Ctx)
	if err != nil {
		d.T.Fatalf("Reap: %v", err)
	}
	return n
}

// Fire fires the due schedule ticks.
func (d *Driver) Fire() {
	d.T.Helper()
	if err := d.Client.FireSchedules(d.Ctx); err != nil {
		d.T.Fatalf("FireSchedules: %v", err)
	}
}

// Advance moves the clock forward.
func (d *Driver) Advance(dur time.Duration) { d.Clock.Advance(dur) }

// Check fails the test when err is not nil.
func (d *Driver) Check(what string, err error) {
	d.T.Helper()
	if err != nil {
		d.T.Fatalf("%s: %v", what, err)
	}
}

// StepState fails the test unless the step of run is in state want.
func (d *Driver) StepState(runID int64, step string, want store.State) {
	d.T.Helper()
	steps, err := d.Store.StepListByRun(d.Ctx, runID)
	d.Check("steps", err)
	for _, s := range steps {
		if s.Name == step {
			if s.State != want {
				d.T.Fatalf("run %d step %s is %s (%s), want %s", runID, step, s.State, s.Reason, want)
			}
			return
		}
	}
	d.T.Fatalf("run %d has no step %s", runID, step)
}

// Gate holds a step function until it is released, and says when one is held.
type Gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewGate returns a closed gate.
func NewGate() *Gate { return &Gate{entered: make(chan struct{}, 16), release: make(chan struct{})} }

// Pass is called by the step function: it reports that it arrived and waits to be let
// through (or ctx to end).
func (g *Gate) Pass(ctx context.Context) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
}

// Arrived waits until a step function is at the gate.
func (g *Gate) Arrived(t testing.TB) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no step arrived at the gate within 30 s")
	}
}

// Open lets every step function through, now and later.
func (g *Gate) Open() { g.once.Do(func() { close(g.release) }) }

// Dest is a destination that counts the requests that perform an effect, per effect key.
// A step function calls Act only once it has decided to perform its effect, so a key
// requested twice is an effect performed twice: exactly what the engine must never cause.
type Dest struct {
	mu    sync.Mutex
	calls map[string]int
}

// NewDest returns a destination that has performed nothing.
func NewDest() *Dest { return &Dest{calls: map[string]int{}} }

// Act performs the effect of key and returns its answer.
func (d *Dest) Act(key string) map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[key]++
	return map[string]any{"done": key}
}

// Performed returns the keys whose effect was performed, sorted.
func (d *Dest) Performed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sortedKeys(d.calls)
}

// Repeated returns the keys whose effect was performed more than once, with how often.
func (d *Dest) Repeated() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, n := range d.calls {
		if n > 1 {
			out[k] = n
		}
	}
	return out
}

// Restore makes the destination remember keys as performed once (what it did before the
// engine's process was replaced).
func (d *Dest) Restore(keys []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		d.calls[k]++
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// errBusy is the retryable error of the scenarios' destinations.
var errBusy = errors.New("destination busy (503)")

// raw is a JSON document written by hand.
func raw(s string) json.RawMessage { return json.RawMessage(s) }
