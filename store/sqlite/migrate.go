package sqlite

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

// Migrate applies every embedded migration newer than the database's version, each in its
// own transaction together with its row in schema_migrations. Concurrent callers serialize
// on SQLite's write lock, and each re-reads the version inside its transaction.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if _, err := s.wc.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	for _, m := range ms {
		err := s.tx(ctx, "migrate", func(tx dbtx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, time.Now().UnixMicro())
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
	err = s.r.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: schema version: %w", err)
	}
	return applied, len(ms), nil
}
