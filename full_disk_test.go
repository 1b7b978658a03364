package onceflow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// smallFilesystem mounts a tmpfs of size bytes for the test, or skips it when that is not
// possible (not root, or no permission to mount).
func smallFilesystem(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs that can fill up; run the tests as root to include it")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v); the full-disk test needs it", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the filesystem is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 16<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

// The filesystem holding the SQLite database fills up while runs are being started and
// executed, and then space is freed again. While it is full, starts fail and are not
// acknowledged; afterwards the engine carries on without a restart. Every acknowledged
// start completes, each effect is completed once in the ledger with one successful
// attempt, the destination saw no request that has no attempt recorded, and the database
// opens again cleanly.
func TestSQLiteFullDisk(t *testing.T) {
	dir := smallFilesystem(t, 8<<20)
	path := filepath.Join(dir, "onceflow.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dest := newDestination(t)
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "full-disk", Workers: 4, LeaseFor: 2 * time.Second,
		PollInterval: 20 * time.Millisecond, ReapInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	retry := onceflow.RetryPolicy{MaxAttempts: 100, Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	if err := c.Register(onceflow.Workflow{Name: "disk", Steps: []onceflow.Step{
		{ID: "crm", EffectKey: "lead-create:{input.n}", Do: post(dest.URL), Retry: retry},
		{ID: "mail", Needs: []string{"crm"}, EffectKey: "mail:{input.n}", Do: post(dest.URL), Retry: retry},
	}}); err != nil {
		t.Fatal(err)
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- c.Serve(serveCtx) }()

	var (
		mu       sync.Mutex
		acked    = map[int]int64{} // input n → run id
		failures atomic.Int64
		lastErr  atomic.Value
	)
	startCtx, stopStarting := context.WithCancel(ctx)
	var starters sync.WaitGroup
	for g := range 4 {
		starters.Go(func() {
			for i := g; startCtx.Err() == nil; i += 4 {
				key := fmt.Sprintf("form-%05d", i)
				for startCtx.Err() == nil {
					run, err := c.Start(startCtx, "disk", key, map[string]any{"n": i})
					if err == nil {
						mu.Lock()
						acked[i] = run.ID
						mu.Unlock()
						break
					}
					failures.Add(1)
					lastErr.Store(err.Error())
					select {
					case <-startCtx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
		})
	}
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor(t, "50 acknowledged starts", func() bool { return ackedCount() >= 50 })
	filler := fill(t, dir)
	waitFor(t, "starts to fail on the full filesystem", func() bool { return failures.Load() >= 20 })
	t.Logf("while full: %d failed starts, e.g. %v", failures.Load(), lastErr.Load())
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	n := ackedCount()
	waitFor(t, "50 more acknowledged starts after space was freed", func() bool { return ackedCount() >= n+50 })
	stopStarting()
	starters.Wait()

	mu.Lock()
	defer mu.Unlock()
	waitFor(t, "every acknowledged run to complete", func() bool {
		done, err := st.RunList(ctx, store.RunListParams{State: store.StateCompleted, Limit: 1 << 20})
		if err != nil {
			return false
		}
		completed := map[int64]bool{}
		for _, r := range done {
			completed[r.ID] = true
		}
		for _, id := range acked {
			if !completed[id] {
				return false
			}
		}
		return true
	})
	stopServe()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}

	_, keys, applied := dest.snapshot()
	requests := map[string]int{}
	for _, k := range keys {
		requests[k]++
	}
	for n, id := range acked {
		key := fmt.Sprintf("form-%05d", n)
		r, err := st.RunGetByKey(ctx, "disk", key)
		if err != nil || r.ID != id || r.State != store.StateCompleted {
			t.Errorf("acknowledged start %s (run %d): %+v, %v; want completed", key, id, r, err)
			continue
		}
		atts, err := st.AttemptListByRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		perKey, successes := map[string]int{}, map[string]int{}
		for _, a := range atts {
			perKey[a.EffectKey]++
			if a.Outcome == store.OutcomeSuccess {
				successes[a.EffectKey]++
			}
		}
		for _, effect := range []string{fmt.Sprintf("lead-create:%d", n), fmt.Sprintf("mail:%d", n)} {
			if successes[effect] != 1 || applied[effect] != 1 {
				t.Errorf("%s: %d successful attempts, applied %d times; want 1 and 1", effect, successes[effect], applied[effect])
			}
			if requests[effect] > perKey[effect] {
				t.Errorf("%s: %d requests for %d attempts: a request was sent without an attempt on record", effect, requests[effect], perKey[effect])
			}
			e, err := st.EffectGetByKey(ctx, effect)
			if err != nil || e.State != store.EffectCompleted || e.RunID != r.ID {
				t.Errorf("ledger row of %s: %+v, %v; want completed by run %d", effect, e, err, r.ID)
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close after the disk filled: %v", err)
	}
	again, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatalf("reopen after the disk filled: %v", err)
	}
	defer again.Close()
	runs, err := again.RunList(ctx, store.RunListParams{Limit: 1 << 20})
	if err != nil || len(runs) < len(acked) {
		t.Fatalf("after reopening: %d runs, %v; want at least the %d acknowledged", len(runs), err, len(acked))
	}
	t.Logf("acknowledged %d, stored %d, failed starts %d, requests %d", len(acked), len(runs), failures.Load(), len(keys))
}
