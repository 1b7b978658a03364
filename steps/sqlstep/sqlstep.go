// Package sqlstep implements the "sql" step kind: statements run on the business's own
// PostgreSQL or MySQL/MariaDB database, exactly once, without help from the application.
//
// # Exactly once in someone else's database
//
// The statements of one attempt run in one transaction of the business database, and in
// that same transaction the step's effect key and result are inserted into the table
// onceflow_applied of that database. Either both commit or neither does. An attempt first
// looks the key up there: a worker that died after COMMIT but before onceflow recorded the
// step (an unknown outcome) leaves the key behind, so the retry completes the step with the
// stored result instead of applying the statements again. Two attempts racing on one key
// (a lease that expired while the first was still running) collide on the table's primary
// key; the loser rolls back and reports the winner's result.
//
// # One transaction, or none
//
// A statement that ends that transaction would commit the changes before it without the
// key, and let the key commit on its own afterwards. New refuses them (CheckStatement):
// transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, SET autocommit, XA) and the
// statements MySQL and MariaDB commit implicitly — DDL (CREATE, ALTER, DROP, RENAME,
// TRUNCATE), LOCK and UNLOCK TABLES, GRANT, FLUSH, ANALYZE and the rest of their list —
// on every database, since a workflow file does not say which one its DSN names. A
// statement the text does not betray (a procedure that commits) is caught at run time:
// before the key is written, and after a statement fails or a guard does not match, the
// attempt checks that its transaction is still open (@@in_transaction on MariaDB, the
// transaction's id on PostgreSQL; MySQL has no such variable, so there the compile-time
// refusal is the whole protection). If it is not, the attempt fails permanently with reason
// transaction_ended and writes no key: what the statements changed may be committed, and
// applying them again would repeat it.
//
// The table is created by a migration the operator runs (onceflow migrate --target VAR),
// never silently: an attempt against a database without it is a permanent error that says
// so.
//
// # Bind parameters only
//
// Statement text is never a template. Values from the run reach the database only as bind
// parameters ($1, $2 … on PostgreSQL; ? on MySQL), so input such as
// "'; DROP TABLE orders; --" is stored as data. New refuses a statement whose text holds a
// template field ({input.…}), naming the parameter to use instead.
//
// # Guards and output
//
// A statement may expect a number of affected (or returned) rows — the status check of
// "UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'". Any other
// count rolls the transaction back and ends the step skipped, or parked for review with
// reason rows_unexpected, as the step says. Rows a statement returns (SELECT, RETURNING)
// become the step's output.
package sqlstep

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// ReasonRowsUnexpected is the review or skip reason of a statement whose row count is not
// the one it expects.
const ReasonRowsUnexpected onceflow.Reason = "rows_unexpected"

// ReasonNotMigrated is the review reason of a database without the onceflow_applied table.
const ReasonNotMigrated onceflow.Reason = "database_not_migrated"

// ReasonTransactionEnded is the review reason of an attempt whose transaction ended before
// the effect key was written: a statement committed or rolled back on its own (a
// procedure that commits, DDL prepared from a string). What the statements before it did
// may be committed; the key is not written, and the step is not retried.
const ReasonTransactionEnded onceflow.Reason = "transaction_ended"

// Table is the name of the table that records applied effect keys in a business database.
const Table = "onceflow_applied"

// Statement is one statement of a step.
type Statement struct {
	// Query is the SQL text, with bind parameters ($1 or ?) for every value that comes from
	// the run. It is never rendered.
	Query string
	// Args are templates over the run's data, one per bind parameter, in order. A field that
	// is exactly one template ("{input.amount}") keeps its JSON type.
	Args []string
	// ExpectRows, when not nil, is the number of rows the statement must affect (or
	// return).
	ExpectRows *int
}

// Spec describes a sql step.
type Spec struct {
	// Database names the environment variable that holds the DSN: a postgres:// URL, or a
	// MySQL DSN (user:pass@tcp(host:3306)/db, optionally prefixed mysql://).
	Database   string
	Statements []Statement
	// Review parks a step whose row count is unexpected for a person instead of skipping
	// it.
	Review bool
	// Timeout bounds one attempt (default 30 s).
	Timeout time.Duration
}

