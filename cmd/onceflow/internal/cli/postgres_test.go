package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store/postgres"
)

// postgresURL returns the test database's URL, skipping without one (failing under CI).
func postgresURL(t *testing.T) string {
	t.Helper()
	return testsvc.Postgres(t)
}

// withSchema returns url naming a new schema for onceflow, dropped when the test ends.
func withSchema(t *testing.T, url string) string {
	t.Helper()
	_, schema := testsvc.PostgresSchema(t, "cli_test_")
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "schema=" + schema
}

// The commands work on PostgreSQL as on SQLite: the demo, then migrate and runs on the
// database it leaves.
func TestPostgresCommands(t *testing.T) {
	db := withSchema(t, postgresURL(t))
	r := runOK(t, "demo", "--forms", "6", "--orders", "4", "--json", "--db", db)
	var sum struct {
		DB           string `json:"db_url"`
		InvariantsOK bool   `json:"invariants_ok"`
		Runs         int    `json:"runs"`
		Invoices     struct {
			Runs int `json:"runs"`
		} `json:"invoices"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, r.stdout)
	}
	if !sum.InvariantsOK || sum.Runs == 0 || !strings.HasPrefix(sum.DB, "postgres://") {
		t.Fatalf("summary %+v", sum)
	}
	if r := runOK(t, "migrate", "--db", db); !strings.Contains(r.stdout, "(up to date)") {
		t.Fatalf("migrate: %s", r.stdout)
	}
	r = runOK(t, "runs", "list", "--json", "--limit", "500", "--db", db)
	var runs []map[string]any
	// The forms' and payments' runs, the invoices' and the walk of the customer list.
	want := sum.Runs + sum.Invoices.Runs + 1
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil || len(runs) != want {
		t.Fatalf("runs list: %d runs (%v), want %d", len(runs), err, want)
	}
	// A second demo on the same schema refuses: it needs a fresh database.
	if r := run(t, "demo", "--db", db); r.code != exitError || !strings.Contains(r.stderr, "already holds runs") {
		t.Fatalf("second demo: exit %d %s", r.code, r.stderr)
	}
}

// openPostgres opens the PostgreSQL store that db, a --db URL, names; the caller closes it.
func openPostgres(t *testing.T, db string) *postgres.Store {
	t.Helper()
	loc, err := parseDBURL(db)
	if err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(context.Background(), loc.ConnString, postgres.Options{Schema: loc.Schema})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
