package auditgolden

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver the SQLite store uses, to load a dump without it
)

// A dump is a database as SQL text: the schema as the store's migrations on disk create it
// (schema_migrations as the store creates it, then every migration file in order), then
// every row of every table in the order the tables were created, then the counters of the
// ids (sqlite_sequence, PostgreSQL sequences). Loading it into an empty database gives the
// database it was taken from, with the schema of the release it was taken with: the
// migrations are frozen in the file, whatever the store's migrations become.

// schemaMigrations is the table each store's Migrate creates before the first migration.
var schemaMigrations = map[string]string{
	SQLite: `CREATE TABLE schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
);`,
	Postgres: `CREATE TABLE schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL
);`,
}

// migrationFiles reads the migrations of a store from the source tree, in order.
func migrationFiles(kind string) ([]string, []string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return nil, nil, fmt.Errorf("auditgolden: cannot find the source tree")
	}
	dir := filepath.Join(filepath.Dir(self), "..", "..", "store", kind, "migrations")
	names, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	var bodies []string
	for i, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, nil, err
		}
		names[i] = filepath.Base(n)
		bodies = append(bodies, string(b))
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("auditgolden: no migrations in %s", dir)
	}
	return names, bodies, nil
}

// Dump writes the database as SQL text, headed by the comment lines of head.
func Dump(ctx context.Context, db DB, head []string) (string, error) {
	var b strings.Builder
	for _, h := range head {
		fmt.Fprintf(&b, "-- %s\n", h)
	}
	names, bodies, err := migrationFiles(db.Kind)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "\n-- schema_migrations, as the store creates it\n%s\n", schemaMigrations[db.Kind])
	for i, n := range names {
		fmt.Fprintf(&b, "\n-- migration %s\n%s", n, strings.TrimRight(bodies[i], "\n")+"\n")
	}
	b.WriteString("\n-- rows\n")
	if db.Kind == SQLite {
		err = dumpSQLite(ctx, db, &b)
	} else {
		err = dumpPostgres(ctx, db, &b)
	}
	return b.String(), err
}

func dumpSQLite(ctx context.Context, db DB, b *strings.Builder) error {
	conn, err := sql.Open("sqlite", "file:"+db.Path+"?mode=ro")
	if err != nil {
		return err
	}
	defer conn.Close()
	tables, err := strings1(ctx, conn, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid`)
	if err != nil {
		return err
	}
	tables = append(tables, "sqlite_sequence")
	for _, t := range tables {
		cols, err := strings1(ctx, conn, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, t)
		if err != nil {
			return err
		}
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = `quote("` + c + `")`
		}
		rows, err := strings1(ctx, conn, `SELECT `+strings.Join(quoted, ` || ', ' || `)+` FROM "`+t+`" ORDER BY rowid`)
		if err != nil {
			return fmt.Errorf("dump %s: %w", t, err)
		}
		if t == "sqlite_sequence" {
			// The rows above set the counters to the largest ids; they may have been larger.
			b.WriteString("DELETE FROM sqlite_sequence;\n")
		}
		for _, r := range rows {
			fmt.Fprintf(b, "INSERT INTO %s (%s) VALUES (%s);\n", t, strings.Join(cols, ", "), r)
		}
	}
	return nil
}

func strings1(ctx context.Context, conn *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func pgConnect(ctx context.Context, db DB) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, db.ConnString)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{db.Schema}.Sanitize()+`; SET TimeZone TO 'UTC'`); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

func pgStrings(ctx context.Context, conn *pgx.Conn, q string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func dumpPostgres(ctx context.Context, db DB, b *strings.Builder) error {
	conn, err := pgConnect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	tables, err := pgStrings(ctx, conn, `SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace
		AND c.relkind = 'r' ORDER BY c.oid`)
	if err != nil {
		return err
	}
	for _, t := range tables {
		cols, err := pgStrings(ctx, conn, `SELECT attname::text FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0
			AND NOT attisdropped ORDER BY attnum`, pgx.Identifier{t}.Sanitize())
		if err != nil {
			return err
		}
		quoted := make([]string, len(cols))
		order := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = "quote_nullable(" + pgx.Identifier{c}.Sanitize() + ")"
			order[i] = pgx.Identifier{c}.Sanitize()
		}
		rows, err := pgStrings(ctx, conn, `SELECT concat_ws(', ', `+strings.Join(quoted, ", ")+`) FROM `+pgx.Identifier{t}.Sanitize()+
			` ORDER BY `+strings.Join(order, ", "))
		if err != nil {
			return fmt.Errorf("dump %s: %w", t, err)
		}
		for _, r := range rows {
			fmt.Fprintf(b, "INSERT INTO %s (%s) VALUES (%s);\n", t, strings.Join(cols, ", "), r)
		}
	}
	seqs, err := pgStrings(ctx, conn, `SELECT format('SELECT setval(%L, %s, %s);', sequencename, coalesce(last_value, 1), (last_value IS NOT NULL)::text)
		FROM pg_sequences WHERE schemaname = current_schema() ORDER BY sequencename`)
	if err != nil {
		return err
	}
	for _, s := range seqs {
		fmt.Fprintln(b, s)
	}
	return nil
}

// Load creates, in the empty database db, the database a dump holds.
func Load(ctx context.Context, db DB, dump string) error {
	if db.Kind == SQLite {
		// A new database file is private to its owner, as the store creates one.
		f, err := os.OpenFile(db.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		f.Close()
		conn, err := sql.Open("sqlite", "file:"+db.Path)
		if err != nil {
			return err
		}
		defer conn.Close()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, dump); err != nil {
			return fmt.Errorf("load the SQLite dump: %w", err)
		}
		return tx.Commit()
	}
	conn, err := pgx.Connect(ctx, db.ConnString)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	schema := pgx.Identifier{db.Schema}.Sanitize()
	// One simple-protocol Exec runs the whole text as one transaction.
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema+`; SET search_path TO `+schema+`; SET TimeZone TO 'UTC';`+"\n"+dump, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("load the PostgreSQL dump: %w", err)
	}
	return nil
}
