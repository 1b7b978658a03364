package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/store"
)

// writeTx is one transaction of the write path (starts, claims, records, reaps, review
// actions). It binds the prepared statements to the transaction, buffers the audit events
// appended in it and writes them with multi-row inserts before the commit (in the order
// they were appended, so their IDs follow that order), and keeps the steps of the runs it
// touches in memory, so that a run's state is re-derived after each item without reading
// the run's steps again and is written once, before the commit.
//
// The copy in memory is exact because the transaction holds SQLite's write lock from its
// first statement (BEGIN IMMEDIATE) and every change to the state or waiting count of a
// step whose run it read goes through writeTx, which applies it to the copy too. Code that
// changes steps with its own SQL (the review actions) does so before the transaction
// first reads the run, and drops the writer's cache (writecache.go), which carries the
// copy of the claims and records on to the next transaction.
type writeTx struct {
	// ctx carries the caller's values but not its cancellation: a cancelled call rolls the
	// transaction back (database/sql watches the context given to BeginTx), and statements
	// without a deadline skip the driver's per-statement interrupt watcher.
	ctx  context.Context
	tx   dbtx
	prep *statements

	events []*store.Event
	// origin, when set, is stamped on every event (store.Origin).
	origin   *store.Origin
	stepRows []any         // buffered rows of stepInsertArgs values
	attempts []*attemptRow // buffered attempt rows
	runs     map[int64]*runSteps
	steps    map[int64]*stepStatus // the steps of runs, by ID
	dirty    []*runSteps           // runs whose state changed and is not written yet
	// counts are the changes of run_counts the transaction has not written yet: the runs it
	// inserted, and those whose written state it changed (flush).
	counts  map[runCount]int
	scratch []byte // flush's buffer
	// releases are the releases of steps (release) not written yet, releaseAt their index
	// by step ID.
	releases  []pendingRelease
	releaseAt map[int64]int
	used      []*runSteps // runs the transaction used, for the cache it leaves (writecache.go)
	// outputs is set in the transactions of claims and records (WriteBatch, StepRecord):
	// every run they read is read with the outputs of its completed steps, which a claim
	// needs and the writer's cache keeps.
	outputs bool

	// The audit sequence (auditseq.go): the store's counter, its value as this
	// transaction drew from it, the data_version it was read at, and the span drawn.
	seq        *auditSeq
	seqLoaded  bool
	seqLast    int64
	seqVersion int64
	span       span
}

// runSteps is what a writeTx knows of a run: the run and the status of each of its steps.
type runSteps struct {
	run *store.Run // ID, Workflow, Entity and State (the state derived last)
	// stored is the state the run's row holds, as the transaction wrote it or read it.
	stored store.State
	// changed is set when State changed since the last flush; updatedAt is then when.
	changed   bool
	updatedAt int64
	steps     []*stepStatus
	scratch   []store.StepStatus
	// outputs: the steps were read with the outputs of the completed ones. used: the
	// transaction under way used the run (writeTx.use).
	outputs bool
	used    bool
}

// stepStatus is the part of a step that decides its run's state and its dependents.
type stepStatus struct {
	id        int64
	runID     int64
	name      string
	effectKey string
	needs     string // JSON array, parsed by needsOf
	parsed    []string
	isParsed  bool
	state     store.State
	waiting   int
	delayed   bool            // pending, waiting for its due time
	output    json.RawMessage // completed steps, when loaded with outputs
	// The facts of a step a record or a claim of it needs (hasFacts: loaded): its latest
	// attempt and its lease owner, the claim of the attempt in flight, and what it holds of
	// the ledger.
	hasFacts bool
	attempt  int
	owner    string
	claim    claimFacts
	key      keyFacts
}

// factsDest returns the scan destinations of factColumns into st.
func (st *stepStatus) factsDest() []any {
	return append(append([]any{&st.attempt, &st.owner}, claimDest(&st.claim)...), keyDest(&st.key)...)
}

