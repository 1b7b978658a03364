package postgres

import (
	"context"

	"github.com/onceflow/onceflow/store"
)

var _ store.EventAppender = (*Store)(nil)

// EventAppend implements store.EventAppender.
func (s *Store) EventAppend(ctx context.Context, e *store.Event) error {
	return s.tx(ctx, "append event", func(t *txn) error {
		t.event(e)
		return nil
	})
}
