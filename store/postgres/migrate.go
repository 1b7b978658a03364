package postgres

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/internal/migrations"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

func loadMigrations() ([]migrations.Migration, error) {
	return migrations.Load(migrationFS, "migrations")
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
			if err := t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			if _, err := t.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
			}
			_, err := t.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, m.Version, m.Name, time.Now())
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
