package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

// LeaderAttempt implements store.Store: one upsert that takes the lease only where it is
// free, expired before Now, or already the owner's.
func (s *Store) LeaderAttempt(ctx context.Context, p store.LeaderAttemptParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	var held bool
	err := s.tx(ctx, "leader attempt", func(tx dbtx) error {
		now := ts(p.Now)
		var owner string
		err := tx.QueryRowContext(ctx, `INSERT INTO leaders (name, owner, elected_at, expires_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET
				owner = excluded.owner,
				elected_at = CASE WHEN leaders.owner = excluded.owner THEN leaders.elected_at ELSE excluded.elected_at END,
				expires_at = excluded.expires_at
			WHERE leaders.owner = excluded.owner OR leaders.expires_at < ?
			RETURNING owner`, p.Name, p.Owner, now, ts(p.Now.Add(p.TTL)), now).Scan(&owner)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			held = false
			return nil
		case err != nil:
			return err
		}
		held = owner == p.Owner
		return nil
	})
	return held, err
}
