package postgres_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/storetest"
)

// The write path's counting bounds on PostgreSQL: what the store sends and writes per run
// of the reference workload (storetest.Workload) — the statements and round trips (a pgx
// tracer on its connections) and the heap tuples it writes (inserts and updates, from
// pg_stat_user_tables once its connections have ended and reported them). A change that
// makes a run cost more fails TestWriteBounds; a change that makes it cost less lowers
// the bounds.

// runBound is the most a run may cost, whole workload (starts, claims and records).
type runBound struct {
	Statements float64 // statements sent, BEGIN, COMMIT, ROLLBACK, the planner settings of transactions and the notifier's pg_notify not counted
	RoundTrips float64 // queries and batches sent, the notifier's not counted
	Txs        float64 // transactions
	Tuples     float64 // heap tuples written: rows inserted and row versions updated
}

// runBounds are the figures measured with the ledger in the step rows and the attempts
// written once (before the persistence redesign: 0.766 statements and 35 tuples per run of
// the 3-step chain; 0.438 and 15 for the 1-step), by the number of
// steps of the workload's chain; the test's log prints the figures it measured in this
// form, to lower a bound when a change makes a run cheaper.
var runBounds = map[int]runBound{
	3: {Statements: 0.696, RoundTrips: 0.344, Txs: 0.102, Tuples: 17.102},
	1: {Statements: 0.415, RoundTrips: 0.204, Txs: 0.079, Tuples: 7.079},
}

// TestWriteBounds must not run in parallel: the tracer is set for every store opened
// while it runs.
func TestWriteBounds(t *testing.T) {
	for _, steps := range []int{3, 1} {
		t.Run(fmt.Sprintf("%d-step", steps), func(t *testing.T) {
			ctx := context.Background()
			w := storetest.Workload{Runs: 256, Steps: steps, StartBatch: 16, ClaimBatch: 100}
			schema := newSchema(t)
			app := "onceflow_bounds_" + testsvc.Suffix()
			tr := &countingTracer{search: pgx.Identifier{schema}.Sanitize(), stmts: map[string]int{}}
			postgres.SetQueryTracer(tr)
			s, err := postgres.Open(ctx, withParams(testURL(t), map[string][]string{"application_name": {app}}), postgres.Options{Schema: schema})
			postgres.SetQueryTracer(nil)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					s.Close()
				}
			})
			tr.reset()
			if err := w.Start(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := w.Finish(ctx, s); err != nil {
				t.Fatal(err)
			}
			sent := tr.take()
			closed = true
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tables := writtenTuples(t, schema, app)
			n := float64(w.Runs)
			tuples := 0
			for _, tb := range tables {
				tuples += tb.ins + tb.upd
			}
			got := runBound{Statements: float64(sent.statements()) / n, RoundTrips: float64(sent.trips) / n, Txs: float64(sent.txs) / n,
				Tuples: float64(tuples) / n}
			report := fmt.Sprintf("per run of a %d-step chain (%d runs): %s (as a bound: %s)\n%s%s", steps, w.Runs, got, got.literal(),
				sent.detail(n), tupleDetail(tables, n))
			t.Log(report)
			if over := got.over(runBounds[steps]); over != "" {
				t.Errorf("a run costs more than the bound %s: %s\n%s", runBounds[steps], over, report)
			}
		})
	}
}

func (b runBound) String() string {
	return fmt.Sprintf("%.3f statements, %.3f round trips, %.3f transactions, %.3f heap tuples written", b.Statements, b.RoundTrips, b.Txs, b.Tuples)
}

func (b runBound) literal() string {
	up := func(x float64) float64 { return math.Ceil(x*1000) / 1000 }
	return fmt.Sprintf("{Statements: %.3f, RoundTrips: %.3f, Txs: %.3f, Tuples: %.3f}", up(b.Statements), up(b.RoundTrips), up(b.Txs), up(b.Tuples))
}

// over names the figures of b above bound, each rounded up to the third decimal.
func (b runBound) over(bound runBound) string {
	var out []string
	check := func(name string, got, max float64) {
		if math.Ceil(got*1000)/1000 > max {
			out = append(out, fmt.Sprintf("%s %.3f > %.3f", name, got, max))
		}
	}
	check("statements", b.Statements, bound.Statements)
	check("round trips", b.RoundTrips, bound.RoundTrips)
	check("transactions", b.Txs, bound.Txs)
	check("heap tuples", b.Tuples, bound.Tuples)
	return strings.Join(out, ", ")
}

// tableTuples is what pg_stat_user_tables counted for one table.
type tableTuples struct {
	name               string
	ins, upd, hot, del int
}