// Step is a compiled sql step.
type Step struct {
	// Hooks are the step's signals for tests; set them before the step runs.
	Hooks Hooks

	spec  Spec
	db    *DB
	stmts []compiled
}

type compiled struct {
	query  string
	args   []*keytmpl.Template
	expect *int
	rows   bool
}

// CheckStatement reports why a statement's text cannot be used: a template field in SQL
// text would splice a value into it, and a statement that ends the step's transaction
// (transaction control, and DDL, LOCK TABLES and the other statements MySQL and MariaDB
// commit implicitly) would commit changes without the effect key.
func CheckStatement(query string) error {
	if err := checkFields(query); err != nil {
		return err
	}
	return checkTransaction(query)
}

func checkFields(query string) error {
	if strings.TrimSpace(query) == "" {
		return errors.New("query is empty")
	}
	if m := fieldRE.FindString(query); m != "" {
		return fmt.Errorf("query contains the template field %s: values are never spliced into SQL text; write a bind parameter ($1 on PostgreSQL, ? on MySQL) and put %q in args", m, m)
	}
	return nil
}

// fieldRE finds what reads as a template field in SQL text.
var fieldRE = regexp.MustCompile(`\{\s*(input|steps|run|env|workflow|step)(\.[^{}\s]*)?\s*\}`)

var rowsRE = regexp.MustCompile(`(?is)^\s*(\(\s*)*(select|with|show|values|table)\b|\breturning\b`)

// New compiles spec on db. It refuses the statements CheckStatement refuses. With a nil db
// the spec is only checked: the step refuses to run, with a permanent error that says so.
func New(spec Spec, db *DB) (*Step, error) { return compile(spec, db, CheckStatement) }

func compile(spec Spec, db *DB, check func(query string) error) (*Step, error) {
	if len(spec.Statements) == 0 {
		return nil, errors.New("a sql step needs at least one statement")
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 30 * time.Second
	}
	s := &Step{spec: spec, db: db}
	for i, st := range spec.Statements {
		if err := check(st.Query); err != nil {
			return nil, fmt.Errorf("statement %d: %w", i+1, err)
		}
		c := compiled{query: st.Query, expect: st.ExpectRows, rows: rowsRE.MatchString(st.Query)}
		for j, a := range st.Args {
			t, err := keytmpl.Parse(a)
			if err != nil {
				return nil, fmt.Errorf("statement %d arg %d: %w", i+1, j+1, err)
			}
			for _, f := range t.Fields() {
				switch strings.SplitN(f, ".", 2)[0] {
				case "input", "run", "steps", "workflow", "step":
				default:
					return nil, fmt.Errorf("statement %d arg %d: {%s}: args read input, run, steps, workflow and step", i+1, j+1, f)
				}
			}
			c.args = append(c.args, t)
		}
		if st.ExpectRows != nil && *st.ExpectRows < 0 {
			return nil, fmt.Errorf("statement %d: expect_rows must be 0 or more", i+1)
		}
		s.stmts = append(s.stmts, c)
	}
	return s, nil
}

// Result is a sql step's output.
type Result struct {
	// Statements has one entry per statement, in order.
	Statements []StatementResult `json:"statements"`
	// Rows are the rows of the last statement that returned rows (nil if none did).
	Rows []map[string]any `json:"rows,omitempty"`
	// Replayed says the result was read from onceflow_applied: an earlier attempt applied
	// the statements.
	Replayed bool `json:"replayed,omitempty"`
}

// StatementResult is what one statement did.
type StatementResult struct {
	RowsAffected int64            `json:"rows_affected"`
	Rows         []map[string]any `json:"rows,omitempty"`
}

// Hooks are signals for tests: functions a step calls at points of an attempt where a
// test stops or kills the process. Each step has its own (Step.Hooks, KindOptions.Hooks).
type Hooks struct {
	// AfterCommit, when set, is called after an attempt's transaction committed and before
	// the step returns.
	AfterCommit func(effectKey string)
}

