package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/onceflow/onceflow/internal/testsvc"
)

// migrate --target creates onceflow_applied in the business database, idempotently, and
// says what to set when the variable is missing.
func TestMigrateTarget(t *testing.T) {
	base := testsvc.MySQL(t)
	root, err := sql.Open("mysql", base)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	name := fmt.Sprintf("onceflow_cli_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := root.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	defer root.Exec("DROP DATABASE " + name) //nolint:errcheck
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	t.Setenv("SHOP_DB", cfg.FormatDSN())
	for range 2 {
		r := runOK(t, "migrate", "--target", "SHOP_DB")
		if !strings.Contains(r.stdout, "database of SHOP_DB (mysql): table onceflow_applied is ready") {
			t.Fatalf("stdout %q", r.stdout)
		}
	}
	var n int
	if err := root.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = 'onceflow_applied'", name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("onceflow_applied tables: %d (%v)", n, err)
	}
	r := run(t, "migrate", "--target", "NO_SUCH_DB_VAR")
	if r.code == 0 || !strings.Contains(r.stderr, "environment variable NO_SUCH_DB_VAR is not set") {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
}
