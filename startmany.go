package onceflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/store"
)

// DefaultMaxStartMany is Config.MaxStartMany's default: the most items one StartMany
// call takes.
const DefaultMaxStartMany = 1000

// ErrTooManyItems: a StartMany call has more items than Config.MaxStartMany; nothing was
// started.
var ErrTooManyItems = errors.New("too many items")

// StartItem is one run of a StartMany call: the business event's run key and the run's
// input, as Start takes them.
type StartItem struct {
	RunKey string
	Input  any
}

// StartStatus is what StartMany did with one item.
type StartStatus string

// Statuses of StartMany's items.
const (
	// StartCreated: the item started a new run.
	StartCreated StartStatus = "created"
	// StartDuplicate: the key had started a run with the same input (earlier, or by an
	// earlier item of the call); nothing was created.
	StartDuplicate StartStatus = "duplicate"
	// StartConflict: the key had started a run with another input; nothing was created
	// (Err is a *RunConflictError naming that run).
	StartConflict StartStatus = "conflict"
	// StartInvalid: the item cannot start a run — its key breaks the identifier rule (a
	// *KeyError) or its input is refused (an *InputError); nothing was written for it.
	StartInvalid StartStatus = "invalid"
)

// StartResult is the result of one StartMany item.
type StartResult struct {
	Status StartStatus
	// Run is the run created, or the one the key had started (duplicate), as Start returns
	// it; nil for a conflict or an invalid item.
	Run *Run
	// Err says why an item is a conflict (*RunConflictError) or invalid (*InputError,
	// *KeyError); nil otherwise.
	Err error
}

// StartMany starts a run of workflow for each item, as that many Start calls would, in
// fewer transactions: for imports and backfills (a file of leads, a day of orders). Each
// item has its own run key and its own result, in the order of items: created, duplicate,
// conflict or invalid. An item whose key repeats an earlier item's is that item's duplicate
// (same input) or conflicts with it. An invalid item fails alone; the others are started.
//
// StartMany returns once every item it reports created or duplicate is durably stored. An
// error means the call failed as a whole and nothing is reported: a workflow that is not
// registered (ErrWorkflowNotFound), more than Config.MaxStartMany items (ErrTooManyItems),
// or the database failing. In the last case some items may have been stored before the
// failure; calling StartMany again with the same items answers those as duplicates, so a
// failed call is retried as it is.
//
// The valid items are written in one transaction on PostgreSQL; on SQLite they are
// group-committed with the writes of the other callers, in transactions of at most
// Config.MaxBatch items. A key this client remembers with the same input is answered in
// process, as Start answers it; every other item, a conflict included, is decided by the
// database in that transaction.
func (c *Client) StartMany(ctx context.Context, workflow string, items []StartItem) ([]StartResult, error) {
	return c.startMany(ctx, nil, workflow, items, "api")
}

// StartManyFrom is StartMany on behalf of a caller from outside the program: it starts
// the runs only if MayStart allows it (a *StartRefusedError otherwise, and nothing is
// started), and the audit trail names by.Actor() as their starter.
func (c *Client) StartManyFrom(ctx context.Context, by Caller, workflow string, items []StartItem) ([]StartResult, error) {
	return c.startMany(ctx, &by, workflow, items, by.Actor())
}

func (c *Client) startMany(ctx context.Context, by *Caller, workflow string, items []StartItem, actor string) ([]StartResult, error) {
	def, err := c.workflowFor(workflow, by)
	if err != nil {
		return nil, err
	}
	if len(items) > c.cfg.MaxStartMany {
		return nil, fmt.Errorf("onceflow: start many %s: %d items; at most %d in one call (Config.MaxStartMany), split them: %w",
			workflow, len(items), c.cfg.MaxStartMany, ErrTooManyItems)
	}
	out := make([]StartResult, len(items))
	if len(items) == 0 {
		return out, nil
	}
	now := c.now(ctx)
	ps := make([]store.RunInsertParams, len(items))
	var pending []int // the items the store decides, in order
	for i, it := range items {
		p, err := c.runInsertFor(def, workflow, it.RunKey, it.Input, now)
		if err != nil {
			out[i] = StartResult{Status: StartInvalid, Err: err}
			continue
		}
		p.Actor = actor
		ps[i] = p
		if known := c.recent.lookup(workflow, it.RunKey, now, p.Input); known != nil && known.InputHash == p.InputHash {
			c.insertRunLater(p) // appends run.deduplicated, as Start does
			out[i] = c.startResult(p, known, false)
			continue
		}
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return out, nil
	}
	res, err := c.insertRuns(ctx, ps, pending)
	if err != nil {
		return nil, fmt.Errorf("onceflow: start many %s: %w", workflow, err)
	}
	created := false
	for j, i := range pending {
		r := res[j]
		if r.Err != nil {
			// The store refused the item alone (PostgreSQL cannot store a NUL byte, say).
			out[i] = StartResult{Status: StartInvalid, Err: &InputError{Workflow: workflow, Problem: r.Err.Error()}}
			continue
		}
		c.recent.add(r.Run)
		out[i] = c.startResult(ps[i], r.Run, r.Created)
		created = created || r.Created
	}
	if created {
		c.poke()
	}
	return out, nil
}

// startResult is started's answer as a StartResult.
func (c *Client) startResult(p store.RunInsertParams, run *store.Run, created bool) StartResult {
	r, err := c.started(p, run, created)
	switch {
	case err != nil:
		return StartResult{Status: StartConflict, Err: err}
	case created:
		return StartResult{Status: StartCreated, Run: r}
	}
	return StartResult{Status: StartDuplicate, Run: r}
}

// insertRuns writes the starts ps[i] for i in which, and returns their results in that
// order, once every one of them is durable. On a database with one writer they go through
// its committer; otherwise they are one RunInsertMany, one transaction.
func (c *Client) insertRuns(ctx context.Context, ps []store.RunInsertParams, which []int) ([]store.RunInsertResult, error) {
	if c.startsInWrites {
		items := make([]writeItem, len(which))
		for j, i := range which {
			items[j] = writeItem{start: &ps[i]}
		}
		res, errs := c.writes.DoMany(ctx, items)
		failed := 0
		var first error
		for _, err := range errs {
			if err != nil {
				failed++
				first = cmp.Or(first, err)
			}
		}
		if failed > 0 {
			return nil, fmt.Errorf("%d of %d items not written: %w", failed, len(items), first)
		}
		out := make([]store.RunInsertResult, len(which))
		for j := range res {
			out[j] = res[j].start
		}
		return out, nil
	}
	batch := make([]store.RunInsertParams, len(which))
	for j, i := range which {
		batch[j] = ps[i]
	}
	began := time.Now()
	out, err := c.store.RunInsertMany(ctx, batch)
	c.observeCommit(CommitStarts, len(batch), time.Since(began), err)
	return out, err
}