// Do runs the statements once: an onceflow.StepFunc.
func (s *Step) Do(ctx context.Context, sc *onceflow.StepContext) (any, error) {
	data, err := sc.TemplateData()
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	args := make([][]any, len(s.stmts))
	for i, c := range s.stmts {
		for j, t := range c.args {
			v, err := t.Value(data)
			if err != nil {
				return nil, onceflow.PermanentError(fmt.Errorf("statement %d arg %d: %w", i+1, j+1, err))
			}
			args[i] = append(args[i], bindValue(v))
		}
	}
	if s.db == nil {
		return nil, onceflow.PermanentError(errors.New("sql: the step has no database (New was given a nil *DB, which only checks the spec); build it with a DB, or through the kind"))
	}
	db, err := s.db.open()
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()

	if res, ok, err := s.db.lookup(ctx, db, sc.EffectKey); err != nil {
		return nil, s.db.classify(err)
	} else if ok {
		return res, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.db.classify(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	mark, err := s.db.txMark(ctx, tx)
	if err != nil {
		return nil, s.db.classify(err)
	}
	res := &Result{}
	for i, c := range s.stmts {
		sr, err := run(ctx, tx, c, args[i])
		if err != nil {
			// A statement that failed after the transaction ended (an ALTER TABLE that
			// committed, then timed out waiting for its lock) may leave changes committed:
			// retrying would apply them again.
			if open, cerr := s.db.txOpen(ctx, tx, mark); cerr == nil && !open {
				return nil, transactionEnded(i+1, err)
			}
			return nil, s.db.classify(fmt.Errorf("statement %d: %w", i+1, err))
		}
		if c.expect != nil && sr.RowsAffected != int64(*c.expect) {
			if open, cerr := s.db.txOpen(ctx, tx, mark); cerr == nil && !open {
				return nil, transactionEnded(i+1, fmt.Errorf("it changed %d rows, expected %d (expect_rows)", sr.RowsAffected, *c.expect))
			}
			_ = tx.Rollback()
			// An attempt racing this one (a lease that expired while it ran) may have
			// applied the key meanwhile, which is why the rows no longer match.
			if prev, ok, lerr := s.db.lookup(ctx, db, sc.EffectKey); lerr == nil && ok {
				return prev, nil
			}
			why := fmt.Errorf("statement %d changed %d rows, expected %d (expect_rows); nothing was applied: "+
				"the rows its WHERE clause selects are not in the state it checks for (another change came first?), or expect_rows is wrong",
				i+1, sr.RowsAffected, *c.expect)
			if s.spec.Review {
				return nil, &onceflow.StepError{Class: onceflow.Permanent, Reason: ReasonRowsUnexpected, Err: why}
			}
			return nil, onceflow.SkipStep(ReasonRowsUnexpected, why)
		}
		res.Statements = append(res.Statements, sr)
		if c.rows {
			res.Rows = sr.Rows
		}
	}
	stored, err := json.Marshal(res)
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	// The key is written only inside the transaction of the statements: if that ended
	// (a statement the compile-time check could not see), the key would commit on its own.
	switch open, err := s.db.txOpen(ctx, tx, mark); {
	case err != nil:
		return nil, s.db.classify(fmt.Errorf("check that the transaction is open: %w", err))
	case !open:
		return nil, transactionEnded(len(s.stmts), nil)
	}
	if _, err := tx.ExecContext(ctx, s.db.insertSQL(), sc.EffectKey, string(stored), sc.Workflow, sc.RunID, sc.Step); err != nil {
		_ = tx.Rollback()
		if s.db.duplicate(err) {
			// Another attempt applied the key first: its result is the step's.
			if prev, ok, lerr := s.db.lookup(context.WithoutCancel(ctx), db, sc.EffectKey); lerr == nil && ok {
				return prev, nil
			}
		}
		return nil, s.db.classify(fmt.Errorf("record effect key in %s: %w", Table, err))
	}
	if err := tx.Commit(); err != nil {
		// The COMMIT may have reached the server: the next attempt finds out from the table.
		return nil, onceflow.UnknownOutcomeError(fmt.Errorf("commit: %w", err))
	}
	if s.Hooks.AfterCommit != nil {
		s.Hooks.AfterCommit(sc.EffectKey)
	}
	return res, nil
}

func run(ctx context.Context, tx *sql.Tx, c compiled, args []any) (StatementResult, error) {
	if !c.rows {
		r, err := tx.ExecContext(ctx, c.query, args...)
		if err != nil {
			return StatementResult{}, err
		}
		n, err := r.RowsAffected()
		return StatementResult{RowsAffected: n}, err
	}
	rows, err := tx.QueryContext(ctx, c.query, args...)
	if err != nil {
		return StatementResult{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return StatementResult{}, err
	}
	out := StatementResult{Rows: []map[string]any{}}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return StatementResult{}, err
		}
		row := make(map[string]any, len(cols))
		for i, col := range cols {
			row[col] = jsonValue(vals[i])
		}
		out.Rows = append(out.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return StatementResult{}, err
	}
	out.RowsAffected = int64(len(out.Rows))
	return out, nil
}

// bindValue turns a template value into a bind parameter.
func bindValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		// A number no Go number holds exactly (an integer beyond int64, more digits than
		// float64 keeps) is bound as its text, which the database reads exactly.
		if n, ok := keytmpl.NumberValue(x); ok {
			return n
		}
		return x.String()
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return v
}

// jsonValue turns a scanned column into a JSON value.
func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		s := string(x)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
			return n
		}
		return s
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// DB is a business database named by an environment variable, opened on first use and
// shared by every step that names it.
type DB struct {
	// Var is the environment variable holding the DSN.
	Var    string
	dsn    string
	mysql  bool
	once   sync.Once
	db     *sql.DB
	err    error
	closed bool
}

