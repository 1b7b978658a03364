package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/store"
)

var _ store.ClockSource = (*Store)(nil)

// DatabaseNow implements store.ClockSource: the server's clock_timestamp(), the time when
// it evaluates the query (now() would be the start of the transaction).
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("postgres: database clock: %w", err)
	}
	return t, nil
}
