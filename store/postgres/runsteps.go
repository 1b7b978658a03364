package postgres

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// runSet is what a transaction of the write path (a claim, a record, a reap) knows of the
// runs whose steps its items change: each run as the transaction locked it and, for each of
// its steps, what decides the run's state and the step's dependents. It lets the
// transaction apply its items one after the other, as the same items one per call would:
// after each item the item's own change and its propagation to the steps that need its step
// (release, cancel, skip) are applied to the copy in memory, the run's state is re-derived
// from it, and a run.state_changed event is appended right after the item's events when the
// state changed. What the items did to the dependents and the runs' final states are written
// once, in the flush that ends the transaction (queueWrites).
//
// The copy is exact because it is read after the runs are locked, and every transaction
// that changes the state or waiting count of a step locks the step's run before it commits
// (a record's or a reap's own step may be updated before, but it is then processing, and no
// other transaction changes it until it commits).
type runSet struct {
	byID  map[int64]*runSteps
	order []*runSteps // in the order added
}

// runSteps is what a runSet knows of one run.
type runSteps struct {
	// run holds the run's ID, Workflow and Entity, and its State as derived last (as locked
	// until the first change).
	run store.Run
	// changed is set when the state changed in the transaction; at is when it last did.
	changed bool
	at      time.Time
	steps   []*stepStatus // in ID order
	byName  map[string]*stepStatus
	scratch []store.StepStatus
}

// stepStatus is the part of a step that decides its run's state and its dependents, and
// what the transaction does to the step as a dependent of another.
type stepStatus struct {
	id      int64
	name    string
	needs   []string
	state   store.State
	waiting int
	attempt int
	// delayed is set for a pending step waiting for its due time (reason delayed).
	delayed bool
	// output is the output of a completed step, when read with the outputs.
	output json.RawMessage

	// released counts the releases the transaction applied; releaseAt is the latest one's
	// time, releaseMax the greatest (next_at does not go back).
	released              int
	releaseAt, releaseMax time.Time
	// moved is the reason of the cancel or skip the transaction applied (state is then the
	// new state); movedAt is its time.
	moved   string
	movedAt time.Time
}

// add notes a run the transaction locked (r as read under the lock). A run added twice
// keeps what was known of it first.
func (rs *runSet) add(r *store.Run) {
	if rs.byID == nil {
		rs.byID = map[int64]*runSteps{}
	}
	if rs.byID[r.ID] != nil {
		return
	}
	x := &runSteps{run: store.Run{ID: r.ID, Workflow: r.Workflow, Entity: r.Entity, State: r.State}, byName: map[string]*stepStatus{}}
	rs.byID[r.ID] = x
	rs.order = append(rs.order, x)
}

// ids returns the IDs of the runs, in the order added.
func (rs *runSet) ids() []int64 {
	ids := make([]int64, len(rs.order))
	for i, r := range rs.order {
		ids[i] = r.run.ID
	}
	return ids
}

// stepStatusColumns are the columns of steps that load reads, before the output.
const stepStatusColumns = `id, run_id, name, needs, state, waiting, attempt, reason = 'delayed'`

// stepStatusSQL reads the steps of the runs $1, with the outputs of the completed ones.
// Send it after the runs are locked, so that it sees every change committed to their steps.
const stepStatusSQL = `SELECT ` + stepStatusColumns + `, CASE WHEN state = 'completed' THEN output END
	FROM steps WHERE run_id = ANY($1)`

// queueLoad adds to b the query that reads the runs' steps; load reads its result.
func (rs *runSet) queueLoad(b *pgx.Batch) {
	b.Queue(stepStatusSQL, rs.ids())
}

