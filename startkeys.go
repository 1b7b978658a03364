package onceflow

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

// recentKeysSize is how many run keys a client remembers having started or seen.
const recentKeysSize = 1 << 16

// DefaultRecentKeysTTL is Config.RecentKeysTTL's default.
const DefaultRecentKeysTTL = time.Hour

// recentKeys remembers the last run keys this client started or found already started,
// with what a repeated start answers from them: the run's ID, entity and creation time,
// the digest of its input, and its state as last seen. Start answers a remembered key
// whose input has the remembered digest in process, without a round trip to the database:
// the duplicate. Another input (a conflict, since a run's input digest never changes) and
// a key it does not remember go to the group commit, which decides new and repeated keys
// alike by the unique constraint, so that a new run costs no extra read.
//
// An entry is answered only while its run is younger than the TTL, and every entry is
// forgotten when a purge through the client's store begins or ends (store.PurgeCounter),
// so that an answer never names a run that retention purged: a purge in another process
// deletes finished runs older than its cutoff, and onceflow purge refuses a cutoff shorter
// than DefaultRecentKeysTTL. Entries are found by a 64-bit hash and compared by their full
// workflow and key, so a collision never answers for another run. Memory stays bounded:
// the oldest entry is forgotten first.
type recentKeys struct {
	seed maphash.Seed
	ttl  time.Duration
	// purges, when set, is the store's count of purges (store.PurgeCounter): when it
	// changed since the entries were remembered, they are forgotten.
	purges func() uint64
	mu     sync.Mutex
	gen    uint64 // purges() when the entries began
	set    map[uint64]*recentRun
	ring   []uint64
	next   int
}

// recentRun is what recentKeys remembers of one run.
type recentRun struct {
	workflow, runKey string
	id               int64
	entity           string
	inputHash        string
	created          time.Time
	state            store.State
	updated          time.Time
}

func newRecentKeys(ttl time.Duration, purges func() uint64) *recentKeys {
	r := &recentKeys{seed: maphash.MakeSeed(), ttl: ttl, purges: purges, set: map[uint64]*recentRun{}}
	if purges != nil {
		r.gen = purges()
	}
	return r
}

// forgetPurged forgets every entry when a purge began or ended since they were
// remembered. r.mu is held.
func (r *recentKeys) forgetPurged() {
	if r.purges == nil {
		return
	}
	if gen := r.purges(); gen != r.gen {
		r.gen = gen
		clear(r.set)
		r.ring, r.next = r.ring[:0], 0
	}
}

func (r *recentKeys) hash(workflow, runKey string) uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(workflow)
	h.WriteByte(0)
	h.WriteString(runKey)
	return h.Sum64()
}

// lookup returns the run the key started, as remembered, with input as its input, if it
// is remembered and the run is younger than the TTL at now; nil otherwise. The input is
// the caller's: it is the run's own when the digests match.
func (r *recentKeys) lookup(workflow, runKey string, now time.Time, input []byte) *store.Run {
	h := r.hash(workflow, runKey)
	r.mu.Lock()
	r.forgetPurged()
	e := r.set[h]
	var run *store.Run
	if e != nil && e.workflow == workflow && e.runKey == runKey && now.Sub(e.created) < r.ttl {
		run = &store.Run{ID: e.id, Workflow: e.workflow, RunKey: e.runKey, Entity: e.entity, Input: input, InputHash: e.inputHash,
			State: e.state, CreatedAt: e.created, UpdatedAt: e.updated}
	}
	r.mu.Unlock()
	return run
}

// add remembers run, forgetting the oldest entry when full. A run remembered already is
// updated with the state seen now.
func (r *recentKeys) add(run *store.Run) {
	h := r.hash(run.Workflow, run.RunKey)
	e := &recentRun{workflow: run.Workflow, runKey: run.RunKey, id: run.ID, entity: run.Entity, inputHash: run.InputHash,
		created: run.CreatedAt, state: run.State, updated: run.UpdatedAt}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetPurged()
	if _, ok := r.set[h]; ok {
		r.set[h] = e
		return
	}
	if len(r.ring) < recentKeysSize {
		r.ring = append(r.ring, h)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = h
		r.next = (r.next + 1) % recentKeysSize
	}
	r.set[h] = e
}
