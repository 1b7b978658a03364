package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

var leaderTests = []subtest{
	{"AcquireRenewExpire", testLeaderAcquireRenewExpire},
	{"NamesIndependent", testLeaderNamesIndependent},
	{"Concurrent", testLeaderConcurrent},
	{"InvalidParams", testLeaderInvalidParams},
}

// leader calls LeaderAttempt for owner at now with a TTL of ttl.
func (h *harness) leader(name, owner string, now time.Time, ttl time.Duration) bool {
	h.t.Helper()
	ok, err := h.s.LeaderAttempt(h.ctx, store.LeaderAttemptParams{Name: name, Owner: owner, Now: now, TTL: ttl})
	if err != nil {
		h.t.Fatalf("LeaderAttempt(%s, %s, %s): %v", name, owner, now.Sub(base), err)
	}
	return ok
}

func testLeaderAcquireRenewExpire(h *harness) {
	steps := []struct {
		owner string
		now   time.Duration
		want  bool
		why   string
	}{
		{"w1", 0, true, "a free leadership is acquired"},
		{"w2", time.Second, false, "held by w1 until 10s"},
		{"w1", 5 * time.Second, true, "the holder renews, until 15s"},
		{"w2", 12 * time.Second, false, "the renewal extended w1's lease past 10s"},
		{"w2", 15 * time.Second, false, "a lease expiring at Now has not expired before Now"},
		{"w2", 15*time.Second + time.Microsecond, true, "w1's lease expired: w2 takes over, until 25s"},
		{"w1", 16 * time.Second, false, "the former holder is refused"},
		{"w2", 30 * time.Second, true, "the holder renews even after its own lease expired"},
	}
	for _, st := range steps {
		if got := h.leader("reaper", st.owner, at(st.now), 10*time.Second); got != st.want {
			h.t.Errorf("LeaderAttempt(reaper, %s) at %s = %v, want %v (%s)", st.owner, st.now, got, st.want, st.why)
		}
	}
}

func testLeaderNamesIndependent(h *harness) {
	if !h.leader("reaper", "w1", base, time.Minute) {
		h.t.Fatal("w1 did not acquire the free leadership reaper")
	}
	if !h.leader("retention", "w2", base, time.Minute) {
		h.t.Error("w2 did not acquire retention while w1 leads reaper: names must be independent")
	}
	if h.leader("retention", "w1", at(time.Second), time.Minute) {
		h.t.Error("w1 acquired retention, which w2 holds")
	}
}

func testLeaderConcurrent(h *harness) {
	const candidates = 8
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for i := range candidates {
		owner := fmt.Sprintf("w%d", i)
		wg.Go(func() {
			ok, err := h.s.LeaderAttempt(h.ctx, store.LeaderAttemptParams{Name: "reaper", Owner: owner, Now: base, TTL: time.Minute})
			if err != nil {
				h.t.Errorf("LeaderAttempt by %s: %v", owner, err)
				return
			}
			if ok {
				mu.Lock()
				winners = append(winners, owner)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		h.t.Fatalf("%d candidates acquired the leadership at once (%q), want exactly 1", len(winners), winners)
	}
	if !h.leader("reaper", winners[0], at(time.Second), time.Minute) {
		h.t.Errorf("the winner %s could not renew", winners[0])
	}
}

func testLeaderInvalidParams(h *harness) {
	for _, p := range []store.LeaderAttemptParams{
		{Owner: "w1", Now: base, TTL: time.Minute},
		{Name: "reaper", Now: base, TTL: time.Minute},
		{Name: "reaper", Owner: "w1", Now: base},
	} {
		if ok, err := h.s.LeaderAttempt(h.ctx, p); err == nil || ok {
			h.t.Errorf("LeaderAttempt(%+v) = %v, %v; want an error", p, ok, err)
		}
	}
}
