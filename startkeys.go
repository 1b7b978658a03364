package onceflow

import (
	"hash/maphash"
	"sync"
)

// recentKeysSize is how many run keys a client remembers having started or seen.
const recentKeysSize = 1 << 16

// recentKeys remembers, as 64-bit hashes, the last run keys this client started or found
// already started. Start looks a remembered key up with one index read, without waiting
// for the writer (the common repeat: a webhook delivered again, a form posted twice);
// a key it does not remember goes straight to the group commit, which decides new and
// repeated keys alike by the unique constraint, so that a new run costs no extra read. A
// hash collision or a forgotten key changes only which of the two ways answers, never
// the answer. Memory stays bounded: the oldest hash is forgotten first.
type recentKeys struct {
	seed maphash.Seed
	mu   sync.Mutex
	set  map[uint64]struct{}
	ring []uint64
	next int
}

func newRecentKeys() *recentKeys {
	return &recentKeys{seed: maphash.MakeSeed(), set: map[uint64]struct{}{}}
}

func (r *recentKeys) hash(workflow, runKey string) uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(workflow)
	h.WriteByte(0)
	h.WriteString(runKey)
	return h.Sum64()
}

// has reports whether the key is remembered.
func (r *recentKeys) has(workflow, runKey string) bool {
	h := r.hash(workflow, runKey)
	r.mu.Lock()
	_, ok := r.set[h]
	r.mu.Unlock()
	return ok
}

// add remembers the key, forgetting the oldest one when full.
func (r *recentKeys) add(workflow, runKey string) {
	h := r.hash(workflow, runKey)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[h]; ok {
		return
	}
	if len(r.ring) < recentKeysSize {
		r.ring = append(r.ring, h)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = h
		r.next = (r.next + 1) % recentKeysSize
	}
	r.set[h] = struct{}{}
}
