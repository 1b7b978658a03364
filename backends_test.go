package onceflow_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// backend opens a fresh, empty store for one test, closed when the test ends.
type backend struct {
	name string
	open func(t *testing.T) store.Store
}

// backends lists the stores engine tests run on: a SQLite file, and a schema of its own
// in the PostgreSQL test database (skipped without ONCEFLOW_TEST_POSTGRES_URL, a failure
// when CI=true).
func backends() []backend {
	return []backend{{"sqlite", openSQLite}, {"postgres", openPostgres}}
}

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	u, schema := testsvc.PostgresSchema(t, "onceflow_engine_")
	st, err := postgres.Open(t.Context(), u, postgres.Options{Schema: schema})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("open the PostgreSQL test database: %v", err)
		}
		t.Skipf("the PostgreSQL test database is unreachable: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}