// loadFacts reads the facts of the steps ids that the transaction knows without them.
func (w *writeTx) loadFacts(ids []int64) error {
	var load []int64
	for _, id := range ids {
		if st := w.steps[id]; st != nil && !st.hasFacts {
			load = append(load, id)
		}
	}
	if len(load) == 0 {
		return nil
	}
	rows, err := w.query(stmtStepFacts, idList(load))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var f stepStatus
		if err := rows.Scan(append([]any{&id}, f.factsDest()...)...); err != nil {
			return err
		}
		if st := w.steps[id]; st != nil {
			st.attempt, st.owner, st.claim, st.key, st.hasFacts = f.attempt, f.owner, f.claim, f.key, true
		}
	}
	return rows.Err()
}

// write runs fn in one write transaction with a writeTx, flushes what it buffered, writes
// the transaction's audit span and commits. Every write that appends audit events goes
// through it, so that their IDs come from the audit sequence. It drops the writer's cache:
// writeAs says when a write may keep or share it.
func (s *Store) write(ctx context.Context, op string, fn func(w *writeTx) error) error {
	return s.writeAs(ctx, op, cacheDrop, fn)
}

// writeAs is write, with the writer's cache used as use says.
func (s *Store) writeAs(ctx context.Context, op string, use cacheUse, fn func(w *writeTx) error) error {
	var w *writeTx
	return s.writeConn(ctx, op, func(c *sql.Conn) error {
		w = &writeTx{ctx: context.WithoutCancel(ctx), tx: c, prep: s.prep, runs: map[int64]*runSteps{}, steps: map[int64]*stepStatus{}, seq: &s.seq}
		if o, ok := store.OriginFrom(ctx); ok {
			w.origin = &o
		}
		if err := w.loadSeq(); err != nil {
			return err
		}
		switch use {
		case cacheDrop:
			s.cache = nil
		case cacheShare:
			w.adopt(s)
		}
		if err := fn(w); err != nil {
			return err
		}
		return w.finish()
	}, func(ok bool) {
		w.committed(ok)
		if use == cacheShare && ok {
			s.cache = w.leave()
		}
	})
}

// finish flushes what the transaction buffered and writes its audit span.
func (w *writeTx) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.checkRunCounts(); err != nil {
		return err
	}
	if w.span.first == 0 {
		return nil
	}
	if _, err := w.exec(stmtSpanInsert, w.span.first, w.span.last, w.span.minAt, w.span.maxAt); err != nil {
		return fmt.Errorf("audit span: %w", err)
	}
	return nil
}

// stmt returns prepared statement id, prepared on the write connection.
func (w *writeTx) stmt(id stmtID) *sql.Stmt { return w.prep[id] }

// before writes the releases not written yet unless statement id may run before them.
func (w *writeTx) before(id stmtID) error {
	if len(w.releases) == 0 || keepsReleases[id] {
		return nil
	}
	return w.writeReleases()
}

func (w *writeTx) exec(id stmtID, args ...any) (sql.Result, error) {
	if err := w.before(id); err != nil {
		return nil, err
	}
	return w.stmt(id).ExecContext(w.ctx, args...)
}

