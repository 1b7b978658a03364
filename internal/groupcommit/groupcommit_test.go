package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate is a commit function that records its batches and, while held, blocks the first
// commit until released, so that the test knows which items queue behind it.
type gate struct {
	mu       sync.Mutex
	batches  [][]int
	started  chan struct{}
	release  chan struct{}
	fail     func(items []int) error
	firstRun sync.Once
}

func newGate() *gate {
	return &gate{started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) commit(_ context.Context, items []int) ([]int, error) {
	g.firstRun.Do(func() {
		close(g.started)
		<-g.release
	})
	g.mu.Lock()
	g.batches = append(g.batches, slices.Clone(items))
	g.mu.Unlock()
	if g.fail != nil {
		if err := g.fail(items); err != nil {
			return nil, err
		}
	}
	out := make([]int, len(items))
	for i, v := range items {
		out[i] = v * 10
	}
	return out, nil
}

// waitPending spins until n items wait for a batch.
func waitPending[T, R any](t *testing.T, c *Committer[T, R], n int) {
	t.Helper()
	for c.Pending() < n {
		runtime.Gosched()
	}
}

func TestItemsQueuedDuringACommitFormOneBatch(t *testing.T) {
	g := newGate()
	var obs commits
	c := New(g.commit, Config{Observe: obs.observe})
	var wg sync.WaitGroup
	got := make([]int, 101)
	wg.Go(func() {
		v, err := c.Do(t.Context(), 0)
		if err != nil {
			t.Error(err)
		}
		got[0] = v
	})
	<-g.started
	for i := 1; i <= 100; i++ {
		wg.Go(func() {
			v, err := c.Do(t.Context(), i)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	waitPending(t, c, 100)
	close(g.release)
	wg.Wait()
	for i, v := range got {
		if v != i*10 {
			t.Errorf("caller %d got %d, want its own result %d", i, v, i*10)
		}
	}
	if len(g.batches) != 2 || len(g.batches[0]) != 1 || len(g.batches[1]) != 100 {
		t.Errorf("batch sizes = %v, want [1 100]", sizes(g.batches))
	}
	if obs.batches != 2 || obs.items != 101 || obs.failed != 0 {
		t.Errorf("observed %d commits of %d items, %d failed; want 2, 101, 0", obs.batches, obs.items, obs.failed)
	}
}

func TestMaxBatch(t *testing.T) {
	g := newGate()
	c := New(g.commit, Config{MaxBatch: 30})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Do(t.Context(), 0) })
	<-g.started
	for i := 1; i <= 100; i++ {
		wg.Go(func() { _, _ = c.Do(t.Context(), i) })
	}
	waitPending(t, c, 100)
	close(g.release)
	wg.Wait()
	if got := sizes(g.batches); !slices.Equal(got, []int{1, 30, 30, 30, 10}) {
		t.Errorf("batch sizes = %v, want [1 30 30 30 10]", got)
	}
}

func TestAFailedBatchIsRetriedItemByItem(t *testing.T) {
	g := newGate()
	refused := errors.New("refused")
	g.fail = func(items []int) error {
		if slices.Contains(items, 7) {
			return refused
		}
		return nil
	}
	var obs commits
	c := New(g.commit, Config{Observe: obs.observe})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Do(t.Context(), 0) })
	<-g.started
	errs := make([]error, 11)
	vals := make([]int, 11)
	for i := 1; i <= 10; i++ {
		wg.Go(func() { vals[i], errs[i] = c.Do(t.Context(), i) })
	}
	waitPending(t, c, 10)
	close(g.release)
	wg.Wait()
	for i := 1; i <= 10; i++ {
		if i == 7 {
			if !errors.Is(errs[i], refused) {
				t.Errorf("item 7: %v, want its own error", errs[i])
			}
			continue
		}
		if errs[i] != nil || vals[i] != i*10 {
			t.Errorf("item %d: %d, %v; want %d from a commit of its own", i, vals[i], errs[i], i*10)
		}
	}
	if obs.failed != 2 { // the batch of ten, then 7 alone
		t.Errorf("failed commits = %d, want 2", obs.failed)
	}
}

