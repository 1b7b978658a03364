// Package groupcommit gathers the items many goroutines submit into batches that are
// committed together, one transaction (and one fsync) per batch instead of one per item.
//
// The first item of an idle committer is committed at once, and the items that arrive
// while a commit is under way form the next batch. A busy committer therefore batches as
// much as the database's commit latency allows, and an idle one adds no latency. With
// Config.Refill, a committer that just committed a batch of several items waits, no longer
// than that commit took, for the callers it answered to submit their next items (with
// Config.RefillGap, only while they keep coming). Each caller waits for the commit that
// holds its item and gets its own result.
//
// A commit that fails as a whole (the function returns an error) is retried item by item,
// so one item that the database refuses fails only its own caller; the others get the
// results of their own commits. No caller is told an item succeeded unless the commit
// that holds it returned.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// CommitFunc commits items in one transaction and returns one result per item, in order.
// A result may carry an item's own failure (a lost lease, a conflict); an error means the
// whole call failed and nothing was committed (or, for a failure during COMMIT, that the
// outcome is unknown).
type CommitFunc[T, R any] func(ctx context.Context, items []T) ([]R, error)

// Config tunes a Committer. The zero value is usable.
type Config struct {
	// MaxBatch is the most items committed together (default 256).
	MaxBatch int
	// Concurrency is how many batches may be committed at once (default 1: the next batch
	// forms while one commits, which suits a database with a single writer).
	Concurrency int
	// Timeout bounds one commit (default 30 s). A commit runs under its own context, so a
	// caller that gives up does not fail the other items of its batch.
	Timeout time.Duration
	// Observe, when set, is told of every commit: how many items it held, how long it
	// took and whether it failed as a whole. It runs on the committing goroutine.
	Observe func(items int, took time.Duration, err error)
	// Refill, when positive, is the longest a committer that just committed a batch of
	// several items waits for the queue to hold as many again before it takes the next
	// batch; it never waits longer than that batch's commit took (0: it takes what the
	// queue holds at once). The callers of a batch are woken when it commits, and callers
	// that submit one item after another submit their next one at once: without the wait
	// the next batch starts before they do, and each of them waits for two commits
	// instead of one. The first item of an idle committer, and the item after a batch of
	// one, are committed at once.
	Refill time.Duration
	// RefillGap, when positive, also ends the wait for a refill once a gap of that long
	// passed with no item arriving (the committer looks once a gap, and is not woken by
	// each item). Callers in this process submit their next items within microseconds of
	// their answer; callers that answer over a network come back much later, and a
	// committer that waited for them would sit idle. With a gap the wait lasts while items
	// keep coming and ends soon after they stop (0: the wait ends only when the queue holds
	// as many items as the last batch, or Refill has passed).
	RefillGap time.Duration
}

// Committer batches items for fn. It starts goroutines only while it has work, so it
// needs no Close.
type Committer[T, R any] struct {
	fn  CommitFunc[T, R]
	cfg Config

	mu      sync.Mutex
	queue   []*call[T, R]
	running int
	idle    chan struct{} // closed when running drops to 0 with an empty queue; nil while idle
	// refill is closed when the queue holds want items (Config.Refill); nil unless a
	// committer waits for it.
	refill chan struct{}
	want   int
}

type call[T, R any] struct {
	item T
	ctx  context.Context // nil for fire-and-forget items
	done chan struct{}
	res  R
	err  error
}

// New returns a committer that commits with fn.
func New[T, R any](fn CommitFunc[T, R], cfg Config) *Committer[T, R] {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &Committer[T, R]{fn: fn, cfg: cfg}
}

// Do submits item and waits for the commit that holds it. If ctx ends first, Do returns
// ctx's error; the item is then dropped if its batch has not started, and may still be
// committed if it has (as with any database call cancelled during its commit).
func (c *Committer[T, R]) Do(ctx context.Context, item T) (R, error) {
	cl := &call[T, R]{item: item, ctx: ctx, done: make(chan struct{})}
	c.enqueue(cl)
	select {
	case <-cl.done:
		return cl.res, cl.err
	case <-ctx.Done():
		var zero R
		return zero, context.Cause(ctx)
	}
}

// DoMany submits items at once, in order, and waits for the commits that hold them: they
// are committed in as few batches as MaxBatch allows, possibly with other callers' items.
// It returns each item's result and error, in order: an item's error is that of the commit
// that failed it (see Do). If ctx ends first, the items not yet answered get ctx's error;
// those whose batch has not started are dropped, the others may still be committed.
func (c *Committer[T, R]) DoMany(ctx context.Context, items []T) ([]R, []error) {
	calls := make([]*call[T, R], len(items))
	for i, item := range items {
		calls[i] = &call[T, R]{item: item, ctx: ctx, done: make(chan struct{})}
	}
	c.enqueue(calls...)
	res, errs := make([]R, len(items)), make([]error, len(items))
	for i, cl := range calls {
		select {
		case <-cl.done:
			res[i], errs[i] = cl.res, cl.err
		case <-ctx.Done():
			errs[i] = context.Cause(ctx)
		}
	}
	return res, errs
}

