package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, rest, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", e.Name())
		}
		body, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(rest, ".sql"), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migrations are not numbered 1..n: found %d at position %d", m.version, i+1)
		}
	}
	return ms, nil
}

// migrateLock serializes migrations of one schema across sessions and processes; it is
// held until the end of the transaction that takes it.
const migrateLock = `SELECT pg_advisory_xact_lock(hashtext('onceflow.migrate:' || current_schema()))`

// Migrate applies every embedded migration newer than the schema's version, each in its own
// transaction together with its row in schema_migrations. Concurrent callers, in any
// process, serialize on an advisory lock per schema, and each re-reads the version after
// taking it.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	for _, m := range ms {
		err := s.tx(ctx, "migrate", func(t *txn) error {
			if _, err := t.Exec(ctx, migrateLock); err != nil {
				return err
			}
			if _, err := t.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version    integer     PRIMARY KEY,
				name       text        NOT NULL,
				applied_at timestamptz NOT NULL
			)`); err != nil {
				return err
			}
			var applied bool
			if err := t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			if _, err := t.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
			}
			_, err := t.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, m.version, m.name, time.Now())
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SchemaVersion returns the newest applied migration and the newest one this build knows.
func (s *Store) SchemaVersion(ctx context.Context) (applied, known int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, 0, err
	}
	err = s.read(ctx, "schema version", func(q querier) error {
		return q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied)
	})
	if err != nil {
		return 0, 0, err
	}
	return applied, len(ms), nil
}