func TestACallerThatGaveUpIsDropped(t *testing.T) {
	g := newGate()
	c := New(g.commit, Config{})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Do(t.Context(), 0) })
	<-g.started
	ctx, cancel := context.WithCancel(t.Context())
	var err error
	wg.Go(func() { _, err = c.Do(ctx, 1) })
	wg.Go(func() { _, _ = c.Do(t.Context(), 2) })
	waitPending(t, c, 2)
	cancel()
	close(g.release)
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v, want context.Canceled", err)
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, b := range g.batches {
		if slices.Contains(b, 1) {
			t.Errorf("the cancelled item was committed: batches %v", g.batches)
		}
	}
}

func TestGoAndFlush(t *testing.T) {
	g := newGate()
	close(g.release)
	c := New(g.commit, Config{Concurrency: 3})
	for i := range 50 {
		c.Go(i)
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var all []int
	for _, b := range g.batches {
		all = append(all, b...)
	}
	slices.Sort(all)
	if len(all) != 50 || all[0] != 0 || all[49] != 49 {
		t.Errorf("committed %v, want 0..49 once each", all)
	}
}

// commits counts, through Config.Observe, the commits, their items and the failed ones.
type commits struct {
	mu                     sync.Mutex
	batches, items, failed int
}

func (o *commits) observe(items int, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batches++
	o.items += items
	if err != nil {
		o.failed++
	}
}

func sizes(bs [][]int) []int {
	var out []int
	for _, b := range bs {
		out = append(out, len(b))
	}
	return out
}

func TestFlushEndsWithItsContext(t *testing.T) {
	g := newGate()
	c := New(g.commit, Config{})
	if err := c.Flush(t.Context()); err != nil {
		t.Fatalf("Flush of an idle committer: %v", err)
	}
	c.Go(1)
	<-g.started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush while a commit hangs, with a cancelled context = %v, want context.Canceled", err)
	}
	close(g.release)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(g.batches) != 1 || g.batches[0][0] != 1 {
		t.Errorf("batches %v, want [[1]]", g.batches)
	}
}

