package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/store/storetest"
)

// The write path's counting bounds: what the store sends and writes per step of the
// reference workload (storetest.Workload), counted exactly — the statements it sends (a
// wrapper of the driver's connections), the rows it writes and the index entries SQLite
// maintains for them (triggers installed for the test). A change that makes a step cost
// more fails TestWriteBounds; a change that makes it cost less lowers the bounds.

// writeBound is the most a step may cost. Each figure is per step, whole workload (starts,
// claims and records).
type writeBound struct {
	Statements float64 // statements sent, BEGIN and COMMIT not counted
	Txs        float64 // transactions
	Rows       float64 // rows inserted, updated and deleted
	Entries    float64 // index entries deleted and inserted
}

// writeBounds are the figures measured with the ledger in the step rows and the attempts
// written once (before the persistence redesign: 6.973 statements, 11.667 rows and 22.667
// entries per step of the 3-step chain; 8.458, 15 and 34 for the 1-step; 4.905 and 6.403
// statements before the writer's cache, 4.870 and 6.368 before a take of a new key went
// without a look-up of the key), by the number of
// steps of the workload's chain; the test's log prints the figures it measured in this
// form, to lower a bound when a change makes a step cheaper. The audit trail's actor
// filter (migration 0014) costs an entry per run and per attempt that ended well, and one
// per run's last state change (11.735 and 19.157 entries before it). The counts of runs by
// state (migration 0016's run_counts) let counting a million runs read a row per workflow
// and state. Kept by triggers, they cost two rows per change of a run's state (7.368 rows
// and 3.870 statements per step of the 3-step chain, 12.079 and 5.368 of the 1-step); the
// writer now keeps them with one statement per transaction, and writes the states of the
// runs that changed with one statement too (3.308 statements per step of the 3-step chain
// before the releases of a transaction were written with one statement).
var writeBounds = map[int]writeBound{
	3: {Statements: 2.649, Txs: 0.034, Rows: 5.737, Entries: 13.405},
	1: {Statements: 3.633, Txs: 0.079, Rows: 7.188, Entries: 22.168},
}

func TestWriteBounds(t *testing.T) {
	for _, steps := range []int{3, 1} {
		t.Run(fmt.Sprintf("%d-step", steps), func(t *testing.T) {
			w := storetest.Workload{Runs: 256, Steps: steps, StartBatch: 16, ClaimBatch: 100}
			s, c := countingStore(t)
			ctx := t.Context()
			c.reset(t)
			if err := w.Start(ctx, s); err != nil {
				t.Fatal(err)
			}
			start := c.take(t)
			if err := w.Finish(ctx, s); err != nil {
				t.Fatal(err)
			}
			finish := c.take(t)
			n := float64(w.Runs * w.Steps)
			got := writeBound{
				Statements: float64(start.statements()+finish.statements()) / n,
				Txs:        float64(start.txs+finish.txs) / n,
				Rows:       float64(start.rows()+finish.rows()) / n,
				Entries:    float64(start.entries()+finish.entries()) / n,
			}
			want := writeBounds[steps]
			report := fmt.Sprintf("per step of a %d-step chain (%d runs): %s (as a bound: %s)\nstarts:\n%s\nclaims and records:\n%s",
				steps, w.Runs, got, got.literal(), start.detail(n), finish.detail(n))
			t.Log(report)
			if over := got.over(want); over != "" {
				t.Errorf("a step costs more than the bound %s: %s\n%s", want, over, report)
			}
		})
	}
}

// literal writes b rounded up to the third decimal, as a bound is written.
func (b writeBound) literal() string {
	up := func(x float64) float64 { return math.Ceil(x*1000) / 1000 }
	return fmt.Sprintf("{Statements: %.3f, Txs: %.3f, Rows: %.3f, Entries: %.3f}", up(b.Statements), up(b.Txs), up(b.Rows), up(b.Entries))
}

func (b writeBound) String() string {
	return fmt.Sprintf("%.3f statements, %.3f transactions, %.3f rows written, %.3f index entries", b.Statements, b.Txs, b.Rows, b.Entries)
}

// over names the figures of b above bound, each rounded up to the third decimal.
func (b writeBound) over(bound writeBound) string {
	var out []string
	check := func(name string, got, max float64) {
		if math.Ceil(got*1000)/1000 > max {
			out = append(out, fmt.Sprintf("%s %.3f > %.3f", name, got, max))
		}
	}
	check("statements", b.Statements, bound.Statements)
	check("transactions", b.Txs, bound.Txs)
	check("rows", b.Rows, bound.Rows)
	check("index entries", b.Entries, bound.Entries)
	return strings.Join(out, ", ")
}

// counts is what one phase of the workload sent and wrote.
type counts struct {
	stmts map[string]int // by statement text
	txs   int
	objs  map[string]map[string]int // table or index -> operation -> count
}

func (c counts) statements() int {
	n := 0
	for _, v := range c.stmts {
		n += v
	}
	return n
}

