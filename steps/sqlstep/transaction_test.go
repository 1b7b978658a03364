package sqlstep_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/steps/sqlstep"
)

// keyRows counts the rows onceflow_applied holds for key.
func (s *shop) keyRows(t *testing.T, key string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM onceflow_applied WHERE effect_key = "+s.p(1), key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// unchecked compiles spec without the compile-time refusal of statements that end the
// transaction, on the shop's database (or the one env names).
func (s *shop) unchecked(t *testing.T, spec sqlstep.Spec, env func(string) (string, bool)) *sqlstep.Step {
	t.Helper()
	if env == nil {
		env = s.env
	}
	db, err := sqlstep.OpenDB(spec.Database, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := sqlstep.NewUnchecked(spec, db)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func wantEnded(t *testing.T, err error, also string) {
	t.Helper()
	var se *onceflow.StepError
	if !errors.As(err, &se) || se.Class != onceflow.Permanent || se.Reason != sqlstep.ReasonTransactionEnded ||
		!strings.Contains(err.Error(), also) || !strings.Contains(err.Error(), "may be committed without the key") {
		t.Fatalf("Do: %v, want a permanent %s saying %q", err, sqlstep.ReasonTransactionEnded, also)
	}
}

// A statement that ends the step's transaction is refused when the step is compiled. One
// that slips through (the compile-time check bypassed, a procedure that commits) fails
// the attempt permanently at run time, before the effect key is written outside the
// statements' transaction: a CREATE TABLE after an INSERT committed the INSERT, and the
// key was written on its own; with a failing guard after it the step said "nothing was
// applied".
func TestStatementThatEndsTheTransactionFailsTheAttempt(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newShop(t, dialect)
			ctx := context.Background()
			ender := "COMMIT"
			if dialect == "mysql" {
				ender = "CREATE TABLE onceflow_audit_" + testsvc.Suffix() + " (a INT)"
			}
			one := 1
			spec := sqlstep.Spec{Database: "SHOP_DB", Statements: []sqlstep.Statement{
				{Query: "INSERT INTO orders (id, status) VALUES (" + s.p(1) + ", 'pending')", Args: []string{"{input.order_id}"}},
				{Query: ender},
				{Query: "UPDATE orders SET paid_count = paid_count + 1 WHERE id = " + s.p(1), Args: []string{"{input.order_id}"}},
			}}
			if _, err := sqlstep.New(spec, nil); err == nil || !strings.Contains(err.Error(), "statement 2: ") {
				t.Errorf("New accepted %q: %v", ender, err)
			}

			key := "order-new:2001:" + testsvc.Suffix()
			_, err := s.unchecked(t, spec, nil).Do(ctx, stepCtx(key, map[string]any{"order_id": 2001}))
			wantEnded(t, err, "found after statement 3")
			if n := s.keyRows(t, key); n != 0 {
				t.Fatalf("the effect key was written (%d rows) outside the statements' transaction", n)
			}

			// A guard that fails after the transaction ended: not "nothing was applied".
			spec.Statements[0].Args, spec.Statements[2].Args = []string{"{input.order_id}"}, []string{"{input.other}"}
			spec.Statements[2].ExpectRows = &one
			if dialect == "mysql" {
				spec.Statements[1].Query = "CREATE TABLE onceflow_audit_" + testsvc.Suffix() + " (a INT)"
			}
			key = "order-new:2002:" + testsvc.Suffix()
			_, err = s.unchecked(t, spec, nil).Do(ctx, stepCtx(key, map[string]any{"order_id": 2002, "other": 9999}))
			wantEnded(t, err, "it changed 0 rows, expected 1 (expect_rows)")
			if n := s.keyRows(t, key); n != 0 {
				t.Fatalf("the effect key was written (%d rows) outside the statements' transaction", n)
			}
		})
	}
}

// A procedure that commits passes the compile-time check (nothing in CALL says what the
// procedure does): MariaDB runs its CREATE TABLE, committing the INSERT before it, and the
// attempt fails permanently without writing the key; PostgreSQL refuses a COMMIT inside
// the transaction, so nothing is applied and the key is not written either.
func TestProcedureThatCommitsFailsTheAttempt(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newShop(t, dialect)
			ctx := context.Background()
			proc := "onceflow_sneaky_" + testsvc.Suffix()
			create := "CREATE PROCEDURE " + proc + "() BEGIN CREATE TABLE " + proc + "_t (a INT); END"
			if dialect == "postgres" {
				create = "CREATE PROCEDURE " + proc + "() LANGUAGE plpgsql AS $$ BEGIN COMMIT; END $$"
			}
			if _, err := s.db.ExecContext(ctx, create); err != nil {
				t.Fatal(err)
			}
			st, db := s.step(t, sqlstep.Spec{Database: "SHOP_DB", Statements: []sqlstep.Statement{
				{Query: "INSERT INTO orders (id, status) VALUES (" + s.p(1) + ", 'pending')", Args: []string{"{input.order_id}"}},
				{Query: "CALL " + proc + "()"},
			}})
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			key := "order-new:2003:" + testsvc.Suffix()
			_, err := st.Do(ctx, stepCtx(key, map[string]any{"order_id": 2003}))
			if dialect == "mysql" {
				wantEnded(t, err, "found after statement 2")
			} else if onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "invalid transaction termination") {
				t.Fatalf("Do: %v, want PostgreSQL's permanent refusal of the COMMIT", err)
			} else {
				var n int
				if err := s.db.QueryRow("SELECT COUNT(*) FROM orders WHERE id = 2003").Scan(&n); err != nil || n != 0 {
					t.Fatalf("the INSERT before the refused COMMIT was applied (%d rows, %v)", n, err)
				}
			}
			if n := s.keyRows(t, key); n != 0 {
				t.Fatalf("the effect key was written (%d rows) outside the statements' transaction", n)
			}
		})
	}
}

// An ALTER TABLE that commits the INSERT before it and then times out waiting for its
// lock used to be retried — a lock wait timeout is a temporary error — and every attempt
// inserted the row again: three rows for one effect key after three attempts. The
// attempt now fails permanently on the first.
func TestImplicitCommitThenTimeoutIsNotRetried(t *testing.T) {
	s := newShop(t, "mysql")
	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, "CREATE TABLE deliveries (effect_key VARCHAR(255) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	// Another transaction reads the table, so that ALTER TABLE waits for it.
	blocker, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback() //nolint:errcheck
	if _, err := blocker.ExecContext(ctx, "SELECT COUNT(*) FROM deliveries"); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"lock_wait_timeout": "1"}
	impatient := cfg.FormatDSN()
	st := s.unchecked(t, sqlstep.Spec{Database: "SHOP_DB", Statements: []sqlstep.Statement{
		{Query: "INSERT INTO deliveries (effect_key) VALUES (?)", Args: []string{"{input.key}"}},
		{Query: "ALTER TABLE deliveries ADD COLUMN note TEXT"},
	}}, func(string) (string, bool) { return impatient, true })
	key := "delivery:" + testsvc.Suffix()
	var last error
	for attempt := 1; attempt <= 3; attempt++ {
		_, last = st.Do(ctx, stepCtx(key, map[string]any{"key": key}))
		if onceflow.ClassOf(last) != onceflow.Retryable {
			break
		}
	}
	var rows int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM deliveries WHERE effect_key = ?", key).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d rows for one effect key, want the one the first attempt committed", rows)
	}
	wantEnded(t, last, "statement 2 failed after the transaction of the step's statements had ended (Error 1205")
}
