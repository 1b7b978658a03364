package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/internal/limit"
)

// The Store shares per-destination limits between processes (internal/limit.Gate): each
// method is one short statement, so that no transaction stays open while a request waits
// or runs.
//
// Concurrency uses leased slot rows rather than advisory locks: a session-level advisory
// lock would pin one pooled connection for as long as each request runs (and a pool of 10
// connections would cap every destination together), while a slot row is taken and given
// back by single statements, and one whose process died frees itself when its hold
// expires. Slots are picked with FOR UPDATE SKIP LOCKED, so concurrent takers never wait
// for each other nor take the same slot.
var _ limit.Gate = (*Store)(nil)

// DestinationSlotTake implements limit.Gate.
func (s *Store) DestinationSlotTake(ctx context.Context, key string, n int, owner string, hold time.Duration) (int, bool, error) {
	if ensured := fmt.Sprintf("slots %s %d", key, n); !s.known(ensured) {
		if _, err := s.pool.Exec(ctx, `INSERT INTO destination_slots (destination, slot) SELECT $1, g FROM generate_series(1, $2::int) g
			ON CONFLICT DO NOTHING`, key, n); err != nil {
			return 0, false, fmt.Errorf("postgres: destination slot: %w", err)
		}
		s.destinations.Store(ensured, true)
	}
	var slot int
	err := s.pool.QueryRow(ctx, `UPDATE destination_slots d SET owner = $3, expires_at = now() + $4::bigint * interval '1 microsecond'
		FROM (SELECT slot FROM destination_slots WHERE destination = $1 AND slot <= $2 AND (owner = '' OR expires_at < now())
			ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED) free
		WHERE d.destination = $1 AND d.slot = free.slot RETURNING d.slot`, key, n, owner, hold.Microseconds()).Scan(&slot)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("postgres: destination slot: %w", err)
	}
	return slot, true, nil
}

// DestinationSlotRelease implements limit.Gate.
func (s *Store) DestinationSlotRelease(ctx context.Context, key string, slot int, owner string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE destination_slots SET owner = '', expires_at = '-infinity'
		WHERE destination = $1 AND slot = $2 AND owner = $3`, key, slot, owner); err != nil {
		return fmt.Errorf("postgres: destination slot release: %w", err)
	}
	return nil
}

// DestinationTokenTake implements limit.Gate.
func (s *Store) DestinationTokenTake(ctx context.Context, key string, perSecond float64, burst int) (time.Duration, error) {
	if ensured := "bucket " + key; !s.known(ensured) {
		if _, err := s.pool.Exec(ctx, `INSERT INTO destination_buckets (destination, tokens, updated_at) VALUES ($1, $2, now())
			ON CONFLICT DO NOTHING`, key, float64(burst)); err != nil {
			return 0, fmt.Errorf("postgres: destination token: %w", err)
		}
		s.destinations.Store(ensured, true)
	}
	// The bucket refills at perSecond up to burst; a token is taken when one is there and
	// the destination is not held back. Otherwise: how long until both hold.
	var wait float64
	err := s.pool.QueryRow(ctx, `WITH b AS (
			SELECT destination, blocked_until,
				CASE WHEN $2::float8 > 0 THEN least($3::float8, tokens + extract(epoch FROM now() - updated_at)::float8 * $2::float8) ELSE 1 END AS available
			FROM destination_buckets WHERE destination = $1 FOR UPDATE
		), took AS (
			UPDATE destination_buckets d SET tokens = b.available - 1, updated_at = now()
			FROM b WHERE d.destination = b.destination AND b.blocked_until <= now() AND b.available >= 1
			RETURNING 1
		)
		SELECT CASE WHEN EXISTS (SELECT 1 FROM took) THEN 0 ELSE
			greatest(extract(epoch FROM greatest(b.blocked_until, now()) - now())::float8,
				CASE WHEN $2::float8 > 0 THEN (1 - b.available) / $2::float8 ELSE 0 END) END
		FROM b`, key, perSecond, float64(burst)).Scan(&wait)
	if err != nil {
		return 0, fmt.Errorf("postgres: destination token: %w", err)
	}
	if wait <= 0 {
		return 0, nil
	}
	return max(time.Duration(math.Ceil(wait*1e6))*time.Microsecond, time.Millisecond), nil
}

// DestinationSlow implements limit.Gate.
func (s *Store) DestinationSlow(ctx context.Context, key string, d time.Duration) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO destination_buckets (destination, tokens, updated_at, blocked_until)
		VALUES ($1, 1, now(), now() + $2::bigint * interval '1 microsecond')
		ON CONFLICT (destination) DO UPDATE SET blocked_until = greatest(destination_buckets.blocked_until, excluded.blocked_until)`,
		key, d.Microseconds()); err != nil {
		return fmt.Errorf("postgres: destination slow: %w", err)
	}
	return nil
}

// known reports whether this Store already made sure of the rows named by what.
func (s *Store) known(what string) bool {
	_, ok := s.destinations.Load(what)
	return ok
}
