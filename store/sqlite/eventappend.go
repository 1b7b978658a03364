package sqlite

import (
	"context"

	"github.com/onceflow/onceflow/store"
)

var _ store.EventAppender = (*Store)(nil)

// EventAppend implements store.EventAppender.
func (s *Store) EventAppend(ctx context.Context, e *store.Event) error {
	return s.write(ctx, "append event", func(w *writeTx) error {
		c := *e // the caller's event keeps its ID
		w.event(&c)
		return nil
	})
}
