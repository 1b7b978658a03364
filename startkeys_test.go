package onceflow

import (
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

var recentBase = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

func recentRunOf(workflow, key string, id int64) *store.Run {
	return &store.Run{ID: id, Workflow: workflow, RunKey: key, InputHash: "h" + key, CreatedAt: recentBase, State: store.StatePending}
}

// The client remembers the last recentKeysSize keys and forgets the oldest first.
func TestRecentKeysForgetOldestFirst(t *testing.T) {
	r := newRecentKeys(time.Hour, nil)
	for i := range recentKeysSize + 10 {
		r.add(recentRunOf("w", strconv.Itoa(i), int64(i+1)))
	}
	r.add(recentRunOf("w", strconv.Itoa(recentKeysSize+9), recentKeysSize+10)) // a key added again takes no second place
	if len(r.set) != recentKeysSize || len(r.ring) != recentKeysSize {
		t.Fatalf("remembers %d keys in a ring of %d, want %d", len(r.set), len(r.ring), recentKeysSize)
	}
	has := func(w, k string) bool { return r.lookup(w, k, recentBase, nil) != nil }
	for i := range 10 {
		if has("w", strconv.Itoa(i)) {
			t.Fatalf("key %d of the first ten is still remembered", i)
		}
	}
	for _, i := range []int{10, recentKeysSize / 2, recentKeysSize + 9} {
		if !has("w", strconv.Itoa(i)) {
			t.Fatalf("key %d forgotten", i)
		}
	}
	if has("x", "10") || has("w1", "0") {
		t.Fatal("a key of another workflow is remembered")
	}
}

// An entry answers with the run it remembers, for its own workflow and key only, and only
// while the run is younger than the TTL.
func TestRecentKeysAnswer(t *testing.T) {
	r := newRecentKeys(time.Hour, nil)
	r.add(&store.Run{ID: 7, Workflow: "w", RunKey: "k", Entity: "lead:1", InputHash: "abc", CreatedAt: recentBase,
		State: store.StateCompleted, UpdatedAt: recentBase.Add(time.Second)})
	got := r.lookup("w", "k", recentBase.Add(59*time.Minute), []byte(`{"a":1}`))
	if got == nil || got.ID != 7 || got.Entity != "lead:1" || got.InputHash != "abc" || string(got.Input) != `{"a":1}` ||
		got.State != store.StateCompleted || !got.CreatedAt.Equal(recentBase) {
		t.Fatalf("lookup = %+v, want run 7 as remembered, with the caller's input", got)
	}
	if got := r.lookup("w", "k", recentBase.Add(time.Hour), nil); got != nil {
		t.Fatalf("lookup an hour after the run was created = %+v, want nothing: the TTL is over", got)
	}
	// Another key stored under the same hash is not taken for this one.
	h := r.hash("w", "k")
	r.set[h] = &recentRun{workflow: "w", runKey: "other", id: 8, created: recentBase}
	if got := r.lookup("w", "k", recentBase, nil); got != nil {
		t.Fatalf("lookup of k found %+v, the entry of another key with the same hash", got)
	}
}

// Every entry is forgotten when the store's count of purges changes.
func TestRecentKeysForgetOnPurge(t *testing.T) {
	var purges uint64
	r := newRecentKeys(time.Hour, func() uint64 { return purges })
	r.add(recentRunOf("w", "a", 1))
	if r.lookup("w", "a", recentBase, nil) == nil {
		t.Fatal("key a forgotten before any purge")
	}
	purges++ // a purge began
	if got := r.lookup("w", "a", recentBase, nil); got != nil {
		t.Fatalf("after a purge began, key a answers %+v; want it forgotten", got)
	}
	r.add(recentRunOf("w", "b", 2)) // seen while the purge runs
	purges++                        // the purge ended
	if got := r.lookup("w", "b", recentBase, nil); got != nil {
		t.Fatalf("after the purge ended, key b (seen while it ran) answers %+v; want it forgotten", got)
	}
	r.add(recentRunOf("w", "c", 3))
	if r.lookup("w", "c", recentBase, nil) == nil || len(r.set) != 1 || len(r.ring) != 1 {
		t.Fatalf("after the purge: %d entries in a ring of %d, want c alone", len(r.set), len(r.ring))
	}
}