// execN runs statement id and returns how many rows it changed.
func (w *writeTx) execN(id stmtID, args ...any) (int64, error) {
	r, err := w.exec(id, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (w *writeTx) query(id stmtID, args ...any) (*sql.Rows, error) {
	if err := w.before(id); err != nil {
		return nil, err
	}
	return w.stmt(id).QueryContext(w.ctx, args...)
}

func (w *writeTx) queryRow(id stmtID, args ...any) scanner {
	if err := w.before(id); err != nil {
		return failedRow{err}
	}
	return w.stmt(id).QueryRowContext(w.ctx, args...)
}

// failedRow is the row of a query that could not be sent: its Scan returns why.
type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }

// event appends an audit event to the transaction: it takes the next ID of the audit
// sequence and is written by flush.
func (w *writeTx) event(e *store.Event) {
	if w.origin != nil {
		w.origin.Stamp(e)
	}
	e.ID = w.nextEventID(e.At)
	w.events = append(w.events, e)
}

// insertStep buffers a new step's row.
func (w *writeTx) insertStep(runID int64, workflow, name, needs string, waiting int, now int64) {
	w.stepRows = append(w.stepRows, runID, workflow, name, needs, waiting, now, now, now)
}

// flush writes the buffered steps and attempts, the run states that changed and the buffered events.
func (w *writeTx) flush() error {
	if err := w.flushSteps(); err != nil {
		return err
	}
	if len(w.attempts) > 0 {
		args := make([]any, 0, len(w.attempts)*attemptInsertArgs)
		for _, a := range w.attempts {
			args = a.args(args)
		}
		if err := w.bulk(stmtAttemptsBulk, attemptInsertArgs, args); err != nil {
			return fmt.Errorf("insert attempts: %w", err)
		}
		w.attempts = w.attempts[:0]
	}
	if len(w.dirty) > 0 {
		// One statement for every run whose state changed: [[id, "state", updated_at], …].
		rows := w.jsonRows(len(w.dirty), func(b []byte, i int) []byte {
			rs := w.dirty[i]
			b = strconv.AppendInt(b, rs.run.ID, 10)
			return strconv.AppendInt(append(append(append(b, `,"`...), rs.run.State...), `",`...), rs.updatedAt, 10)
		})
		for _, rs := range w.dirty {
			rs.changed = false
			if rs.run.State != rs.stored {
				w.count(rs.run.Workflow, rs.stored, -1)
				w.count(rs.run.Workflow, rs.run.State, 1)
				rs.stored = rs.run.State
			}
		}
		if _, err := w.exec(stmtRunStatesSet, rows); err != nil {
			return fmt.Errorf("run states: %w", err)
		}
		w.dirty = w.dirty[:0]
	}
	if err := w.flushCounts(); err != nil {
		return err
	}
	if len(w.events) == 0 {
		return nil
	}
	args := make([]any, 0, len(w.events)*eventArgs)
	for _, e := range w.events {
		d := string(e.Detail)
		if d == "" {
			d = `{}`
		}
		args = append(args, e.ID, ts(e.At), e.Type, e.RunID, e.StepID, e.Workflow, e.Entity, e.StepName, e.EffectKey, e.Attempt, e.Actor, e.Reason, d)
	}
	if err := w.bulk(stmtEventsBulk, eventArgs, args); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	w.events = w.events[:0]
	return nil
}

// jsonRows returns the JSON array of n rows that a json_each statement takes, each row
// the array whose elements row appends to b, built in w.scratch.
func (w *writeTx) jsonRows(n int, row func(b []byte, i int) []byte) string {
	b := append(w.scratch[:0], '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(row(append(b, '['), i), ']')
	}
	w.scratch = append(b, ']')
	return string(w.scratch)
}

// runCount is a row of run_counts: the runs of a workflow in a state.
type runCount struct {
	workflow string
	state    store.State
}

// count notes that n runs of workflow joined state (or left it, n < 0).
func (w *writeTx) count(workflow string, state store.State, n int) {
	if w.counts == nil {
		w.counts = map[runCount]int{}
	}
	w.counts[runCount{workflow, state}] += n
}

// flushCounts writes the changes of run_counts the transaction made, in one statement.
// The writer keeps run_counts as it inserts runs and writes their states (a trigger per
// row cost more than the run's own update); deleting a run decrements it by trigger.
func (w *writeTx) flushCounts() error {
	var rows [][3]any
	for k, n := range w.counts {
		if n != 0 {
			rows = append(rows, [3]any{k.workflow, string(k.state), n})
		}
	}
	clear(w.counts)
	if len(rows) == 0 {
		return nil
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	if _, err := w.exec(stmtRunCountsAdd, string(b)); err != nil {
		return fmt.Errorf("run counts: %w", err)
	}
	return nil
}

// flushSteps writes what the transaction buffered of the steps table: the new runs'
// steps and the releases. A query of steps that follows sees every step as the
// transaction changed it; the runs' states, the attempts and the events wait for flush.
func (w *writeTx) flushSteps() error {
	if err := w.writeReleases(); err != nil {
		return err
	}
	if err := w.bulk(stmtStepsBulk, stepInsertArgs, w.stepRows); err != nil {
		return fmt.Errorf("insert steps: %w", err)
	}
	w.stepRows = w.stepRows[:0]
	return nil
}

// bulk writes the rows in args (n values each) with the multi-row statements that start at
// first, one per size of bulkSizes.
func (w *writeTx) bulk(first stmtID, n int, args []any) error {
	rows := len(args) / n
	for rows > 0 {
		for i, size := range bulkSizes {
			if size > rows {
				continue
			}
			if _, err := w.exec(first+stmtID(i), args[:size*n]...); err != nil {
				return err
			}
			args, rows = args[size*n:], rows-size
			break
		}
	}
	return nil
}

// idList encodes IDs as the JSON array the json_each statements take.
func idList(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// loadRuns reads the runs that query q (stmtRunsByIDs or stmtRunsOfSteps) returns for ids,
// and their steps, unless the transaction knows them already.
func (w *writeTx) loadRuns(q stmtID, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := w.query(q, idList(ids))
	if err != nil {
		return err
	}
	var runs []*store.Run
	for rows.Next() {
		r := &store.Run{}
		var state string
		if err := rows.Scan(&r.ID, &r.Workflow, &r.Entity, &state); err != nil {
			rows.Close()
			return err
		}
		r.State = store.State(state)
		runs = append(runs, r)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	return w.addRuns(runs, w.outputs)
}

// addRuns adds runs the caller read in this transaction (ID, Workflow, Entity and State
// are kept) and reads their steps' statuses, with the outputs of completed steps if
// outputs, unless the transaction knows them already. Claims ask for the outputs first
// thing in StepClaim's transaction; WriteBatch and StepRecord set w.outputs before they
// read any run, so a run is never known without outputs a claim needs (the writer's
// cache keeps only runs read with them).
func (w *writeTx) addRuns(runs []*store.Run, outputs bool) error {
	var load []int64
	for _, r := range runs {
		if rs := w.runs[r.ID]; rs != nil {
			w.use(rs)
			continue
		}
		rs := &runSteps{run: &store.Run{ID: r.ID, Workflow: r.Workflow, Entity: r.Entity, State: r.State}, stored: r.State, outputs: outputs}
		w.runs[r.ID] = rs
		w.use(rs)
		load = append(load, r.ID)
	}
	if len(load) == 0 {
		return nil
	}
	q := stmtStepsOfRuns
	if outputs {
		q = stmtStepsOfRunsWithOutputs
	}
	rows, err := w.query(q, idList(load))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		st := &stepStatus{}
		var state string
		var output []byte
		if err := rows.Scan(&st.id, &st.runID, &st.name, &st.needs, &state, &st.waiting, &st.effectKey, &output, &st.delayed); err != nil {
			return err
		}
		st.state = store.State(state)
		if st.state == store.StateCompleted && output != nil {
			st.output = json.RawMessage(output)
		}
		w.runs[st.runID].steps = append(w.runs[st.runID].steps, st)
		w.steps[st.id] = st
	}
	return rows.Err()
}

// run returns what the transaction knows of a run, reading it first if needed.
func (w *writeTx) run(id int64) (*runSteps, error) {
	if rs := w.runs[id]; rs != nil {
		w.use(rs)
		return rs, nil
	}
	if err := w.loadRuns(stmtRunsByIDs, []int64{id}); err != nil {
		return nil, err
	}
	rs := w.runs[id]
	if rs == nil {
		return nil, fmt.Errorf("run %d: %w", id, store.ErrNotFound)
	}
	return rs, nil
}

// needsOf returns the names st needs.
func (st *stepStatus) needsOf() ([]string, error) {
	if !st.isParsed {
		if err := json.Unmarshal([]byte(st.needs), &st.parsed); err != nil {
			return nil, fmt.Errorf("step %d: needs: %w", st.id, err)
		}
		st.isParsed = true
	}
	return st.parsed, nil
}

// outputsOf returns a new map of the outputs of the run's completed steps by name.
func (rs *runSteps) outputsOf() map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(rs.steps))
	for _, st := range rs.steps {
		if st.state == store.StateCompleted {
			out[st.name] = st.output
		}
	}
	return out
}

// setStep records in memory that step id of run runID is now in state (with output, for
// a completed step).
func (w *writeTx) setStep(runID, id int64, state store.State, output json.RawMessage) error {
	if _, err := w.run(runID); err != nil {
		return err
	}
	if st := w.steps[id]; st != nil {
		st.set(state, output)
	}
	return nil
}

// set records in memory that st is now in state (with output, for a completed step).
func (st *stepStatus) set(state store.State, output json.RawMessage) {
	st.state = state
	if state == store.StateCompleted {
		st.output = output
	}
}

// refresh re-derives a run's state from its steps after one item, and appends a
// run.state_changed event when it changed. The state is written by flush.
func (w *writeTx) refresh(runID int64, at time.Time, actor string) error {
	rs, next, changed, err := w.runChange(runID)
	if err != nil || !changed {
		return err
	}
	w.event(store.RunStateEvent(at, rs.run.ID, rs.run.Workflow, rs.run.Entity, actor, rs.run.State, next))
	w.applyRunChange(rs, next, at)
	return nil
}

// runChange derives a run's state from its steps as the transaction knows them, and says
// whether it differs from the state derived last; nothing is applied.
func (w *writeTx) runChange(runID int64) (rs *runSteps, next store.State, changed bool, err error) {
	rs, err = w.run(runID)
	if err != nil {
		return nil, "", false, err
	}
	rs.scratch = rs.scratch[:0]
	for _, st := range rs.steps {
		rs.scratch = append(rs.scratch, store.StepStatus{State: st.state, Waiting: st.waiting, Delayed: st.delayed})
	}
	next = store.DeriveRunState(rs.scratch)
	return rs, next, next != rs.run.State, nil
}

// applyRunChange notes that run rs is in state next since at; flush writes it.
func (w *writeTx) applyRunChange(rs *runSteps, next store.State, at time.Time) {
	rs.run.State, rs.updatedAt = next, ts(at)
	if !rs.changed {
		rs.changed = true
		w.dirty = append(w.dirty, rs)
	}
}

// reserve draws the next ID of the audit sequence for an event at at that is derived,
// not stored: the caller writes it into the row that holds the event's facts.
func (w *writeTx) reserve(at time.Time) int64 { return w.nextEventID(at) }

// eventAs appends a stored event under an ID reserved for it.
func (w *writeTx) eventAs(e *store.Event, id int64) {
	if w.origin != nil {
		w.origin.Stamp(e)
	}
	e.ID = id
	w.events = append(w.events, e)
}

// release lets the pending steps of a run that need the step called name run once their
// other needs are met, with one statement for all of them.
func (w *writeTx) release(runID int64, name string, now int64) error {
	rs, err := w.run(runID)
	if err != nil {
		return err
	}
	var released []*stepStatus
	for _, st := range rs.steps {
		if st.state != store.StatePending || st.waiting <= 0 {
			continue
		}
		needs, err := st.needsOf()
		if err != nil {
			return err
		}
		if slices.Contains(needs, name) {
			released = append(released, st)
		}
	}
	if len(released) == 0 {
		return nil
	}
	// The copy in memory is exact, so the statement that writes the releases changes every
	// step picked. It is sent once for all the releases of the transaction, before any
	// statement that may read or change a released step (keepsReleases), and by flush.
	for _, st := range released {
		st.waiting--
		if w.releaseAt == nil {
			w.releaseAt = map[int64]int{}
		}
		i, ok := w.releaseAt[st.id]
		if !ok {
			i = len(w.releases)
			w.releaseAt[st.id] = i
			w.releases = append(w.releases, pendingRelease{id: st.id})
		}
		r := &w.releases[i]
		r.n++
		r.maxAt, r.lastAt = max(r.maxAt, now), now
	}
	return nil
}

// pendingRelease is a step's releases that the transaction has not written yet: how many,
// the latest time among them (its next_at does not go back) and the last one's time.
type pendingRelease struct {
	id, maxAt, lastAt int64
	n                 int
}

// writeReleases writes the releases the transaction made and has not written yet.
func (w *writeTx) writeReleases() error {
	if len(w.releases) == 0 {
		return nil
	}
	rows := w.jsonRows(len(w.releases), func(b []byte, i int) []byte {
		r := w.releases[i]
		b = strconv.AppendInt(b, r.id, 10)
		b = strconv.AppendInt(append(b, ','), int64(r.n), 10)
		b = strconv.AppendInt(append(b, ','), r.maxAt, 10)
		return strconv.AppendInt(append(b, ','), r.lastAt, 10)
	})
	w.releases = w.releases[:0]
	clear(w.releaseAt)
	if _, err := w.stmt(stmtStepRelease).ExecContext(w.ctx, rows); err != nil {
		return fmt.Errorf("release steps: %w", err)
	}
	return nil
}

// cancelDependents cancels, transitively, the pending steps that need a failed or
// cancelled step.
func (w *writeTx) cancelDependents(run *store.Run, at time.Time) error {
	return w.propagate(run, at, stmtStepCancelDependents, store.StateCancelled, store.ReasonDependencyFailed, store.EventStepCancelled,
		store.StateFailed, store.StateCancelled)
}

// skipDependents skips, transitively, the pending steps that need a skipped step.
func (w *writeTx) skipDependents(run *store.Run, at time.Time) error {
	return w.propagate(run, at, stmtStepSkipDependents, store.StateSkipped, store.ReasonDependencySkipped, store.EventStepSkipped,
		store.StateSkipped)
}

// propagate moves, transitively, the pending steps of run that need a step in one of the
// states causes to state, appending an event for each. It asks the database only when a
// pending step needs such a step.
func (w *writeTx) propagate(run *store.Run, at time.Time, q stmtID, state store.State, reason store.Reason, event store.EventType, causes ...store.State) error {
	rs, err := w.run(run.ID)
	if err != nil {
		return err
	}
	for {
		// The copy in memory is exact, so it says when no pending step is left to move.
		if ok, err := rs.anyPendingNeeds(causes); err != nil || !ok {
			return err
		}
		rows, err := w.query(q, string(state), reason, ts(at), run.ID)
		if err != nil {
			return err
		}
		var moved []*store.Step
		for rows.Next() {
			st := &store.Step{}
			if err := rows.Scan(&st.ID, &st.Name, &st.Attempt); err != nil {
				rows.Close()
				return err
			}
			moved = append(moved, st)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if len(moved) == 0 {
			return nil
		}
		for _, st := range moved {
			if s := w.steps[st.ID]; s != nil {
				s.state = state
			}
			w.event(store.StepEvent(event, at, run, st, store.ActorEngine, reason, nil))
		}
	}
}

// anyPendingNeeds reports whether a pending step of the run needs a step in one of the
// states causes.
func (rs *runSteps) anyPendingNeeds(causes []store.State) (bool, error) {
	for _, st := range rs.steps {
		if st.state != store.StatePending || st.needs == "[]" {
			continue
		}
		needs, err := st.needsOf()
		if err != nil {
			return false, err
		}
		for _, n := range needs {
			for _, d := range rs.steps {
				if d.name == n && slices.Contains(causes, d.state) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
