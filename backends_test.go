package onceflow_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// postgresURLEnv names the variable that points the engine's PostgreSQL tests at a database.
const postgresURLEnv = "ONCEFLOW_TEST_POSTGRES_URL"

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

// postgresURL returns the test database's URL, or skips the test (fails it when CI=true).
func postgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(postgresURLEnv)
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not set: the PostgreSQL tests must run in CI", postgresURLEnv)
		}
		t.Skipf("set %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run the PostgreSQL tests", postgresURLEnv)
	}
	return u
}

// newPostgresSchema names a fresh schema, dropped with everything in it when the test ends.
func newPostgresSchema(t testing.TB) string {
	t.Helper()
	u := postgresURL(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "onceflow_engine_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	schema := newPostgresSchema(t)
	st, err := postgres.Open(t.Context(), postgresURL(t), postgres.Options{Schema: schema})
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