func (c counts) sum(ops ...string) int {
	n := 0
	for _, m := range c.objs {
		for _, op := range ops {
			n += m[op]
		}
	}
	return n
}

func (c counts) rows() int    { return c.sum("row_ins", "row_upd", "row_del") }
func (c counts) entries() int { return c.sum("idx_ins", "idx_del") }

func (c counts) detail(n float64) string {
	var b strings.Builder
	texts := make([]string, 0, len(c.stmts))
	for q := range c.stmts {
		texts = append(texts, q)
	}
	sort.Slice(texts, func(i, j int) bool {
		return c.stmts[texts[i]] > c.stmts[texts[j]] || c.stmts[texts[i]] == c.stmts[texts[j]] && texts[i] < texts[j]
	})
	for _, q := range texts {
		shown := q
		if len(shown) > 120 {
			shown = shown[:120] + "…"
		}
		fmt.Fprintf(&b, "  %7.3f  %s\n", float64(c.stmts[q])/n, shown)
	}
	fmt.Fprintf(&b, "  %7.3f  transactions\n", float64(c.txs)/n)
	names := make([]string, 0, len(c.objs))
	for o := range c.objs {
		names = append(names, o)
	}
	sort.Strings(names)
	for _, o := range names {
		m := c.objs[o]
		var parts []string
		for _, op := range []string{"row_ins", "row_upd", "row_del", "idx_ins", "idx_del"} {
			if m[op] > 0 {
				parts = append(parts, fmt.Sprintf("%s %.3f", op, float64(m[op])/n))
			}
		}
		fmt.Fprintf(&b, "  %-28s %s\n", o, strings.Join(parts, ", "))
	}
	return b.String()
}

// counter counts the statements sent on the connections of one database file, and reads
// the rows and index entries the triggers counted.
type counter struct {
	s    *Store
	path string
	mu   sync.Mutex
	cur  counts
}

var spaces = regexp.MustCompile(`\s+`)

// multiRow folds the multi-row VALUES lists of every length into one text.
var multiRow = regexp.MustCompile(`\) VALUES \(.*`)

// ours reports whether dsn names the counter's file.
func (c *counter) ours(dsn string) bool { return strings.HasPrefix(dsn, c.path+"?") }

func (c *counter) stmt(dsn, q string) {
	if !c.ours(dsn) {
		return
	}
	q = strings.TrimSpace(spaces.ReplaceAllString(q, " "))
	if strings.HasPrefix(q, "INSERT INTO") && !strings.Contains(q, " ON CONFLICT") && !strings.Contains(q, " RETURNING") {
		q = multiRow.ReplaceAllString(q, ") VALUES (…)")
	}
	c.mu.Lock()
	c.cur.stmts[q]++
	c.mu.Unlock()
}

func (c *counter) tx(dsn string) {
	if !c.ours(dsn) {
		return
	}
	c.mu.Lock()
	c.cur.txs++
	c.mu.Unlock()
}

// reset forgets what was counted.
func (c *counter) reset(t *testing.T) {
	t.Helper()
	if _, err := c.s.wc.ExecContext(t.Context(), `DELETE FROM _bounds`); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.cur = counts{stmts: map[string]int{}, objs: map[string]map[string]int{}}
	c.mu.Unlock()
}

// take returns what was counted since the last reset, and resets.
func (c *counter) take(t *testing.T) counts {
	t.Helper()
	c.mu.Lock()
	out := c.cur
	c.cur = counts{stmts: map[string]int{}, objs: map[string]map[string]int{}}
	c.mu.Unlock()
	rows, err := c.s.wc.QueryContext(t.Context(), `SELECT obj, op, n FROM _bounds`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var obj, op string
		var n int
		if err := rows.Scan(&obj, &op, &n); err != nil {
			t.Fatal(err)
		}
		if out.objs[obj] == nil {
			out.objs[obj] = map[string]int{}
		}
		out.objs[obj][op] += n
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	c.reset(t)
	return out
}

// countingStore opens a store on a new file whose statements are counted and whose
// tables count, with triggers, the rows written and the index entries maintained.
func countingStore(t *testing.T) (*Store, *counter) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	c := &counter{path: path, cur: counts{stmts: map[string]int{}, objs: map[string]map[string]int{}}}
	wrap := func(dsn string, conn driver.Conn) driver.Conn { return &countingConn{Conn: conn, c: c, dsn: dsn} }
	wrapConn.Store(&wrap)
	t.Cleanup(func() { wrapConn.Store(nil) })
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c.s = s
	installCountTriggers(t, s)
	return s, c
}

