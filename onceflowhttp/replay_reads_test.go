package onceflowhttp

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/store"
)

// readCounter is a store that counts how often the run and its steps are read.
type readCounter struct {
	store.Store
	mu    sync.Mutex
	runs  int
	steps int
}

func (c *readCounter) RunGetByID(ctx context.Context, id int64) (*store.Run, error) {
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	return c.Store.RunGetByID(ctx, id)
}

func (c *readCounter) StepListByRun(ctx context.Context, runID int64) ([]*store.Step, error) {
	c.mu.Lock()
	c.steps++
	c.mu.Unlock()
	return c.Store.StepListByRun(ctx, runID)
}

// reads returns the reads counted since the last call.
func (c *readCounter) reads() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fmt.Sprintf("RunGetByID: %d calls, StepListByRun: %d calls", c.runs, c.steps)
	c.runs, c.steps = 0, 0
	return s
}

// A replay's preview and the replay itself read the run and its steps once each: the plan
// they answer with is masked with what was read for it, and the store's transaction acts
// only on the run as it was read.
func TestReplayReadsItsRunOnce(t *testing.T) {
	var counter *readCounter
	b := setupReviewOn(t, func(st store.Store) store.Store {
		counter = &readCounter{Store: st}
		return counter
	})
	for _, path := range []string{"/v1/review/%d/charge/replay", "/v1/runs/%d/replay"} {
		id := b.parked(fmt.Sprint(len(path)), "ada-at-example")
		for _, q := range []string{"?dry_run=true", ""} {
			counter.reads()
			a := b.do("POST", fmt.Sprintf(path, id)+q, adminToken, nil, `{"merge_patch":{"email":"ada@example.com"},"note":"typo"}`)
			wantStatus(t, a, http.StatusOK, "")
			if got, want := counter.reads(), "RunGetByID: 1 calls, StepListByRun: 1 calls"; got != want {
				t.Errorf("POST %s%s: %s, want %s", fmt.Sprintf(path, id), q, got, want)
			}
		}
	}
}
