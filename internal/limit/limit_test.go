package limit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// At most Concurrency holders at once, whatever the number of goroutines asking.
func TestConcurrencyIsNeverExceeded(t *testing.T) {
	l := New(Options{})
	if err := l.Register(HostKey("crm.example"), Limit{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	var inside, peak atomic.Int32
	hold := make(chan struct{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			release, err := l.Acquire(context.Background(), HostKey("crm.example"))
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-hold
			inside.Add(-1)
			release()
		})
	}
	// Let them through one at a time once three are inside: never a fourth.
	for i := range 20 {
		want := int32(min(3, 20-i))
		deadline := time.Now().Add(10 * time.Second)
		for inside.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d inside, want %d", i, inside.Load(), want)
			}
			time.Sleep(time.Millisecond) // polling an observable condition
		}
		if p := peak.Load(); p > 3 {
			t.Fatalf("%d holders at once, limit 3", p)
		}
		hold <- struct{}{}
	}
	wg.Wait()
	if p := peak.Load(); p != 3 {
		t.Errorf("peak %d, want exactly 3", p)
	}
}

// The rate limit spaces requests 1/R apart after the burst; Slow holds every request back.
func TestRateAndSlow(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	l := New(Options{Now: func() time.Time { return now }, Wait: func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		now = now.Add(d)
		return nil
	}})
	key := HostKey("api.example")
	if err := l.Register(key, Limit{PerSecond: 4, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		release, err := l.Acquire(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	// Two from the burst, then 250 ms apart.
	if len(waits) != 4 || waits[0] != 0 || waits[1] != 0 || waits[2] != 250*time.Millisecond || waits[3] != 250*time.Millisecond {
		t.Errorf("waits %v, want [0 0 250ms 250ms]", waits)
	}
	waits = nil
	if err := l.Slow(context.Background(), time.Minute, key); err != nil {
		t.Fatal(err)
	}
	release, err := l.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if len(waits) == 0 || waits[0] != time.Minute {
		t.Errorf("after Slow(1m) the next request waited %v", waits)
	}
}

func TestAcquireGivesUpWithItsContext(t *testing.T) {
	l := New(Options{})
	key := StepKey("w", "s")
	if err := l.Register(key, Limit{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	release, err := l.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Acquire(ctx, key); !errors.Is(err, context.Canceled) {
		t.Fatalf("second acquire: %v", err)
	}
	release()
	r2, err := l.Acquire(context.Background(), key) // the cancelled one holds nothing
	if err != nil {
		t.Fatal(err)
	}
	r2()
}

func TestRegisterAndHostKeys(t *testing.T) {
	l := New(Options{})
	if err := l.Register(HostKey("CRM.example"), Limit{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if err := l.Register(HostKey("crm.example"), Limit{Concurrency: 2}); err != nil {
		t.Errorf("the same limit again: %v", err)
	}
	if err := l.Register(HostKey("crm.example"), Limit{Concurrency: 5}); !errors.Is(err, ErrConflict) {
		t.Errorf("another limit for the same host: %v", err)
	}
	if err := l.Register(HostKey("127.0.0.1:8080"), Limit{PerSecond: 1}); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{"crm.example": 1, "crm.example:443": 1, "127.0.0.1:8080": 1, "127.0.0.1:9090": 0, "other.example": 0} {
		if got := l.HostKeys(host); len(got) != want {
			t.Errorf("HostKeys(%s) = %v", host, got)
		}
	}
}

// A request that would wait for a slowed-down destination longer than its context allows
// is told at once how long, holding nothing, rather than waiting in vain until it times
// out; one that may wait that long waits.
func TestAcquireReportsAWaitLongerThanItsContext(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waited []time.Duration
	l := New(Options{Now: func() time.Time { return now }, Wait: func(_ context.Context, d time.Duration) error {
		waited = append(waited, d)
		now = now.Add(d)
		return nil
	}})
	key := HostKey("api.example")
	if err := l.Register(key, Limit{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Slow(context.Background(), time.Hour, key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := l.Acquire(ctx, key)
	var we *WaitError
	if !errors.As(err, &we) || we.Wait != time.Hour || we.Key != key || len(waited) != 0 {
		t.Fatalf("acquire within a minute of a host held back an hour: %v (waited %v); want a *WaitError of 1h at once", err, waited)
	}
	release, err := l.Acquire(context.Background(), key) // nothing held by the refused one
	if err != nil || len(waited) != 1 || waited[0] != time.Hour {
		t.Fatalf("acquire without a deadline: %v, waited %v; want a wait of 1h", err, waited)
	}
	release()
}