// load reads the result of queueLoad into the runs' copies.
func (rs *runSet) load(rows pgx.Rows) error {
	var id, runID int64
	var name, state string
	var needs []string
	var waiting, attempt int
	var delayed bool
	var output []byte
	_, err := pgx.ForEachRow(rows, []any{&id, &runID, &name, &needs, &state, &waiting, &attempt, &delayed, &output}, func() error {
		r := rs.byID[runID]
		if r == nil {
			return nil
		}
		st := &stepStatus{id: id, name: name, needs: needs, state: store.State(state), waiting: waiting, attempt: attempt, delayed: delayed}
		if output != nil {
			st.output = json.RawMessage(slices.Clone(output))
		}
		needs = nil
		r.steps = append(r.steps, st)
		r.byName[name] = st
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range rs.order {
		slices.SortFunc(r.steps, func(a, b *stepStatus) int { return cmp.Compare(a.id, b.id) })
	}
	return nil
}

// outputs returns a new map of the outputs of run runID's completed steps by name.
func (rs *runSet) outputs(runID int64) map[string]json.RawMessage {
	r := rs.byID[runID]
	out := map[string]json.RawMessage{}
	if r == nil {
		return out
	}
	for _, st := range r.steps {
		if st.state == store.StateCompleted {
			out[st.name] = st.output
		}
	}
	return out
}

// step returns step id of run runID, or nil.
func (rs *runSet) step(runID, id int64) *stepStatus {
	r := rs.byID[runID]
	if r == nil {
		return nil
	}
	for _, st := range r.steps {
		if st.id == id {
			return st
		}
	}
	return nil
}

// set notes that an item moved step id of run runID to state.
func (rs *runSet) set(runID, id int64, state store.State) {
	if st := rs.step(runID, id); st != nil {
		st.state = state
	}
}

// release lets the pending steps of run runID that need the step called name run once
// their other needs are met, at at, and returns how many became due.
func (rs *runSet) release(runID int64, name string, at time.Time) int {
	r := rs.byID[runID]
	if r == nil {
		return 0
	}
	due := 0
	for _, st := range r.steps {
		if st.state != store.StatePending || st.waiting <= 0 || !slices.Contains(st.needs, name) {
			continue
		}
		st.waiting--
		if st.released == 0 || at.After(st.releaseMax) {
			st.releaseMax = at
		}
		st.released++
		st.releaseAt = at
		if st.waiting == 0 {
			due++
		}
	}
	return due
}

// cancelDependents cancels, transitively, the pending steps of run runID that need a failed
// or cancelled step, appending an event for each.
func (rs *runSet) cancelDependents(t *txn, runID int64, at time.Time) {
	rs.propagate(t, runID, at, store.StateCancelled, store.ReasonDependencyFailed, store.EventStepCancelled,
		store.StateFailed, store.StateCancelled)
}

// skipDependents skips, transitively, the pending steps of run runID that need a skipped
// step, appending an event for each.
func (rs *runSet) skipDependents(t *txn, runID int64, at time.Time) {
	rs.propagate(t, runID, at, store.StateSkipped, store.ReasonDependencySkipped, store.EventStepSkipped, store.StateSkipped)
}

// propagate moves, level by level, the pending steps of run runID that need a step in one
// of the states causes to state, appending an event for each in ID order within a level, as
// one UPDATE per level would.
func (rs *runSet) propagate(t *txn, runID int64, at time.Time, state store.State, reason store.Reason, event store.EventType, causes ...store.State) {
	r := rs.byID[runID]
	if r == nil {
		return
	}
	var moved []*stepStatus
	for {
		moved = moved[:0]
		for _, st := range r.steps {
			if st.state != store.StatePending {
				continue
			}
			for _, n := range st.needs {
				if d := r.byName[n]; d != nil && slices.Contains(causes, d.state) {
					moved = append(moved, st)
					break
				}
			}
		}
		if len(moved) == 0 {
			return
		}
		for _, st := range moved {
			st.state, st.moved, st.movedAt = state, string(reason), at
			// Only ID, Name and Attempt are set, as the events always had.
			t.event(store.StepEvent(event, at, &r.run, &store.Step{ID: st.id, Name: st.name, Attempt: st.attempt}, store.ActorEngine, reason, nil))
		}
	}
}

// refresh re-derives the state of run runID from its steps after one item, made at at by
// actor, and appends a run.state_changed event when it changed. The state is written by
// queueWrites.
func (rs *runSet) refresh(t *txn, runID int64, at time.Time, actor string) {
	r, next, changed := rs.change(runID)
	if !changed {
		return
	}
	t.event(store.RunStateEvent(at, r.run.ID, r.run.Workflow, r.run.Entity, actor, r.run.State, next))
	rs.apply(r, next, at)
}

// change derives the state of run runID from its steps as the transaction knows them and
// says whether it differs from the state derived last; nothing is applied.
func (rs *runSet) change(runID int64) (r *runSteps, next store.State, changed bool) {
	r = rs.byID[runID]
	if r == nil {
		return nil, "", false
	}
	r.scratch = r.scratch[:0]
	for _, st := range r.steps {
		r.scratch = append(r.scratch, store.StepStatus{State: st.state, Waiting: st.waiting, Delayed: st.delayed})
	}
	next = store.DeriveRunState(r.scratch)
	return r, next, next != r.run.State
}

// apply notes that run r is in state next since at; queueWrites writes it.
func (rs *runSet) apply(r *runSteps, next store.State, at time.Time) {
	r.run.State, r.changed, r.at = next, true, at
}

// queueWrites queues, for the flush that ends the transaction, what the items did to the
// steps that need theirs (releases, then cancels and skips) and the states of the runs that
// changed. The runs are locked already; a dependent is only changed while still pending, as
// the statements that decided it in memory required.
func (rs *runSet) queueWrites(t *txn) {
	runs := slices.Clone(rs.order)
	slices.SortFunc(runs, func(a, b *runSteps) int { return cmp.Compare(a.run.ID, b.run.ID) })
	var relID []int64
	var relN []int32
	var relAt, relMax []time.Time
	var movID []int64
	var movState, movReason []string
	var movAt []time.Time
	var runID []int64
	var runState []string
	var runAt []time.Time
	for _, r := range runs {
		for _, st := range r.steps {
			if st.released > 0 {
				relID, relN = append(relID, st.id), append(relN, int32(st.released))
				relAt, relMax = append(relAt, st.releaseAt), append(relMax, st.releaseMax)
			}
			if st.moved != "" {
				movID, movState = append(movID, st.id), append(movState, string(st.state))
				movReason, movAt = append(movReason, st.moved), append(movAt, st.movedAt)
			}
		}
		if r.changed {
			runID, runState, runAt = append(runID, r.run.ID), append(runState, string(r.run.State)), append(runAt, r.at)
		}
	}
	if len(relID) > 0 {
		t.queue(`UPDATE steps s SET waiting = greatest(s.waiting - u.n, 0), next_at = greatest(s.next_at, u.next_at), updated_at = u.at
			FROM unnest($1::bigint[], $2::int4[], $3::timestamptz[], $4::timestamptz[]) AS u(id, n, at, next_at)
			WHERE s.id = u.id AND s.state = 'pending' AND s.waiting > 0`, relID, relN, relAt, relMax)
	}
	if len(movID) > 0 {
		t.queue(`UPDATE steps s SET state = u.state, reason = u.reason, updated_at = u.at
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) AS u(id, state, reason, at)
			WHERE s.id = u.id AND s.state = 'pending'`, movID, movState, movReason, movAt)
	}
	if len(runID) > 0 {
		t.queue(`UPDATE runs r SET state = u.state, updated_at = u.at FROM unnest($1::bigint[], $2::text[], $3::timestamptz[]) AS u(id, state, at)
			WHERE r.id = u.id`, runID, runState, runAt)
	}
}