// writtenTuples waits until no connection of application app is left — each backend
// reports its statistics when it ends — and reads what the schema's tables counted
// (schema_migrations left out).
func writtenTuples(t *testing.T, schema, app string) []tableTuples {
	t.Helper()
	ctx := context.Background()
	conn := admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections of the closed store are still open after 30 s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT relname::text, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname <> 'schema_migrations' AND n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY relname`, schema)
	if err != nil {
		t.Fatal(err)
	}
	var out []tableTuples
	for rows.Next() {
		var tt tableTuples
		if err := rows.Scan(&tt.name, &tt.ins, &tt.upd, &tt.hot, &tt.del); err != nil {
			t.Fatal(err)
		}
		out = append(out, tt)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func tupleDetail(tables []tableTuples, n float64) string {
	var b strings.Builder
	b.WriteString("  heap tuples (pg_stat_user_tables):      inserted  updated (HOT)  deleted\n")
	for _, tb := range tables {
		fmt.Fprintf(&b, "  %-38s %8.3f %8.3f (%.3f) %8.3f\n", tb.name, float64(tb.ins)/n, float64(tb.upd)/n, float64(tb.hot)/n, float64(tb.del)/n)
	}
	return b.String()
}

// countingTracer counts the queries and batches sent on connections to one schema (by
// their search_path).
type countingTracer struct {
	search   string
	mu       sync.Mutex
	stmts    map[string]int
	trips    int
	txs      int
	notifies int
	settings int
}

// sent is what a tracer counted.
type sent struct {
	stmts    map[string]int
	trips    int
	txs      int
	notifies int
	// settings are the statements that only set how the transaction plans the others
	// (set_config(…, true), SET LOCAL), sent in the round trips of the statements they
	// serve, as BEGIN is.
	settings int
}

func (s sent) statements() int {
	n := 0
	for _, v := range s.stmts {
		n += v
	}
	return n
}

func (s sent) detail(n float64) string {
	var b strings.Builder
	texts := make([]string, 0, len(s.stmts))
	for q := range s.stmts {
		texts = append(texts, q)
	}
	sort.Slice(texts, func(i, j int) bool {
		return s.stmts[texts[i]] > s.stmts[texts[j]] || s.stmts[texts[i]] == s.stmts[texts[j]] && texts[i] < texts[j]
	})
	for _, q := range texts {
		shown := q
		if len(shown) > 120 {
			shown = shown[:120] + "…"
		}
		fmt.Fprintf(&b, "  %7.3f  %s\n", float64(s.stmts[q])/n, shown)
	}
	fmt.Fprintf(&b, "  %7.3f  round trips\n  %7.3f  transactions\n  %7.3f  notifications (pg_notify, not counted above)\n  %7.3f  planner settings (not counted above)\n",
		float64(s.trips)/n, float64(s.txs)/n, float64(s.notifies)/n, float64(s.settings)/n)
	return b.String()
}

var spaces = regexp.MustCompile(`\s+`)

func (c *countingTracer) ours(conn *pgx.Conn) bool {
	return conn.Config().RuntimeParams["search_path"] == c.search
}

func (c *countingTracer) add(q string, trip bool) {
	q = strings.TrimSpace(spaces.ReplaceAllString(q, " "))
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Contains(q, "pg_notify(") {
		// The notifier's, outside the write transactions: how many it sends depends on
		// how the commits fall in time (at most one per commit).
		c.notifies++
		return
	}
	if trip {
		c.trips++
	}
	switch lower := strings.ToLower(q); {
	case strings.HasPrefix(lower, "begin"):
		c.txs++
	case lower == "commit", lower == "rollback":
	case strings.HasPrefix(lower, "set local "), strings.HasPrefix(lower, "select set_config("):
		c.settings++
	default:
		c.stmts[q]++
	}
}

func (c *countingTracer) reset() {
	c.mu.Lock()
	c.stmts, c.trips, c.txs, c.notifies, c.settings = map[string]int{}, 0, 0, 0, 0
	c.mu.Unlock()
}

func (c *countingTracer) take() sent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := sent{stmts: c.stmts, trips: c.trips, txs: c.txs, notifies: c.notifies, settings: c.settings}
	c.stmts, c.trips, c.txs, c.notifies, c.settings = map[string]int{}, 0, 0, 0, 0
	return out
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if c.ours(conn) {
		c.add(d.SQL, true)
	}
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *countingTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if c.ours(conn) {
		c.mu.Lock()
		c.trips++
		c.mu.Unlock()
	}
	return ctx
}

func (c *countingTracer) TraceBatchQuery(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	if c.ours(conn) {
		c.add(d.SQL, false)
	}
}

func (c *countingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
