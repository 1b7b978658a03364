package sqlite

import (
	"database/sql"
	"time"

	"github.com/onceflow/onceflow/store"
)

// An attempt is written once, when it ends (see migration 0011). While it is in flight its
// claim lives in the step row (claimFacts), durable before the worker acts; the record, the
// reaper or the record of a cancelled step moves it into the attempt row it inserts, with
// the end, in the same transaction.

// claimFacts is the claim of the attempt in flight of a step, as its row holds it.
type claimFacts struct {
	// eventID is the derived step.claimed event's ID; 0 for an attempt claimed before the
	// migration, whose attempt row exists; -1 when no attempt is in flight.
	eventID    int64
	at         int64
	leaseUntil int64
	prev       string
	// runEventID is the derived run.state_changed event that followed the claim (0:
	// none), runChange its change ("from>to").
	runEventID int64
	runChange  string
}

// claimColumns are the claim facts of steps s, as scanClaim reads them.
const claimColumns = `coalesce(s.claim_event_id, -1), s.claimed_at, s.claim_lease_until, s.claim_prev_outcome,
	coalesce(s.claim_run_event_id, 0), s.claim_run_change`

// claimDest returns the scan destinations of claimColumns into c.
func claimDest(c *claimFacts) []any {
	return []any{&c.eventID, &c.at, &c.leaseUntil, &c.prev, &c.runEventID, &c.runChange}
}

// inFlight reports whether the facts are of an attempt in flight that has no attempt row.
func (c *claimFacts) inFlight() bool { return c.eventID > 0 }

// legacy reports whether the attempt in flight was claimed before the migration: its
// attempt row exists and is updated when it ends.
func (c *claimFacts) legacy() bool { return c.eventID == 0 }

// attemptRow is an attempt row to insert, buffered until the transaction's flush.
type attemptRow struct {
	id, runID, stepID int64
	name              string
	number            int
	key, worker       string
	startedAt         int64
	endedAt           int64
	outcome           string
	err               string
	status            int
	excerpt           string
	claim             claimFacts
	// endDerived is set when the end's step.completed event is derived (its ID is id),
	// with the record's reason and actor ("" for the worker).
	endDerived bool
	endReason  store.Reason
	endActor   string
	// endRunEventID is the derived run.state_changed event that followed a derived end.
	endRunEventID int64
	endRunChange  string
}

// attemptInsertArgs is the number of values of one attemptRow.
const attemptInsertArgs = 23

// args appends the row's values in the order of attemptInsertColumns.
func (a *attemptRow) args(out []any) []any {
	claimID, claimRunID, endRunID := nullID(a.claim.eventID), nullID(a.claim.runEventID), nullID(a.endRunEventID)
	if a.claim.eventID <= 0 {
		claimID = nil
	}
	derived := 0
	if a.endDerived {
		derived = 1
	}
	return append(out, a.id, a.runID, a.stepID, a.name, a.number, a.key, a.worker, a.startedAt, a.endedAt, a.outcome, a.err, a.status, a.excerpt,
		claimID, a.claim.leaseUntil, a.claim.prev, claimRunID, a.claim.runChange, derived, a.endReason, a.endActor, endRunID, a.endRunChange)
}

// nullID is id for a nullable ID column: NULL for 0 (and below).
func nullID(id int64) any {
	if id <= 0 {
		return nil
	}
	return id
}

// endAttempt buffers the attempt row of the attempt in flight of step st, which ended at
// at with the outcome of p (a record) or unknown (p nil), under the ID of the first event
// its end appended.
func (w *writeTx) endAttempt(id int64, st *stepStatus, worker string, number int, at time.Time, outcome store.Outcome, errText string, p *store.StepRecordParams) *attemptRow {
	a := &attemptRow{id: id, runID: st.runID, stepID: st.id, name: st.name, number: number, key: st.effectKey, worker: worker,
		startedAt: st.claim.at, endedAt: ts(at), outcome: string(outcome), err: errText, claim: st.claim}
	if p != nil {
		a.status, a.excerpt = p.ResponseStatus, p.ResponseExcerpt
	}
	w.attempts = append(w.attempts, a)
	return a
}

// bufferedAttempt returns the attempt row of (step, number, worker) that the transaction
// inserts, or nil.
func (w *writeTx) bufferedAttempt(stepID int64, number int, worker string) *attemptRow {
	for _, a := range w.attempts {
		if a.stepID == stepID && a.number == number && a.worker == worker {
			return a
		}
	}
	return nil
}

// scanNullID converts a nullable ID column.
func scanNullID(v sql.NullInt64) int64 {
	if !v.Valid {
		return 0
	}
	return v.Int64
}
