package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, as store/sqlite uses it
)

// sqliteBulk loads rows into a SQLite database file of store/sqlite's schema: one
// INSERT … SELECT over a recursive sequence per batch, in one transaction each. Times are
// microseconds since the Unix epoch, as the store writes them.
type sqliteBulk struct {
	db *sql.DB
}

var _ bulkLoader = (*sqliteBulk)(nil)

func openSQLiteBulk(path string) (*sqliteBulk, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("bulk load %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return &sqliteBulk{db: db}, nil
}

// sqliteSeq selects n from ?1 to ?2.
const sqliteSeq = `WITH RECURSIVE seq(n) AS (SELECT ?1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?2) `

func (b *sqliteBulk) effects(ctx context.Context, n int, now time.Time, rows *atomic.Int64) error {
	base := now.UnixMicro() - int64(n)
	return batches(ctx, n, func(lo, hi int) error {
		return b.tx(ctx, "effects", func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, sqliteSeq+`INSERT INTO effects
				(effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at)
				SELECT ?3 || printf('%09d', n), 'completed', '', CAST('{"ok":true}' AS BLOB), n, n, ?4, ?5, ?6 + n, ?6 + n FROM seq`,
				lo, hi, pastKeyPrefix, pastWorkflow, pastStep, base)
			if err == nil {
				rows.Add(int64(hi - lo + 1))
			}
			return err
		})
	})
}

func (b *sqliteBulk) backlog(ctx context.Context, workflow, step string, n int, now time.Time, rows *atomic.Int64) error {
	base := now.UnixMicro() - int64(n)
	return batches(ctx, n, func(lo, hi int) error {
		return b.tx(ctx, "backlog", func(tx *sql.Tx) error {
			var before int64
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM runs`).Scan(&before); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, sqliteSeq+`INSERT INTO runs
				(workflow, run_key, entity, input, input_hash, state, created_at, updated_at)
				SELECT ?3, ?4 || printf('%09d', n), '', ?5, ?6, 'pending', ?7 + n, ?7 + n FROM seq`,
				lo, hi, workflow, backlogKeyPrefix, emptyInput, emptyInputHash, base); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO steps
				(run_id, workflow, name, needs, waiting, state, next_at, created_at, updated_at)
				SELECT id, workflow, ?, '[]', 0, 'pending', created_at, created_at, created_at FROM runs WHERE id > ? ORDER BY id`,
				step, before); err != nil {
				return err
			}
			// The store's writer keeps the counts of runs by state (run_counts) as it
			// inserts runs; rows written around it are counted here.
			if _, err := tx.ExecContext(ctx, `INSERT INTO run_counts (workflow, state, n)
				SELECT workflow, state, count(*) FROM runs WHERE id > ? GROUP BY workflow, state
				ON CONFLICT (workflow, state) DO UPDATE SET n = n + excluded.n`, before); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO events (at, type, run_id, workflow, actor, detail)
				SELECT created_at, 'run.created', id, workflow, 'api', json_object('run_key', run_key, 'steps', 1)
				FROM runs WHERE id > ? ORDER BY id`, before)
			if err == nil {
				rows.Add(int64(hi - lo + 1))
			}
			return err
		})
	})
}

func (b *sqliteBulk) finish(ctx context.Context) error {
	_, err := b.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

func (b *sqliteBulk) close() error { return b.db.Close() }

func (b *sqliteBulk) tx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("bulk load %s: %w", what, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("bulk load %s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("bulk load %s: %w", what, err)
	}
	return nil
}
