package sqlite

import (
	"database/sql"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

// The records of a batch are written with a handful of statements for all of them (see
// recordBatch): one closes their attempts, one is the compare-and-set of their steps, and
// once every record has been decided in order, one completes and one releases their
// ledger rows and one releases the steps that need them. Each record is still decided as
// if it were recorded alone, in order, so that it appends the same events and leaves the
// same rows: the records are written in segments whose steps are distinct (a step
// recorded twice starts a new segment, so that its second record sees the first), and a
// record that cancels or skips its dependents ends its segment, because that reads the
// steps table, where the compare-and-set of the records after it must not be seen yet.

// recordAll records the valid entries of ps in w and sets their results.
func recordAll(w *writeTx, ps []store.StepRecordParams, valid []bool, ids []int64, results []error) error {
	// The steps of the runs of every entry's step, read once.
	if err := w.loadRuns(stmtRunsOfSteps, ids); err != nil {
		return err
	}
	b := &recordSegment{applied: map[int64]bool{}, released: map[int64]*releaseCount{}}
	seen := make(map[int64]bool, len(ids))
	for i := range ps {
		if !valid[i] {
			continue
		}
		if seen[ps[i].StepID] {
			if err := b.record(w, ps, results); err != nil {
				return err
			}
			clear(seen)
		}
		b.items = append(b.items, i)
		seen[ps[i].StepID] = true
		if propagates(&ps[i]) {
			if err := b.record(w, ps, results); err != nil {
				return err
			}
			clear(seen)
		}
	}
	return b.record(w, ps, results)
}

// propagates reports whether p, once applied, cancels or skips its step's dependents
// (store.PlanRecord: DependentsCancel or DependentsSkip).
func propagates(p *store.StepRecordParams) bool {
	return p.NextState == store.StateFailed || p.NextState == store.StateSkipped
}

// recordSegment is a segment of the records of a batch, and what they change once decided.
type recordSegment struct {
	items   []int          // indexes in the batch, in order
	applied map[int64]bool // steps whose compare-and-set applied

	// What the records decided, written once all of them are (rows of VALUES).
	completes []any
	releases  []any
	released  map[int64]*releaseCount // dependents released, by step ID
	order     []int64                 // the keys of released, in the order first released

	args []any
}

// releaseCount is what the records of a segment do to a step that needs theirs.
type releaseCount struct {
	n      int   // how many released it
	nextAt int64 // the latest time it was released at
	at     int64 // the last time it was released at
}

// record writes the records of the segment and sets their results, then empties it.
func (b *recordSegment) record(w *writeTx, ps []store.StepRecordParams, results []error) error {
	if len(b.items) == 0 {
		return nil
	}
	defer func() { b.items = b.items[:0] }()
	// Every record closes its own attempt row, applied or not.
	b.args = b.args[:0]
	for _, i := range b.items {
		p := &ps[i]
		b.args = append(b.args, p.StepID, p.Attempt, p.Owner, ts(p.Now), string(p.Outcome), p.Error, p.ResponseStatus, p.ResponseExcerpt)
	}
	if err := w.batch(batchAttemptRecord, b.args, nil); err != nil {
		return fmt.Errorf("record attempts: %w", err)
	}
	// The compare-and-set of the steps the transaction knows to be processing; the others
	// have lost their lease.
	b.args = b.args[:0]
	for _, i := range b.items {
		p := &ps[i]
		if ss := w.steps[p.StepID]; ss != nil && ss.state == store.StateProcessing {
			b.args = append(b.args, p.StepID, p.Owner, p.Attempt, string(p.NextState), ts(p.RecordNextAt()), string(p.Outcome),
				p.RecordOutput(), p.Error, p.Reason, ts(p.Now))
		}
	}
	clear(b.applied)
	err := w.batch(batchStepRecord, b.args, func(rows *sql.Rows) error {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		b.applied[id] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("record steps: %w", err)
	}
	// Each record as store.PlanRecord decides, in order.
	for k, i := range b.items {
		p := &ps[i]
		lost := applied
		var err error
		if b.applied[p.StepID] {
			err = b.apply(w, p, k == len(b.items)-1)
		} else {
			lost, err = recordLost(w, p)
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", p.StepID, err)
		}
		results[i] = nil
		switch lost {
		case lostLease:
			results[i] = store.LeaseLostError(p)
		case lostCancelled:
			results[i] = store.CancelledError(p)
		}
	}
	return b.write(w)
}

// Why a record's compare-and-set did not apply.
const (
	applied       = 0
	lostLease     = 1 // another owner or attempt holds the step, or it is no longer processing
	lostCancelled = 2 // the step was cancelled with its run while the attempt ran
)

// apply decides what a record whose compare-and-set applied changes besides the step, as
// store.PlanRecord says, and appends its events. The ledger rows and the dependents it
// releases are written by write; last says it is the last record of the segment, the only
// one that may cancel or skip dependents.
func (b *recordSegment) apply(w *writeTx, p *store.StepRecordParams, last bool) error {
	now := ts(p.Now)
	// The step as the transaction read it: its run, name and key do not change here.
	ss := w.steps[p.StepID]
	rs, err := w.run(ss.runID)
	if err != nil {
		return err
	}
	output := p.RecordOutput()
	ss.set(p.NextState, output)
	st := &store.Step{ID: p.StepID, RunID: ss.runID, Name: ss.name, EffectKey: ss.effectKey, State: p.NextState, Attempt: p.Attempt}
	plan := store.PlanRecord(p, rs.run, st, p.Error)
	switch plan.Effect {
	case store.EffectComplete:
		b.completes = append(b.completes, st.EffectKey, st.ID, output, now, ts(p.RetainUntil))
	case store.EffectRelease:
		b.releases = append(b.releases, st.EffectKey, st.ID)
	}
	w.event(plan.Event)
	switch plan.Dependents {
	case store.DependentsRelease:
		err = b.release(rs, st.Name, now)
	case store.DependentsCancel, store.DependentsSkip:
		if !last {
			return fmt.Errorf("a record that changes its dependents must end its segment (next state %s)", p.NextState)
		}
		// The dependents are found in the table: what the segment decided goes first.
		if err := b.write(w); err != nil {
			return err
		}
		if plan.Dependents == store.DependentsCancel {
			err = w.cancelDependents(rs.run, p.Now)
		} else {
			err = w.skipDependents(rs.run, p.Now)
		}
	}
	if err != nil {
		return err
	}
	return w.refresh(st.RunID, p.Now, p.RecordActor())
}

// release lets the pending steps of rs that need the step called name run once their
// other needs are met, as writeTx.release does; write writes it.
func (b *recordSegment) release(rs *runSteps, name string, now int64) error {
	released, err := rs.dependents(name)
	if err != nil {
		return err
	}
	for _, st := range released {
		c := b.released[st.id]
		if c == nil {
			c = &releaseCount{nextAt: now}
			b.released[st.id] = c
			b.order = append(b.order, st.id)
		}
		c.n++
		c.nextAt, c.at = max(c.nextAt, now), now
		st.waiting--
	}
	return nil
}

// write writes the ledger rows and dependents the segment's records changed so far.
func (b *recordSegment) write(w *writeTx) error {
	if err := w.batch(batchEffectComplete, b.completes, nil); err != nil {
		return fmt.Errorf("complete effects: %w", err)
	}
	b.completes = b.completes[:0]
	if err := w.batch(batchEffectRelease, b.releases, nil); err != nil {
		return fmt.Errorf("release effects: %w", err)
	}
	b.releases = b.releases[:0]
	if len(b.order) == 0 {
		return nil
	}
	b.args = b.args[:0]
	for _, id := range b.order {
		c := b.released[id]
		b.args = append(b.args, id, c.n, c.nextAt, c.at)
	}
	// The copy in memory is exact, so the statement changes every step listed.
	if err := w.batch(batchStepRelease, b.args, nil); err != nil {
		return fmt.Errorf("release dependents: %w", err)
	}
	clear(b.released)
	b.order = b.order[:0]
	return nil
}

// batch runs the statements of kind for the rows in args, each with the smallest size
// that holds them (by chunks of the largest), padding with NULL rows; scan, if not nil,
// reads each row they return.
func (w *writeTx) batch(kind recordBatch, args []any, scan func(*sql.Rows) error) error {
	width := recordBatchWidth[kind]
	for len(args) > 0 {
		rows := len(args) / width
		size := len(batchSizes) - 1
		for i, n := range batchSizes {
			if n >= rows {
				size = i
				break
			}
		}
		n := min(rows, batchSizes[size])
		chunk := args[:n*width]
		args = args[n*width:]
		if pad := (batchSizes[size] - n) * width; pad > 0 {
			w.padded = append(w.padded[:0], chunk...)
			for range pad {
				w.padded = append(w.padded, nil)
			}
			chunk = w.padded
		}
		id := recordBatchStmt(kind, size)
		if scan == nil {
			if _, err := w.exec(id, chunk...); err != nil {
				return err
			}
			continue
		}
		rs, err := w.query(id, chunk...)
		if err != nil {
			return err
		}
		for rs.Next() {
			if err := scan(rs); err != nil {
				rs.Close()
				return err
			}
		}
		if err := rs.Err(); err != nil {
			rs.Close()
			return err
		}
		if err := rs.Close(); err != nil {
			return err
		}
	}
	return nil
}
