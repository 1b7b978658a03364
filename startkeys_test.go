package onceflow

import (
	"strconv"
	"testing"
)

// The client remembers the last recentKeysSize keys and forgets the oldest first.
func TestRecentKeysForgetOldestFirst(t *testing.T) {
	r := newRecentKeys()
	for i := range recentKeysSize + 10 {
		r.add("w", strconv.Itoa(i))
	}
	r.add("w", strconv.Itoa(recentKeysSize+9)) // a key added again takes no second place
	if len(r.set) != recentKeysSize || len(r.ring) != recentKeysSize {
		t.Fatalf("remembers %d keys in a ring of %d, want %d", len(r.set), len(r.ring), recentKeysSize)
	}
	for i := range 10 {
		if r.has("w", strconv.Itoa(i)) {
			t.Fatalf("key %d of the first ten is still remembered", i)
		}
	}
	for _, i := range []int{10, recentKeysSize / 2, recentKeysSize + 9} {
		if !r.has("w", strconv.Itoa(i)) {
			t.Fatalf("key %d forgotten", i)
		}
	}
	if r.has("x", "10") || r.has("w1", "0") {
		t.Fatal("a key of another workflow is remembered")
	}
}
