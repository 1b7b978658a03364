package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

// An attempt is written once, when it ends (see migration 0013). While it is in flight its
// claim lives in the step row (claimFacts), durable before the worker acts; the record, the
// reaper or the record of a cancelled step moves it into the attempt row the flush
// inserts, with the end, in the same transaction.

// claimFacts is the claim of the attempt in flight of a step, as its row holds it.
type claimFacts struct {
	// eventID is the derived step.claimed event's ID; 0 for an attempt claimed before the
	// migration, whose attempt row exists; -1 when no attempt is in flight.
	eventID    int64
	at         time.Time
	leaseUntil time.Time
	prev       string
	// runEventID is the derived run.state_changed event that followed the claim (0:
	// none), runChange its change ("from>to").
	runEventID int64
	runChange  string
}

// claimColumns are the claim facts of steps s, as claimDest reads them.
const claimColumns = `coalesce(s.claim_event_id, -1), s.claimed_at, s.claim_lease_until, s.claim_prev_outcome,
	coalesce(s.claim_run_event_id, 0), s.claim_run_change`

// claimScan holds the scan destinations of claimColumns.
type claimScan struct {
	c          claimFacts
	at, leased pgtype.Timestamptz
}

// dest returns the destinations; facts converts after the scan.
func (cs *claimScan) dest() []any {
	return []any{&cs.c.eventID, &cs.at, &cs.leased, &cs.c.prev, &cs.c.runEventID, &cs.c.runChange}
}

func (cs *claimScan) facts() claimFacts {
	c := cs.c
	c.at, c.leaseUntil = fromTS(cs.at), fromTS(cs.leased)
	return c
}

// inFlight reports whether the facts are of an attempt in flight that has no attempt row.
func (c *claimFacts) inFlight() bool { return c.eventID > 0 }

// legacy reports whether the attempt in flight was claimed before the migration: its
// attempt row exists and is updated when it ends.
func (c *claimFacts) legacy() bool { return c.eventID == 0 }

// attemptRow is an attempt row the flush inserts. Its ID is the ID of the first event its
// end appended (end), and endRun is the derived run.state_changed that followed a derived
// end.
type attemptRow struct {
	runID, stepID int64
	name          string
	number        int
	key, worker   string
	ended         time.Time
	outcome       string
	err           string
	status        int
	excerpt       string
	// request is what the attempt sent (store.Attempt.Request).
	request      string
	claim        claimFacts
	end          *txEvent
	endDerived   bool
	endReason    string
	endActor     string
	endRun       *txEvent
	endRunChange string
}

// endAttempt buffers the attempt row of an attempt in flight, claimed as claim, of step
// (runID, stepID, name, key) by worker, that ended at at with outcome.
func (t *txn) endAttempt(end *txEvent, runID, stepID int64, name, key, worker string, number int, claim claimFacts, at time.Time,
	outcome store.Outcome, errText string, p *store.StepRecordParams) *attemptRow {
	a := &attemptRow{runID: runID, stepID: stepID, name: name, number: number, key: key, worker: worker, ended: at, outcome: string(outcome),
		err: errText, claim: claim, end: end}
	if p != nil {
		a.status, a.excerpt, a.request = p.ResponseStatus, clean(p.ResponseExcerpt), clean(p.Request)
	}
	t.attempts = append(t.attempts, a)
	return a
}

// bufferedAttempt returns the attempt row of (step, number, worker) the transaction
// inserts, or nil.
func (t *txn) bufferedAttempt(stepID int64, number int, worker string) *attemptRow {
	for _, a := range t.attempts {
		if a.stepID == stepID && a.number == number && a.worker == worker {
			return a
		}
	}
	return nil
}

// attemptColumns are the attempt rows as the flush's arrays.
type attemptColumns struct {
	id, claimID, claimRunID, endRunID                 []*int64
	ord, runOrd                                       []*int32
	runID, stepID                                     []int64
	name, key, worker, outcome, err, excerpt, prev    []string
	claimRunChange, endReason, endActor, endRunChange []string
	request                                           []string
	number, status                                    []int32
	started, ended                                    []time.Time
	leaseUntil                                        []*time.Time
	endDerived                                        []bool
}

// add appends row a.
func (c *attemptColumns) add(t *txn, a *attemptRow) {
	id, ord := t.idOrOrdinal(a.end)
	var runID *int64
	var runOrd *int32
	if a.endRun != nil {
		runID, runOrd = t.idOrOrdinal(a.endRun)
	}
	c.id, c.ord, c.endRunID, c.runOrd = append(c.id, id), append(c.ord, ord), append(c.endRunID, runID), append(c.runOrd, runOrd)
	c.runID, c.stepID, c.name, c.number = append(c.runID, a.runID), append(c.stepID, a.stepID), append(c.name, a.name), append(c.number, int32(a.number))
	c.key, c.worker, c.started, c.ended = append(c.key, a.key), append(c.worker, a.worker), append(c.started, a.claim.at), append(c.ended, a.ended)
	c.outcome, c.err, c.status, c.excerpt = append(c.outcome, a.outcome), append(c.err, a.err), append(c.status, int32(a.status)), append(c.excerpt, a.excerpt)
	c.claimID, c.leaseUntil, c.prev = append(c.claimID, positive(a.claim.eventID)), append(c.leaseUntil, nullTime(a.claim.leaseUntil)), append(c.prev, a.claim.prev)
	c.claimRunID, c.claimRunChange = append(c.claimRunID, positive(a.claim.runEventID)), append(c.claimRunChange, a.claim.runChange)
	c.endDerived, c.endReason, c.endActor, c.endRunChange = append(c.endDerived, a.endDerived), append(c.endReason, a.endReason),
		append(c.endActor, a.endActor), append(c.endRunChange, a.endRunChange)
	c.request = append(c.request, a.request)
}

// positive is id for a nullable ID column: NULL for 0 (and below).
func positive(id int64) *int64 {
	if id <= 0 {
		return nil
	}
	return &id
}
