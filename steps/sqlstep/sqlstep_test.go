package sqlstep_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("ONCEFLOW_TEST_CHILD") == "sql-worker" {
		os.Exit(childWorker())
	}
	goleak.VerifyTestMain(testsvc.Report(m))
}

// shop is a business database of one dialect, private to one test.
type shop struct {
	dialect string
	dsn     string
	db      *sql.DB
}

// newShop creates a schema (PostgreSQL) or database (MariaDB) of its own with an orders
// table, dropped when the test ends.
func newShop(t *testing.T, dialect string) *shop {
	t.Helper()
	ctx := context.Background()
	name := "onceflow_shop_" + testsvc.Suffix()
	s := &shop{dialect: dialect}
	switch dialect {
	case "postgres":
		base := testsvc.Postgres(t)
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), base)
			if err == nil {
				_, _ = c.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
				c.Close(context.Background())
			}
		})
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		s.dsn = base + sep + "search_path=" + name
	case "mysql":
		base := testsvc.MySQL(t)
		root, err := sql.Open("mysql", base)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if _, err := root.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			r, err := sql.Open("mysql", base)
			if err == nil {
				_, _ = r.Exec("DROP DATABASE " + name)
				r.Close()
			}
		})
		cfg, err := mysql.ParseDSN(base)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		s.dsn = cfg.FormatDSN()
	}
	driver := map[string]string{"postgres": "pgx", "mysql": "mysql"}[dialect]
	db, err := sql.Open(driver, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s.db = db
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id BIGINT PRIMARY KEY, status VARCHAR(32) NOT NULL,
		paid_count INT NOT NULL DEFAULT 0, note TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES (1001, 'pending'), (1002, 'pending')`); err != nil {
		t.Fatal(err)
	}
	return s
}

// p is the n-th bind parameter in the shop's dialect.
func (s *shop) p(n int) string {
	if s.dialect == "mysql" {
		return "?"
	}
	return fmt.Sprintf("$%d", n)
}

func (s *shop) env(name string) (string, bool) {
	if name == "SHOP_DB" {
		return s.dsn, true
	}
	return "", false
}

func (s *shop) order(t *testing.T, id int) (status string, paid int, note sql.NullString) {
	t.Helper()
	err := s.db.QueryRow("SELECT status, paid_count, note FROM orders WHERE id = "+s.p(1), id).Scan(&status, &paid, &note)
	if err != nil {
		t.Fatal(err)
	}
	return
}

// markPaid is the step of these tests: a status-checked update and the row read back.
func (s *shop) markPaid(review bool) sqlstep.Spec {
	one := 1
	return sqlstep.Spec{Database: "SHOP_DB", Review: review, Statements: []sqlstep.Statement{
		{Query: "UPDATE orders SET status = 'paid', paid_count = paid_count + 1, note = " + s.p(1) + " WHERE id = " + s.p(2) + " AND status = 'pending'",
			Args: []string{"{input.note}", "{input.order_id}"}, ExpectRows: &one},
		{Query: "SELECT id, status, note FROM orders WHERE id = " + s.p(1), Args: []string{"{input.order_id}"}},
	}}
}

func (s *shop) step(t *testing.T, spec sqlstep.Spec) (*sqlstep.Step, *sqlstep.DB) {
	t.Helper()
	db, err := sqlstep.OpenDB(spec.Database, s.env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlstep.New(spec, db)
	if err != nil {
		t.Fatal(err)
	}
	return st, db
}

func stepCtx(key string, input map[string]any) *onceflow.StepContext {
	raw, _ := json.Marshal(input)
	return &onceflow.StepContext{RunID: 7, RunKey: "evt", Workflow: "order-events", Step: "mark_paid", EffectKey: key, Attempt: 1, Input: raw}
}

var dialects = []string{"postgres", "mysql"}

// The statements apply once per effect key, in one transaction with the key; values are
// bound, never spliced; a row-count guard that fails changes nothing.
func TestStatementsApplyOncePerKey(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newShop(t, dialect)
			ctx := context.Background()
			st, db := s.step(t, s.markPaid(false))
			evil := "'; DROP TABLE orders; --"
			key := "order-paid:1001:" + testsvc.Suffix()

			// Without the migration the step says what to run, and changes nothing.
			_, err := st.Do(ctx, stepCtx(key, map[string]any{"order_id": 1001, "note": evil}))
			var se *onceflow.StepError
			if !errors.As(err, &se) || se.Class != onceflow.Permanent || se.Reason != sqlstep.ReasonNotMigrated ||
				!strings.Contains(err.Error(), "onceflow migrate --target SHOP_DB") {
				t.Fatalf("before the migration: %v, want a permanent %s naming the command", err, sqlstep.ReasonNotMigrated)
			}
			if status, paid, _ := s.order(t, 1001); status != "pending" || paid != 0 {
				t.Fatalf("order changed without the ledger table: %s %d", status, paid)
			}
			for range 2 { // idempotent
				if err := db.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
			}

			out, err := st.Do(ctx, stepCtx(key, map[string]any{"order_id": 1001, "note": evil}))
			if err != nil {
				t.Fatal(err)
			}
			res := out.(*sqlstep.Result)
			if res.Replayed || len(res.Statements) != 2 || res.Statements[0].RowsAffected != 1 || len(res.Rows) != 1 || res.Rows[0]["note"] != evil {
				t.Fatalf("first attempt: %+v", res)
			}
			if status, paid, note := s.order(t, 1001); status != "paid" || paid != 1 || note.String != evil {
				t.Fatalf("order after the step: %s %d %q", status, paid, note.String)
			}

			// The same key again: the stored result, nothing applied.
			out, err = st.Do(ctx, stepCtx(key, map[string]any{"order_id": 1001, "note": evil}))
			if err != nil {
				t.Fatal(err)
			}
			if res := out.(*sqlstep.Result); !res.Replayed || res.Rows[0]["note"] != evil {
				t.Fatalf("second attempt: %+v, want the stored result", res)
			}
			if _, paid, _ := s.order(t, 1001); paid != 1 {
				t.Fatalf("paid_count %d after a repeated key, want 1", paid)
			}
			var n int
			if err := s.db.QueryRow("SELECT COUNT(*) FROM onceflow_applied WHERE effect_key = "+s.p(1), key).Scan(&n); err != nil || n != 1 {
				t.Fatalf("onceflow_applied rows for the key: %d (%v)", n, err)
			}

			// A new key for an order already paid: the guard refuses, nothing is written.
			key2 := "order-paid:1001:again:" + testsvc.Suffix()
			_, err = st.Do(ctx, stepCtx(key2, map[string]any{"order_id": 1001, "note": "x"}))
			if !errors.As(err, &se) || se.Class != onceflow.Skipped || se.Reason != sqlstep.ReasonRowsUnexpected ||
				!strings.Contains(err.Error(), "changed 0 rows, expected 1 (expect_rows); nothing was applied: the rows its WHERE clause selects are not in the state it checks for") {
				t.Fatalf("guard: %v, want skipped %s", err, sqlstep.ReasonRowsUnexpected)
			}
			review, _ := s.step(t, s.markPaid(true))
			_, err = review.Do(ctx, stepCtx(key2, map[string]any{"order_id": 1001, "note": "x"}))
			if !errors.As(err, &se) || se.Class != onceflow.Permanent || se.Reason != sqlstep.ReasonRowsUnexpected {
				t.Fatalf("guard with review: %v, want permanent %s", err, sqlstep.ReasonRowsUnexpected)
			}
			if err := s.db.QueryRow("SELECT COUNT(*) FROM onceflow_applied WHERE effect_key = "+s.p(1), key2).Scan(&n); err != nil || n != 0 {
				t.Fatalf("a refused step left %d rows in onceflow_applied (%v)", n, err)
			}
			if _, _, note := s.order(t, 1001); note.String != evil {
				t.Fatalf("a refused step changed the note to %q", note.String)
			}
		})
	}
}

func TestTemplateInStatementTextIsRefused(t *testing.T) {
	db, err := sqlstep.OpenDB("SHOP_DB", func(string) (string, bool) { return "postgres://x@127.0.0.1/db", true })
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"UPDATE orders SET note = '{input.note}' WHERE id = $1",
		"DELETE FROM orders WHERE id = {input.order_id}",
		"SELECT * FROM t WHERE k = '{ steps.a.output.id }'",
	} {
		_, err := sqlstep.New(sqlstep.Spec{Database: "SHOP_DB", Statements: []sqlstep.Statement{{Query: q}}}, db)
		if err == nil || !strings.Contains(err.Error(), "never spliced into SQL text") {
			t.Errorf("%s: %v, want a refusal", q, err)
		}
	}
	// JSON literals and bind parameters are fine.
	if _, err := sqlstep.New(sqlstep.Spec{Database: "SHOP_DB", Statements: []sqlstep.Statement{
		{Query: `UPDATE t SET doc = '{"a": 1}'::jsonb WHERE id = $1`, Args: []string{"{input.id}"}}}}, db); err != nil {
		t.Fatal(err)
	}
}

func TestDSNVariableNotSet(t *testing.T) {
	_, err := sqlstep.OpenDB("SHOP_DB", func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "environment variable SHOP_DB is not set") {
		t.Fatalf("%v", err)
	}
	_, err = sqlstep.OpenDB("SHOP_DB", func(string) (string, bool) { return "shop.example:5432", true })
	if err == nil || !strings.Contains(err.Error(), "neither a postgres:// URL nor a MySQL DSN") {
		t.Fatalf("%v", err)
	}
}

// sqlWorkflow is the workflow of the crash test.
func sqlWorkflow(st *sqlstep.Step) onceflow.Workflow {
	return onceflow.Workflow{Name: "order-events", Entity: "order:{input.order_id}", Steps: []onceflow.Step{
		{ID: "mark_paid", EffectKey: "order-paid:{input.order_id}:{run.key}", Do: st.Do},
	}}
}

// childWorker serves the workflow and, right after a transaction commits, says so and
// waits to be killed.
func childWorker() int {
	ctx := context.Background()
	dialect, path := os.Getenv("ONCEFLOW_TEST_DIALECT"), os.Getenv("ONCEFLOW_TEST_DB")
	s := &shop{dialect: dialect, dsn: os.Getenv("SHOP_DB")}
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	db, err := sqlstep.OpenDB("SHOP_DB", s.env)
	if err != nil {
		return fail(err)
	}
	step, err := sqlstep.New(s.markPaid(false), db)
	if err != nil {
		return fail(err)
	}
	step.Hooks.AfterCommit = func(key string) {
		fmt.Println("committed", key)
		select {} // killed here, before onceflow records the step
	}
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return fail(err)
	}
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "child", LeaseFor: time.Hour, PollInterval: 10 * time.Millisecond})
	if err == nil {
		err = c.Register(sqlWorkflow(step))
	}
	if err == nil {
		err = c.Serve(ctx)
	}
	return fail(err)
}

// A worker killed with SIGKILL after the business database committed and before onceflow
// recorded the step: after recovery the order changed once and the step completed from
// onceflow_applied.
func TestKilledAfterCommitAppliesOnce(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newShop(t, dialect)
			ctx := context.Background()
			step, db := s.step(t, s.markPaid(false))
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "onceflow.db")
			st, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var skew atomic.Int64
			c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "survivor",
				Clock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }, ClockSync: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Register(sqlWorkflow(step)); err != nil {
				t.Fatal(err)
			}
			run, err := c.Start(ctx, "order-events", "evt-"+testsvc.Suffix(), map[string]any{"order_id": 1002, "note": "paid by card"})
			if err != nil {
				t.Fatal(err)
			}

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), "ONCEFLOW_TEST_CHILD=sql-worker", "ONCEFLOW_TEST_DB="+path,
				"ONCEFLOW_TEST_DIALECT="+dialect, "SHOP_DB="+s.dsn)
			child.Stderr = os.Stderr
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			committed := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					if k, ok := strings.CutPrefix(sc.Text(), "committed "); ok {
						committed <- k
						return
					}
				}
				close(committed)
			}()
			var key string
			select {
			case key = <-committed:
			case <-time.After(60 * time.Second):
				_ = child.Process.Kill()
				_ = child.Wait()
				t.Fatal("the child never committed")
			}
			if key == "" {
				_ = child.Wait()
				t.Fatal("the child exited before committing")
			}
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatal("the child did not die by SIGKILL")
			}
			steps, err := st.StepListByRun(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if steps[0].State != store.StateProcessing || steps[0].LeaseOwner != "child" {
				t.Fatalf("after the kill the step is %s (owner %q), want processing by the dead child", steps[0].State, steps[0].LeaseOwner)
			}
			if _, paid, _ := s.order(t, 1002); paid != 1 {
				t.Fatalf("paid_count %d after the committed attempt, want 1", paid)
			}

			// The child's lease expires; the step is retried under the same key.
			skew.Store(int64(2 * time.Hour))
			if n, err := c.Reap(ctx); err != nil || n != 1 {
				t.Fatalf("reaped %d (%v), want 1", n, err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, err := c.Work(ctx); err != nil {
					t.Fatal(err)
				}
				steps, err = st.StepListByRun(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				if steps[0].State == store.StateCompleted || time.Now().After(deadline) {
					break
				}
			}
			if steps[0].State != store.StateCompleted || steps[0].Attempt != 2 || steps[0].EffectKey != key {
				t.Fatalf("step %s attempt %d key %q, want completed on attempt 2 with %q", steps[0].State, steps[0].Attempt, steps[0].EffectKey, key)
			}
			var res sqlstep.Result
			if err := json.Unmarshal(steps[0].Output, &res); err != nil || !res.Replayed || len(res.Rows) != 1 || res.Rows[0]["status"] != "paid" {
				t.Fatalf("output %s (%v), want the stored result, replayed", steps[0].Output, err)
			}
			if status, paid, _ := s.order(t, 1002); status != "paid" || paid != 1 {
				t.Fatalf("order %s paid_count %d after recovery, want paid once", status, paid)
			}
		})
	}
}

// Attempts racing on one key (a lease that expired while the first still ran) apply the
// statements once; every one of them ends with the result that was applied.
func TestRacingAttemptsApplyOnce(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newShop(t, dialect)
			ctx := context.Background()
			st, db := s.step(t, s.markPaid(false))
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			key := "order-paid:1001:race:" + testsvc.Suffix()
			const n = 8
			errs := make(chan error, n)
			replayed := make(chan bool, n)
			start := make(chan struct{})
			for range n {
				go func() {
					<-start
					out, err := st.Do(ctx, stepCtx(key, map[string]any{"order_id": 1001, "note": "race"}))
					if err == nil {
						replayed <- out.(*sqlstep.Result).Replayed
					}
					errs <- err
				}()
			}
			close(start)
			fresh := 0
			for range n {
				if err := <-errs; err != nil {
					t.Fatalf("a racing attempt failed: %v", err)
				}
				if !<-replayed {
					fresh++
				}
			}
			if fresh != 1 {
				t.Fatalf("%d attempts applied the statements, want 1", fresh)
			}
			if _, paid, _ := s.order(t, 1001); paid != 1 {
				t.Fatalf("paid_count %d, want 1", paid)
			}
		})
	}
}

// Integers beyond 2^53 keep every digit: bound as parameters (one beyond int64 too), read
// back in the rows of the first attempt, and in the result a later attempt reads back from
// onceflow_applied instead of running the statements again.
func TestBigIntegersStayExact(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newShop(t, dialect)
			ctx := context.Background()
			if _, err := s.db.ExecContext(ctx, "INSERT INTO orders (id, status) VALUES (9007199254740993, 'pending'), (9007199254740992, 'pending')"); err != nil {
				t.Fatal(err)
			}
			q := sqlstep.Statement{Query: "SELECT id, CAST($2 AS NUMERIC(30, 0)) AS wide FROM orders WHERE id = $1", Args: []string{"{input.order_id}", "{input.wide}"}}
			if dialect == "mysql" {
				q = sqlstep.Statement{Query: "SELECT id, CAST(? AS DECIMAL(30, 0)) AS wide FROM orders WHERE id = ?", Args: []string{"{input.wide}", "{input.order_id}"}}
			}
			st, db := s.step(t, sqlstep.Spec{Database: "SHOP_DB", Statements: []sqlstep.Statement{q}})
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			key := "big:" + testsvc.Suffix()
			sc := &onceflow.StepContext{RunID: 7, RunKey: "evt", Workflow: "w", Step: "s", EffectKey: key, Attempt: 1,
				Input: json.RawMessage(`{"order_id": 9007199254740993, "wide": 18446744073709551617}`)}
			for _, attempt := range []string{"first attempt", "replayed from onceflow_applied"} {
				out, err := st.Do(ctx, sc)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(out.(*sqlstep.Result).Rows)
				if !strings.Contains(string(b), `"id":9007199254740993`) || !strings.Contains(string(b), `18446744073709551617`) {
					t.Errorf("%s: rows %s; want id 9007199254740993 and wide 18446744073709551617", attempt, b)
				}
			}
		})
	}
}

// A step compiled without a database only checks its spec: run, it refuses for good with
// what to fix.
func TestStepWithoutDatabaseRefusesToRun(t *testing.T) {
	st, err := sqlstep.New(sqlstep.Spec{Database: "SHOP_DB", Statements: []sqlstep.Statement{
		{Query: "UPDATE orders SET status = 'paid' WHERE id = $1", Args: []string{"{input.order_id}"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Do(context.Background(), stepCtx("k", map[string]any{"order_id": 1}))
	if onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("Do without a database = %v (%s), want a permanent error naming the missing database", err, onceflow.ClassOf(err))
	}
}
