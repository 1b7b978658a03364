package sqlite

import (
	"fmt"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

// The audit sequence. Every audit event takes the next ID of one counter, drawn by the
// writer in the order its transaction appends events, so that IDs follow the order of the
// appends and commits: SQLite runs one write transaction at a time. The counter is the
// largest ID any transaction drew: the last_id of audit_spans, or the events table's own
// sequence for events written before it existed. The writer keeps it in memory while the
// database file's data_version says no other connection committed since its own last
// commit, and reads it again otherwise.
//
// Each transaction that drew IDs writes one row of audit_spans: the first and last ID it
// drew and the earliest and latest time of its events, so that EventList finds the events
// of a time range as a range of IDs.

// auditSeq is the writer's copy of the counter.
type auditSeq struct {
	mu sync.Mutex
	// last is the largest ID drawn by a committed transaction of this store; version is
	// the write connection's data_version when it committed. valid is false until the
	// first commit that drew IDs, and after a commit whose outcome is unknown.
	last    int64
	version int64
	valid   bool
}

// span is what one transaction drew: IDs first through last, for events at times minAt
// through maxAt (microseconds). first is 0 before the first ID.
type span struct {
	first, last  int64
	minAt, maxAt int64
}

// add notes ID id of an event at at.
func (s *span) add(id int64, at time.Time) {
	t := ts(at)
	if s.first == 0 {
		s.first, s.minAt, s.maxAt = id, t, t
	}
	s.last = id
	s.minAt, s.maxAt = min(s.minAt, t), max(s.maxAt, t)
}

// counterSQL reads the counter from the database.
const counterSQL = `SELECT max(coalesce((SELECT max(last_id) FROM audit_spans), 0),
	coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))`

// nextEventID draws the next ID of the audit sequence for an event at at.
func (w *writeTx) nextEventID(at time.Time) int64 {
	w.seqLast++
	w.span.add(w.seqLast, at)
	return w.seqLast
}

// loadSeq reads the counter, first thing in a write transaction: from memory when no
// other connection committed since this store's last commit, from the database otherwise.
func (w *writeTx) loadSeq() error {
	if err := w.tx.QueryRowContext(w.ctx, `PRAGMA data_version`).Scan(&w.seqVersion); err != nil {
		return err
	}
	seq := w.seq
	seq.mu.Lock()
	last, ok := seq.last, seq.valid && seq.version == w.seqVersion
	seq.mu.Unlock()
	if !ok {
		if err := w.tx.QueryRowContext(w.ctx, counterSQL).Scan(&last); err != nil {
			return err
		}
	}
	w.seqLast, w.seqLoaded = last, true
	return nil
}

// committed keeps the counter of a transaction that committed (ok), or forgets it after
// a commit that failed, whose outcome is unknown.
func (w *writeTx) committed(ok bool) {
	seq := w.seq
	seq.mu.Lock()
	defer seq.mu.Unlock()
	seq.last, seq.version, seq.valid = w.seqLast, w.seqVersion, ok
}

// checkDerivedEvents makes every write that derives an event compare it with the event
// the write path planned, field by field and byte for byte in its detail, and fail on a
// difference; and every write of a database of few runs compare run_counts with the runs
// it counts. The package's tests set it (export_test.go).
var checkDerivedEvents bool

// checkDerived compares a derived event with the planned one, when checkDerivedEvents;
// events builds both only then.
func (w *writeTx) checkDerived(events func() (planned, derived *store.Event)) error {
	if !checkDerivedEvents {
		return nil
	}
	planned, derived := events()
	p, d := *planned, *derived
	if ts(p.At) != ts(d.At) || p.Type != d.Type || p.RunID != d.RunID || p.StepID != d.StepID || p.Workflow != d.Workflow ||
		p.Entity != d.Entity || p.StepName != d.StepName || p.EffectKey != d.EffectKey || p.Attempt != d.Attempt ||
		p.Actor != d.Actor || p.Reason != d.Reason || string(p.Detail) != string(d.Detail) {
		return fmt.Errorf("derived event %d differs from the planned one:\nplanned %+v %s\nderived %+v %s", d.ID, p, p.Detail, d, d.Detail)
	}
	return nil
}

// checkRunCounts compares run_counts with the runs it counts, when checkDerivedEvents and
// the database has had at most a few thousand runs.
func (w *writeTx) checkRunCounts() error {
	if !checkDerivedEvents {
		return nil
	}
	var last int64
	if err := w.tx.QueryRowContext(w.ctx, `SELECT coalesce(max(id), 0) FROM runs`).Scan(&last); err != nil || last > 5000 {
		return err
	}
	var diff string
	err := w.tx.QueryRowContext(w.ctx, `WITH actual AS (SELECT workflow, state, count(*) AS n FROM runs GROUP BY workflow, state),
		kept AS (SELECT workflow, state, n FROM run_counts WHERE n <> 0)
		SELECT coalesce(group_concat(workflow || '/' || state || ': ' || n, ', '), '') FROM (
			SELECT * FROM (SELECT * FROM actual EXCEPT SELECT * FROM kept)
			UNION ALL SELECT workflow, state, -n FROM (SELECT * FROM kept EXCEPT SELECT * FROM actual))`).Scan(&diff)
	if err != nil {
		return fmt.Errorf("check run counts: %w", err)
	}
	if diff != "" {
		return fmt.Errorf("run_counts differs from the runs (counted, negative where only run_counts has it): %s", diff)
	}
	return nil
}
