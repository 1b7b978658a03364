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
	r := newRecentKeys(time.Hour)
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
	r := newRecentKeys(time.Hour)
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
