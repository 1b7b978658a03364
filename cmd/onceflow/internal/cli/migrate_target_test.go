package cli

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/onceflow/onceflow/internal/testsvc"
)

// migrate --target creates onceflow_applied in the business database — MariaDB and
// PostgreSQL — idempotently, and says what to set when the variable is missing.
func TestMigrateTarget(t *testing.T) {
	for _, dialect := range []string{"mysql", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dsn, tables := businessDatabase(t, dialect)
			t.Setenv("SHOP_DB", dsn)
			for range 2 {
				r := runOK(t, "migrate", "--target", "SHOP_DB")
				if want := "database of SHOP_DB (" + dialect + "): table onceflow_applied is ready"; !strings.Contains(r.stdout, want) {
					t.Fatalf("stdout %q, want %q", r.stdout, want)
				}
			}
			if n := tables(); n != 1 {
				t.Fatalf("onceflow_applied tables: %d, want 1", n)
			}
		})
	}
	r := run(t, "migrate", "--target", "NO_SUCH_DB_VAR")
	if r.code == 0 || !strings.Contains(r.stderr, "environment variable NO_SUCH_DB_VAR is not set") {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
}

// businessDatabase is a MariaDB database or a PostgreSQL schema of the test's own, dropped
// when it ends: its DSN, and a count of its tables named onceflow_applied.
func businessDatabase(t *testing.T, dialect string) (string, func() int) {
	t.Helper()
	ctx := context.Background()
	name := "onceflow_cli_" + testsvc.Suffix()
	var base, driver, dsn, query string
	switch dialect {
	case "mysql":
		base, driver = testsvc.MySQL(t), "mysql"
		cfg, err := mysql.ParseDSN(base)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		dsn = cfg.FormatDSN()
		query = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = 'onceflow_applied'"
	case "postgres":
		base, driver = testsvc.Postgres(t), "pgx"
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		dsn = base + sep + "search_path=" + name
		query = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'onceflow_applied'"
	}
	root, err := sql.Open(driver, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	create, drop := "CREATE DATABASE "+name, "DROP DATABASE "+name
	if dialect == "postgres" {
		create, drop = "CREATE SCHEMA "+name, "DROP SCHEMA "+name+" CASCADE"
	}
	if _, err := root.ExecContext(ctx, create); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := root.ExecContext(context.Background(), drop); err != nil {
			t.Errorf("%s: %v", drop, err)
		}
	})
	return dsn, func() int {
		var n int
		if err := root.QueryRowContext(ctx, query, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}
