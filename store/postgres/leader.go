package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// LeaderAttempt implements store.Store: one upsert that takes the lease only where it is
// free, expired before Now, or already the owner's. Concurrent candidates serialize on the
// row; each sees the lease as the previous one left it.
func (s *Store) LeaderAttempt(ctx context.Context, p store.LeaderAttemptParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	var held bool
	err := s.tx(ctx, "leader attempt", func(t *txn) error {
		var owner string
		err := t.QueryRow(ctx, `INSERT INTO leaders AS l (name, owner, elected_at, expires_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET
				owner = excluded.owner,
				elected_at = CASE WHEN l.owner = excluded.owner THEN l.elected_at ELSE excluded.elected_at END,
				expires_at = excluded.expires_at
			WHERE l.owner = excluded.owner OR l.expires_at < $3
			RETURNING owner`, p.Name, p.Owner, p.Now, p.Now.Add(p.TTL)).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			held = false
			return nil
		}
		held = err == nil && owner == p.Owner
		return err
	})
	return held, err
}
