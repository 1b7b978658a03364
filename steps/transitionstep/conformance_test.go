package transitionstep_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/steps/steptest"
	"github.com/onceflow/onceflow/steps/transitionstep"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// entities is a real SQLite store of entity states that records the effect key of every
// transition asked of it and can fail the next one as a database that is unreachable.
type entities struct {
	store.EntityStore
	mu   sync.Mutex
	fail bool
	keys []string
}

func (e *entities) EntityTransition(ctx context.Context, p store.EntityTransitionParams) (*store.TransitionResult, error) {
	e.mu.Lock()
	e.keys = append(e.keys, p.EffectKey)
	fail := e.fail
	e.fail = false
	e.mu.Unlock()
	if fail {
		return nil, errors.New("database is locked")
	}
	return e.EntityStore.EntityTransition(ctx, p)
}

func TestConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "entities.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		e := &entities{EntityStore: st}
		return steptest.Harness{
			Kind:  transitionstep.NewKind(transitionstep.KindOptions{Store: e}),
			Block: "entity: \"order:conformance\"\nfrom: [pending]\nto: paid\ninitial: pending\non_invalid: needs_review\n",
			Arrange: func(t *testing.T, o steptest.Outcome) bool {
				switch o {
				case steptest.Retryable:
					e.mu.Lock()
					e.fail = true
					e.mu.Unlock()
				case steptest.Permanent:
					// The order was cancelled first: paying it is refused.
					if _, err := st.EntityTransition(context.Background(), store.EntityTransitionParams{Key: "order:conformance", From: []string{"pending"},
						Initial: "pending", To: "cancelled", EffectKey: "order-cancelled", Actor: "test", Now: time.Now()}); err != nil {
						t.Fatal(err)
					}
				case steptest.Unknown:
					return false // a transition commits with its audit event, or not at all
				}
				return true
			},
			Identities: func(*testing.T) []string { e.mu.Lock(); defer e.mu.Unlock(); return append([]string(nil), e.keys...) },
			Broken:     "entity: \"order:{input.id}\"\nfrom: [Pending]\nto: paid\n",
		}
	})
}