// OpenDB prepares the database whose DSN the environment variable name holds; it does
// not connect yet. An unset variable is an error that says what to set.
func OpenDB(name string, env func(string) (string, bool)) (*DB, error) {
	dsn, ok := env(name)
	if !ok || strings.TrimSpace(dsn) == "" {
		return nil, fmt.Errorf("database: environment variable %s is not set; set it to the database's DSN (postgres://user:pass@host:5432/db or user:pass@tcp(host:3306)/db)", name)
	}
	d := &DB{Var: name, dsn: dsn}
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
	case strings.HasPrefix(dsn, "mysql://"):
		d.mysql, d.dsn = true, strings.TrimPrefix(dsn, "mysql://")
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") || strings.HasPrefix(dsn, "tcp("):
		d.mysql = true
	default:
		return nil, fmt.Errorf("database: %s is neither a postgres:// URL nor a MySQL DSN such as user:pass@tcp(host:3306)/db", name)
	}
	if d.mysql {
		if _, err := mysql.ParseDSN(d.dsn); err != nil {
			return nil, fmt.Errorf("database: %s is not a valid MySQL DSN: %v", name, redactDSN(err, d.dsn))
		}
	}
	return d, nil
}

// redactDSN keeps a DSN (which may hold a password) out of an error.
func redactDSN(err error, dsn string) string {
	return strings.ReplaceAll(err.Error(), dsn, "…")
}

func (d *DB) open() (*sql.DB, error) {
	d.once.Do(func() {
		driver := "pgx"
		if d.mysql {
			driver = "mysql"
		}
		d.db, d.err = sql.Open(driver, d.dsn)
		if d.err != nil {
			d.err = fmt.Errorf("database %s: %s", d.Var, redactDSN(d.err, d.dsn))
		}
	})
	return d.db, d.err
}

// Close closes the connection pool, if one was opened.
func (d *DB) Close() error {
	if d.db != nil {
		return d.db.Close()
	}
	return nil
}

// Dialect is "postgres" or "mysql".
func (d *DB) Dialect() string {
	if d.mysql {
		return "mysql"
	}
	return "postgres"
}

func (d *DB) insertSQL() string {
	if d.mysql {
		return "INSERT INTO " + Table + " (effect_key, result, workflow, run_id, step) VALUES (?, ?, ?, ?, ?)"
	}
	return "INSERT INTO " + Table + " (effect_key, result, workflow, run_id, step) VALUES ($1, $2, $3, $4, $5)"
}

func (d *DB) lookup(ctx context.Context, db *sql.DB, key string) (*Result, bool, error) {
	q := "SELECT result FROM " + Table + " WHERE effect_key = $1"
	if d.mysql {
		q = "SELECT result FROM " + Table + " WHERE effect_key = ?"
	}
	var raw string
	err := db.QueryRowContext(ctx, q, key).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up effect key in %s: %w", Table, err)
	}
	res := &Result{}
	// The rows' numbers keep every digit: an id above 2^53 stays the row it names.
	if err := keytmpl.DecodeInto([]byte(raw), res); err != nil {
		return nil, false, fmt.Errorf("%s holds an unreadable result for the key: %w", Table, err)
	}
	res.Replayed = true
	return res, true, nil
}