// Go submits item without waiting for it; its result is discarded. It is for writes whose
// caller has its answer already, such as the audit event of a decision taken on the read
// path.
func (c *Committer[T, R]) Go(item T) {
	c.enqueue(&call[T, R]{item: item, done: make(chan struct{})})
}

// Flush waits until every item submitted before it was committed or failed, or until ctx
// ends (then it returns ctx's error and the items are still being committed).
func (c *Committer[T, R]) Flush(ctx context.Context) error {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Pending returns how many items wait for a batch.
func (c *Committer[T, R]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

func (c *Committer[T, R]) enqueue(cls ...*call[T, R]) {
	c.mu.Lock()
	c.queue = append(c.queue, cls...)
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	if c.refill != nil && len(c.queue) >= c.want {
		close(c.refill)
		c.refill = nil
	}
	// A committer for each batch the queue holds, up to Concurrency committing at once.
	for n := (len(c.queue) + c.cfg.MaxBatch - 1) / c.cfg.MaxBatch; n > 0 && c.running < c.cfg.Concurrency; n-- {
		c.running++
		go c.run()
	}
	c.mu.Unlock()
}

// run commits batches until the queue is empty.
func (c *Committer[T, R]) run() {
	last, took := 0, time.Duration(0) // the size of the batch committed last, and how long it took
	for {
		c.awaitRefill(last, took)
		c.mu.Lock()
		batch := c.take()
		if len(batch) == 0 {
			c.running--
			if c.running == 0 && len(c.queue) == 0 {
				close(c.idle)
				c.idle = nil
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		began := time.Now()
		c.commit(batch)
		last, took = len(batch), time.Since(began)
	}
}

// awaitRefill waits, after a batch of last items, until the queue holds as many items,
// Config.Refill has passed, or (with Config.RefillGap) no item arrived for the gap.
func (c *Committer[T, R]) awaitRefill(last int, took time.Duration) {
	wait := min(c.cfg.Refill, took)
	if wait <= 0 || last < 2 {
		return
	}
	c.mu.Lock()
	want := min(last, c.cfg.MaxBatch)
	if len(c.queue) >= want || c.refill != nil {
		c.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	c.refill, c.want = ch, want
	seen := len(c.queue)
	c.mu.Unlock()
	// Without a gap the wait is one round; with one, a round lasts a gap and the wait goes
	// on while each round saw items arrive.
	deadline := time.Now().Add(wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		round := time.Until(deadline)
		if c.cfg.RefillGap > 0 {
			round = min(round, c.cfg.RefillGap)
		}
		if round <= 0 {
			break
		}
		t.Reset(round)
		filled := false
		select {
		case <-ch:
			filled = true
		case <-t.C:
		}
		if filled || c.cfg.RefillGap <= 0 {
			break
		}
		c.mu.Lock()
		n := len(c.queue)
		c.mu.Unlock()
		if n == seen {
			break
		}
		seen = n
	}
	c.mu.Lock()
	if c.refill == ch {
		c.refill = nil
	}
	c.mu.Unlock()
}

// take removes the next batch from the queue, answering the callers that gave up. It is
// called with mu held.
func (c *Committer[T, R]) take() []*call[T, R] {
	var batch []*call[T, R]
	n := 0
	for n < len(c.queue) && len(batch) < c.cfg.MaxBatch {
		cl := c.queue[n]
		n++
		if cl.ctx != nil && cl.ctx.Err() != nil {
			cl.err = context.Cause(cl.ctx)
			close(cl.done)
			continue
		}
		batch = append(batch, cl)
	}
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return batch
}

// commit commits batch, and on a failure of the whole batch each of its items alone.
func (c *Committer[T, R]) commit(batch []*call[T, R]) {
	err := c.try(batch)
	if err == nil {
		return
	}
	if len(batch) == 1 {
		batch[0].err = err
		close(batch[0].done)
		return
	}
	for _, cl := range batch {
		if err := c.try([]*call[T, R]{cl}); err != nil {
			cl.err = err
			close(cl.done)
		}
	}
}

// try runs one commit; on success it answers every caller of batch.
func (c *Committer[T, R]) try(batch []*call[T, R]) error {
	items := make([]T, len(batch))
	for i, cl := range batch {
		items[i] = cl.item
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	began := time.Now()
	res, err := c.fn(ctx, items)
	cancel()
	if c.cfg.Observe != nil {
		c.cfg.Observe(len(items), time.Since(began), err)
	}
	if err == nil && len(res) != len(items) {
		panic("groupcommit: the commit function returned a result count that differs from the item count")
	}
	if err != nil {
		return err
	}
	for i, cl := range batch {
		cl.res = res[i]
		close(cl.done)
	}
	return nil
}
