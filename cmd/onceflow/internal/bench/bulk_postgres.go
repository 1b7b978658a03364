package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgresBulk loads rows into a PostgreSQL schema of store/postgres's schema: one
// INSERT … SELECT over generate_series per batch, each its own transaction.
type postgresBulk struct {
	conn *pgx.Conn
}

var _ bulkLoader = (*postgresBulk)(nil)

// openPostgresBulk connects to url with schema alone on the search_path.
func openPostgresBulk(ctx context.Context, url, schema string) (*postgresBulk, error) {
	conn, err := connectPostgres(ctx, url, schema)
	if err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	return &postgresBulk{conn: conn}, nil
}

// connectPostgres opens one connection to url, with schema alone on the search_path when
// it is set. The URL is parsed as the store's pool parses it, so that pool settings such as
// pool_max_conns are taken out rather than sent to the server, which would refuse them.
func connectPostgres(ctx context.Context, url, schema string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}

func (b *postgresBulk) effects(ctx context.Context, n int, now time.Time, rows *atomic.Int64) error {
	base := now.Add(-time.Duration(n) * time.Microsecond)
	return batches(ctx, n, func(lo, hi int) error {
		_, err := b.conn.Exec(ctx, `INSERT INTO effects
			(effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at)
			SELECT $3 || lpad(n::text, 9, '0'), 'completed', '', convert_to('{"ok":true}', 'UTF8'), n, n, $4, $5,
				$6::timestamptz + n * interval '1 microsecond', $6::timestamptz + n * interval '1 microsecond'
			FROM generate_series($1::bigint, $2::bigint) AS n`,
			lo, hi, pastKeyPrefix, pastWorkflow, pastStep, base)
		if err != nil {
			return fmt.Errorf("bulk load effects: %w", err)
		}
		rows.Add(int64(hi - lo + 1))
		return nil
	})
}

func (b *postgresBulk) backlog(ctx context.Context, workflow, step string, n int, now time.Time, rows *atomic.Int64) error {
	base := now.Add(-time.Duration(n) * time.Microsecond)
	return batches(ctx, n, func(lo, hi int) error {
		_, err := b.conn.Exec(ctx, `WITH r AS (
				INSERT INTO runs (workflow, run_key, entity, input, input_hash, state, created_at, updated_at)
				SELECT $3, $4 || lpad(n::text, 9, '0'), '', $5::bytea, $6, 'pending',
					$7::timestamptz + n * interval '1 microsecond', $7::timestamptz + n * interval '1 microsecond'
				FROM generate_series($1::bigint, $2::bigint) AS n
				RETURNING id, workflow, run_key, created_at
			), s AS (
				INSERT INTO steps (run_id, workflow, name, waiting, state, next_at, created_at, updated_at)
				SELECT id, workflow, $8, 0, 'pending', created_at, created_at, created_at FROM r
			)
			INSERT INTO events (at, type, run_id, workflow, actor, detail)
			SELECT created_at, 'run.created', id, workflow, 'api', jsonb_build_object('run_key', run_key, 'steps', 1) FROM r`,
			lo, hi, workflow, backlogKeyPrefix, emptyInput, emptyInputHash, base, step)
		if err != nil {
			return fmt.Errorf("bulk load backlog: %w", err)
		}
		rows.Add(int64(hi - lo + 1))
		return nil
	})
}

// finish vacuums and analyzes the loaded tables, as autovacuum would in time.
func (b *postgresBulk) finish(ctx context.Context) error {
	if _, err := b.conn.Exec(ctx, `VACUUM ANALYZE runs, steps, events, effects`); err != nil {
		return fmt.Errorf("bulk load: vacuum: %w", err)
	}
	return nil
}

func (b *postgresBulk) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.conn.Close(ctx)
}
