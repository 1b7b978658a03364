package sqlite

import (
	"context"
	"database/sql"

	"github.com/onceflow/onceflow/store"
)

var _ store.EventAppender = (*Store)(nil)

// EventAppend implements store.EventAppender.
func (s *Store) EventAppend(ctx context.Context, e *store.Event) error {
	return s.tx(ctx, "append event", func(tx *sql.Tx) error { return insertEvent(ctx, tx, e) })
}