// DoMany's items are queued at once and committed in batches of at most MaxBatch, as
// many at a time as Concurrency allows; each gets its own result, in order, and an item
// the database refuses fails alone.
func TestDoMany(t *testing.T) {
	g := newGate()
	close(g.release)
	refused := errors.New("refused")
	g.fail = func(items []int) error {
		if slices.Contains(items, 42) {
			return refused
		}
		return nil
	}
	c := New(g.commit, Config{MaxBatch: 30, Concurrency: 2})
	items := make([]int, 100)
	for i := range items {
		items[i] = i
	}
	res, errs := c.DoMany(t.Context(), items)
	for i := range items {
		switch {
		case i == 42 && !errors.Is(errs[i], refused):
			t.Errorf("item 42: %v, want its own error", errs[i])
		case i != 42 && (errs[i] != nil || res[i] != i*10):
			t.Errorf("item %d: %d, %v; want %d", i, res[i], errs[i], i*10)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var committed []int
	for _, b := range g.batches {
		if len(b) > 30 {
			t.Errorf("a batch of %d items, more than MaxBatch", len(b))
		}
		if len(b) > 1 || b[0] != 42 {
			committed = append(committed, b...)
		}
	}
	slices.Sort(committed)
	if len(committed) < 100 {
		t.Errorf("%d items committed in batches, want all 100", len(committed))
	}
}

// A lone item whose commit fails gets the commit's error, not a result: a caller alone in
// its batch is never told an item succeeded that the database refused. Its caller is the
// only one waiting, so no retry item by item answers it.
func TestALoneItemWhoseCommitFailsGetsTheError(t *testing.T) {
	full := errors.New("database or disk is full")
	var obs commits
	c := New(func(_ context.Context, items []int) ([]int, error) {
		return nil, full
	}, Config{Observe: obs.observe})
	v, err := c.Do(t.Context(), 7)
	if !errors.Is(err, full) {
		t.Fatalf("Do of a lone item whose commit failed = %d, %v; want the commit's error", v, err)
	}
	if v != 0 {
		t.Errorf("Do of a lone item whose commit failed returned result %d, want none", v)
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if obs.batches != 1 || obs.failed != 1 {
		t.Errorf("observed %d commits, %d failed; want the one failed commit, not retried", obs.batches, obs.failed)
	}
}

// waitingForRefill reports whether a committer waits for its queue to refill.
func (c *Committer[T, R]) waitingForRefill() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refill != nil
}

// TestRefillWaitsForTheCallersOfTheLastBatch: after a batch of three, a committer with
// Refill waits for three items before it takes the next batch, as long as the last commit
// took at most; the items that arrive meanwhile form one batch. With a gap, items that keep
// arriving within it keep the wait going just the same.
func TestRefillWaitsForTheCallersOfTheLastBatch(t *testing.T) {
	for _, cfg := range []Config{{Refill: time.Hour}, {Refill: time.Hour, RefillGap: time.Hour}} {
		t.Run(fmt.Sprintf("gap=%v", cfg.RefillGap), func(t *testing.T) {
			g := newGate()
			c := New(g.commit, cfg)
			// The first commit takes a second: the committer may then wait up to a second for
			// the next batch to fill.
			commitThree(t, c, g, time.Second)
			c.Go(4)
			c.Go(5)
			if !c.waitingForRefill() || c.Pending() != 2 {
				t.Fatalf("with 2 of 3 items queued: waiting %v, %d pending; want the committer still waiting for a third", c.waitingForRefill(), c.Pending())
			}
			c.Go(6)
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := sizes(g.batches); !slices.Equal(got, []int{3, 3}) {
				t.Errorf("batch sizes = %v, want [3 3]", got)
			}
		})
	}
}

// TestRefillNeverOutwaitsTheLastCommit: the wait for a refill is bounded by how long the
// last commit took, however long Refill is; after a batch of one there is none.
func TestRefillNeverOutwaitsTheLastCommit(t *testing.T) {
	var g gate
	g.firstRun.Do(func() {}) // no hold
	c := New(g.commit, Config{Refill: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, errs := c.DoMany(ctx, []int{1, 2}); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	for i := 3; i <= 5; i++ { // one at a time: after a batch of two, then batches of one
		if v, err := c.Do(ctx, i); err != nil || v != i*10 {
			t.Fatalf("item %d: %d, %v (the committer waited for a refill longer than its commit took)", i, v, err)
		}
	}
	if got := sizes(g.batches); !slices.Equal(got, []int{2, 1, 1, 1}) {
		t.Errorf("batch sizes = %v, want [2 1 1 1]", got)
	}
}

// TestRefillGapEndsTheWaitWhenItemsStop: with a gap, a committer whose callers do not come
// back stops waiting one gap after the last item arrived, long before the last commit's
// duration (which bounds the wait without a gap).
func TestRefillGapEndsTheWaitWhenItemsStop(t *testing.T) {
	g := newGate()
	c := New(g.commit, Config{Refill: time.Hour, RefillGap: time.Millisecond})
	commitThree(t, c, g, 3*time.Second) // without the gap the committer could wait 3 s for a refill
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if v, err := c.Do(ctx, 4); err != nil || v != 40 {
		t.Fatalf("item 4: %d, %v: the committer still waited for the items of callers that did not come back", v, err)
	}
	if got := sizes(g.batches); !slices.Equal(got, []int{3, 1}) {
		t.Errorf("batch sizes = %v, want [3 1]", got)
	}
}

// commitThree commits a batch of three items through c, whose first commit g holds for
// hold, and returns once c waits for a refill.
func commitThree(t *testing.T, c *Committer[int, int], g *gate, hold time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, errs := c.DoMany(t.Context(), []int{1, 2, 3}); errors.Join(errs...) != nil {
			t.Error(errs)
		}
	})
	<-g.started
	time.Sleep(hold)
	close(g.release)
	wg.Wait()
	awaitRefillWait(t, c)
}

// awaitRefillWait spins until c waits for a refill.
func awaitRefillWait[T, R any](t *testing.T, c *Committer[T, R]) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !c.waitingForRefill(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the committer does not wait for a refill")
		}
	}
}