// installCountTriggers creates _bounds and, for every table, triggers that count the rows
// inserted, updated and deleted, and for every index the entries SQLite deletes and
// inserts: one at an insert and at a delete of a row its WHERE clause holds for, and at an
// update that assigns one of its columns or of its WHERE clause's columns, one deleted
// (old row) and one inserted (new row), each where the WHERE clause holds — whether or not
// the value changed, as SQLite maintains them.
func installCountTriggers(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	exec := func(q string) {
		t.Helper()
		if _, err := s.wc.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	query := func(q string, args ...any) [][2]string {
		t.Helper()
		rows, err := s.wc.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out [][2]string
		for rows.Next() {
			var a, b string
			if err := rows.Scan(&a, &b); err != nil {
				t.Fatal(err)
			}
			out = append(out, [2]string{a, b})
		}
		return out
	}
	exec(`CREATE TABLE _bounds (obj TEXT, op TEXT, n INTEGER NOT NULL, PRIMARY KEY (obj, op)) WITHOUT ROWID`)
	bump := func(obj, op, cond string) string {
		return `INSERT INTO _bounds (obj, op, n) SELECT '` + obj + `', '` + op + `', 1 WHERE ` + cond +
			` ON CONFLICT (obj, op) DO UPDATE SET n = n + 1;`
	}
	tables := query(`SELECT name, '' FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('_bounds', 'schema_migrations')`)
	for _, tb := range tables {
		table := tb[0]
		var cols []string
		for _, c := range query(`SELECT name, '' FROM pragma_table_info(?)`, table) {
			cols = append(cols, c[0])
		}
		qualify := func(pred, row string) string {
			if pred == "" {
				return "1"
			}
			for _, c := range cols {
				pred = regexp.MustCompile(`\b`+c+`\b`).ReplaceAllString(pred, row+"."+c)
			}
			return "(" + pred + ")"
		}
		exec(`CREATE TRIGGER _bounds_` + table + `_i AFTER INSERT ON ` + table + ` BEGIN ` + bump(table, "row_ins", "1") + ` END`)
		exec(`CREATE TRIGGER _bounds_` + table + `_u AFTER UPDATE ON ` + table + ` BEGIN ` + bump(table, "row_upd", "1") + ` END`)
		exec(`CREATE TRIGGER _bounds_` + table + `_d AFTER DELETE ON ` + table + ` BEGIN ` + bump(table, "row_del", "1") + ` END`)
		for _, ix := range query(`SELECT il.name, coalesce(m.sql, '') FROM pragma_index_list(?) il LEFT JOIN sqlite_master m ON m.name = il.name`, table) {
			name, ddl := ix[0], ix[1]
			pred := ""
			if i := strings.Index(strings.ToUpper(ddl), " WHERE "); i >= 0 {
				pred = ddl[i+len(" WHERE "):]
			}
			var watch []string
			expr := false // an expression's columns are those its definition names
			for _, c := range query(`SELECT coalesce(name, ''), '' FROM pragma_index_info(?)`, name) {
				if c[0] == "" {
					expr = true
					continue
				}
				watch = append(watch, c[0])
			}
			for _, c := range cols {
				named := regexp.MustCompile(`\b` + c + `\b`)
				if ((pred != "" && named.MatchString(pred)) || (expr && named.MatchString(ddl))) && !contains(watch, c) {
					watch = append(watch, c)
				}
			}
			oldQ, newQ := qualify(pred, "OLD"), qualify(pred, "NEW")
			exec(`CREATE TRIGGER _bounds_` + name + `_i AFTER INSERT ON ` + table + ` BEGIN ` + bump(name, "idx_ins", newQ) + ` END`)
			exec(`CREATE TRIGGER _bounds_` + name + `_d AFTER DELETE ON ` + table + ` BEGIN ` + bump(name, "idx_del", oldQ) + ` END`)
			exec(`CREATE TRIGGER _bounds_` + name + `_u AFTER UPDATE OF ` + strings.Join(watch, ", ") + ` ON ` + table + ` BEGIN ` +
				bump(name, "idx_del", oldQ) + bump(name, "idx_ins", newQ) + ` END`)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// countingConn counts the statements and transactions of one connection.
type countingConn struct {
	driver.Conn
	c   *counter
	dsn string
}

func (cc *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := cc.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, cc: cc, q: q}, nil
}

func (cc *countingConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	cc.c.tx(cc.dsn)
	return cc.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}

func (cc *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	// The writer begins and ends its transactions with statements of its own.
	switch q {
	case "BEGIN IMMEDIATE":
		cc.c.tx(cc.dsn)
	case "COMMIT", "ROLLBACK":
	default:
		cc.c.stmt(cc.dsn, q)
	}
	return cc.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (cc *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	cc.c.stmt(cc.dsn, q)
	return cc.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (cc *countingConn) ResetSession(ctx context.Context) error {
	return cc.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (cc *countingConn) IsValid() bool { return cc.Conn.(driver.Validator).IsValid() }

type countingStmt struct {
	driver.Stmt
	cc *countingConn
	q  string
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.cc.c.stmt(s.cc.dsn, s.q)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.cc.c.stmt(s.cc.dsn, s.q)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}