// transactionEnded is the permanent error of an attempt whose transaction ended before the
// effect key was written, found at statement n (cause is what went wrong there, if
// anything).
func transactionEnded(n int, cause error) error {
	why := fmt.Sprintf("the transaction of the step's statements ended before the effect key was written (found after statement %d)", n)
	if cause != nil {
		why = fmt.Sprintf("statement %d failed after the transaction of the step's statements had ended (%v)", n, cause)
	}
	return &onceflow.StepError{Class: onceflow.Permanent, Reason: ReasonTransactionEnded, Err: fmt.Errorf(
		"%s: a statement committed or rolled back on its own — transaction control, or DDL, LOCK TABLES or another statement that MySQL and MariaDB commit implicitly, perhaps in a procedure it calls; "+
			"what the statements changed may be committed without the key, so the step is not retried: check the database, and remove the statement from the step", why)}
}

// txMark returns what txOpen compares with to tell that tx is still the transaction it
// was: on PostgreSQL, the transaction's id (assigned now); nothing on MySQL and MariaDB,
// which say whether a transaction is open.
func (d *DB) txMark(ctx context.Context, tx *sql.Tx) (int64, error) {
	if d.mysql {
		return 0, nil
	}
	var id int64
	if err := tx.QueryRowContext(ctx, "SELECT txid_current()").Scan(&id); err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	return id, nil
}

// txOpen reports whether tx is still the open transaction txMark saw begin: a statement
// run in it may have committed it (MySQL's implicit commits, a COMMIT), after which the
// connection runs each statement in a transaction of its own.
func (d *DB) txOpen(ctx context.Context, tx *sql.Tx, mark int64) (bool, error) {
	if d.mysql {
		var open int
		err := tx.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&open)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1193 {
			// MySQL has no in_transaction, nor another reliable way to ask: there the
			// refusal of such statements when the step is compiled is the protection.
			return true, nil
		}
		return open > 0, err
	}
	var id int64
	err := tx.QueryRowContext(ctx, "SELECT txid_current()").Scan(&id)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "25P02" {
		return true, nil // a failed statement aborted the transaction, which is still open
	}
	return err == nil && id == mark, err
}

func (d *DB) duplicate(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// classify says what a database error means for the step: a missing onceflow_applied
// table or a refused statement (syntax, constraint, type) is permanent; anything else (a
// lost connection, a deadlock, a timeout) is retried — the transaction did not commit.
func (d *DB) classify(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "42P01" && strings.Contains(pe.Message, Table):
			return d.notMigrated(err)
		case pe.Code == "40001" || pe.Code == "40P01" || strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "57"):
			return err
		}
		return onceflow.PermanentError(err)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1146:
			if strings.Contains(me.Message, Table) {
				return d.notMigrated(err)
			}
			return onceflow.PermanentError(err)
		case 1205, 1213, 1040, 1053: // lock wait timeout, deadlock, too many connections, shutdown
			return err
		}
		return onceflow.PermanentError(err)
	}
	return err
}

func (d *DB) notMigrated(err error) error {
	return &onceflow.StepError{Class: onceflow.Permanent, Reason: ReasonNotMigrated,
		Err: fmt.Errorf("the database of %s has no %s table; create it with: onceflow migrate --target %s (%v)", d.Var, Table, d.Var, err)}
}

// Migrate creates the onceflow_applied table in the database if it does not exist, and
// returns the dialect. It is idempotent.
func (d *DB) Migrate(ctx context.Context) error {
	db, err := d.open()
	if err != nil {
		return err
	}
	q := `CREATE TABLE IF NOT EXISTS ` + Table + ` (
	effect_key text PRIMARY KEY,
	result     text NOT NULL,
	workflow   text NOT NULL,
	run_id     bigint NOT NULL,
	step       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`
	if d.mysql {
		q = `CREATE TABLE IF NOT EXISTS ` + Table + ` (
	effect_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
	result     LONGTEXT NOT NULL,
	workflow   VARCHAR(255) NOT NULL,
	run_id     BIGINT NOT NULL,
	step       VARCHAR(255) NOT NULL,
	applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB`
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("create %s in the database of %s: %w", Table, d.Var, err)
	}
	return nil
}
