package sqlite

import "github.com/onceflow/onceflow/store"

// The writer's cache. A write transaction keeps in memory the steps of the runs it
// touches (writeTx.runs and writeTx.steps), exact because every change to them goes
// through writeTx under SQLite's write lock. The claims and records of the write path
// (WriteBatch, StepClaim, StepRecord) hand that copy on to the next such transaction, so
// that a record finds the step it records, and a claim the run of a step it takes, without
// reading them again: the runs of the steps in flight are read once, when their first step
// is claimed, not at every claim and record.
//
// The copy stays exact while nothing else changes those rows:
//   - another connection (another process on the same file) changes the write
//     connection's PRAGMA data_version, which each transaction reads first (loadSeq): a
//     different value drops the cache;
//   - every other write of this store (review actions, cancels, the reaper, retention,
//     its own SQL on steps or runs) drops it too (cacheDrop), unless it is known to change
//     nothing the copy holds (cacheKeep: heartbeats, checkpoints, starts);
//   - a transaction that fails, or whose commit fails, leaves no cache behind: the copy
//     it was changing is dropped with it.
//
// What is kept after a commit: the runs read with the outputs of their completed steps
// (the claims need them), that still have a step to run; at most maxCachedRuns of them,
// those with a step in flight first.

// cacheUse says what a write transaction does with the writer's cache.
type cacheUse int

const (
	// cacheDrop: the transaction may change steps or runs outside writeTx's copy; the
	// cache is dropped before it runs.
	cacheDrop cacheUse = iota
	// cacheKeep: the transaction changes nothing the cache holds (a step's lease expiry,
	// its progress, new runs); the cache stays as it is.
	cacheKeep
	// cacheShare: the transaction starts from the cache and leaves its own copy as the
	// cache when it commits.
	cacheShare
)

// maxCachedRuns bounds the runs the cache holds (about 2 KB each): a commit that would
// leave more keeps only the runs with a step in flight, and drops the cache if they are
// still too many; the runs are read again when next needed.
const maxCachedRuns = 4096

// writeCache is the copy a committed transaction left: the runs it knew and their steps,
// valid while the write connection's data_version is version.
type writeCache struct {
	runs    map[int64]*runSteps
	steps   map[int64]*stepStatus
	version int64
}

// adopt starts w from the store's cache, taken out of the store (a transaction that fails
// leaves none), if no other connection committed since it was left.
func (w *writeTx) adopt(s *Store) {
	c := s.cache
	s.cache = nil
	if c == nil || c.version != w.seqVersion {
		return
	}
	w.runs, w.steps = c.runs, c.steps
}

// use notes that the transaction uses run rs (it read it, or found it in the cache), for
// the cache to look at rs when the transaction commits.
func (w *writeTx) use(rs *runSteps) {
	if !rs.used {
		rs.used = true
		w.used = append(w.used, rs)
	}
}

// leave returns the cache w leaves when it committed: the runs it used that were read
// with their outputs and still have a step to run join or stay in the copy, the others
// leave it, and the runs it did not use stay as they were.
func (w *writeTx) leave() *writeCache {
	for _, rs := range w.used {
		rs.used = false
		if !rs.outputs || !rs.unfinished() {
			w.forget(rs)
		}
	}
	w.used = w.used[:0]
	if len(w.runs) > maxCachedRuns {
		for _, rs := range w.runs {
			if !rs.inFlight() {
				w.forget(rs)
			}
		}
	}
	if len(w.runs) == 0 || len(w.runs) > maxCachedRuns {
		return nil
	}
	return &writeCache{runs: w.runs, steps: w.steps, version: w.seqVersion}
}

// forget removes run rs and its steps from what w knows.
func (w *writeTx) forget(rs *runSteps) {
	delete(w.runs, rs.run.ID)
	for _, st := range rs.steps {
		delete(w.steps, st.id)
	}
}

// inFlight reports whether a step of the run is processing.
func (rs *runSteps) inFlight() bool {
	for _, st := range rs.steps {
		if st.state == store.StateProcessing {
			return true
		}
	}
	return false
}

// unfinished reports whether a step of the run is still to run or running.
func (rs *runSteps) unfinished() bool {
	for _, st := range rs.steps {
		switch st.state {
		case store.StatePending, store.StateRetrying, store.StateProcessing:
			return true
		}
	}
	return false
}
