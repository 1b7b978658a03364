package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// The audit sequence. Every audit event a transaction appends, stored in events or derived
// from the row that holds its facts (store/derive.go), takes the next value of
// events_id_seq in the order the transaction appended it. The IDs are drawn by the
// statement that first needs them, for every event appended so far: the insert of a start
// batch's runs (each run.created is derived from its run), the claim's update of its steps
// (each step.claimed from the step in flight), and the flush, which inserts the stored
// events and the attempt rows (each step.completed from its attempt). A statement that
// draws IDs is preceded, in its round trip, by the transaction's mark of the horizon (see
// eventHorizon), so that EventList never lists an ID below one still in progress.

// txEvent is one audit event of a transaction: stored (inserted into events by the flush)
// or derived (its ID is written into the row that holds its facts). A slot is appended
// before its event is known, so that a statement can draw its ID in order.
type txEvent struct {
	e *store.Event
	// at is a derived event's time (its event is not built).
	at      time.Time
	derived bool
	// id is the event's ID, 0 until a statement drew it.
	id int64
}

// drawSQL is the CTE that draws the IDs of the transaction's events not drawn yet, in
// order, ord 1 to the parameter's value.
const drawSQL = `ids AS MATERIALIZED (SELECT ord, nextval('events_id_seq') AS id FROM generate_series(1, %s::int) AS ord)`

// markSQL marks the transaction as an event writer (see eventHorizon): it names the last
// ID drawn so far, below every ID this transaction will draw, wrapped to 32 bits.
const markSQL = `SELECT pg_advisory_xact_lock_shared($1::int4,
	(SELECT CASE WHEN v >= 2147483648 THEN v - 4294967296 ELSE v END
	 FROM (SELECT (CASE WHEN is_called THEN last_value ELSE last_value - 1 END) & 4294967295 AS v FROM events_id_seq) m)::int4)`

// event appends a stored event to the transaction.
func (t *txn) event(e *store.Event) { t.store(e) }

// store appends a stored event and returns it.
func (t *txn) store(e *store.Event) *txEvent {
	if t.origin != nil {
		t.origin.Stamp(e)
	}
	ev := &txEvent{e: e}
	t.log = append(t.log, ev)
	return ev
}

// last is the event appended last, or nil.
func (t *txn) last() *txEvent {
	if len(t.log) == 0 {
		return nil
	}
	return t.log[len(t.log)-1]
}

// slot appends an event whose content a later step of the transaction fills in.
func (t *txn) slot() *txEvent {
	ev := &txEvent{}
	t.log = append(t.log, ev)
	return ev
}

// derive appends a derived event at at.
func (t *txn) derive(at time.Time) *txEvent {
	ev := &txEvent{at: at, derived: true}
	t.log = append(t.log, ev)
	return ev
}

// undrawn is how many events have no ID yet.
func (t *txn) undrawn() int { return len(t.log) - t.drawn }

// ordinal is ev's position among the events without an ID (1 for the first); 0 when ev
// has its ID.
func (t *txn) ordinal(ev *txEvent) int {
	if ev.id != 0 {
		return 0
	}
	for i := t.drawn; i < len(t.log); i++ {
		if t.log[i] == ev {
			return i - t.drawn + 1
		}
	}
	return 0
}

// queueMark adds the horizon mark to b unless the transaction holds it: before the first
// statement that draws an ID.
func (t *txn) queueMark(b *pgx.Batch) {
	if !t.marked {
		b.Queue(markSQL, t.s.eventMarkKey)
		t.marked = true
	}
}

// assign gives the events without an ID, in order, the IDs a statement drew for them.
func (t *txn) assign(ids []int64) error {
	if len(ids) > t.undrawn() {
		return fmt.Errorf("%d event IDs drawn for %d events", len(ids), t.undrawn())
	}
	for _, id := range ids {
		t.log[t.drawn].id = id
		t.drawn++
		t.noteID(id)
	}
	return nil
}

// noteID extends the transaction's span of drawn IDs.
func (t *txn) noteID(id int64) {
	if t.idMin == 0 || id < t.idMin {
		t.idMin = id
	}
	t.idMax = max(t.idMax, id)
}

// drawNow draws, in a round trip of its own, the IDs of every event appended so far: for a
// write that must name an event's ID (a correction's revision) before the flush.
func (t *txn) drawNow(ctx context.Context) error {
	n := t.undrawn()
	if n == 0 {
		return nil
	}
	b := &pgx.Batch{}
	t.queueMark(b)
	b.Queue(`WITH `+fmt.Sprintf(drawSQL, "$1")+` SELECT id FROM ids ORDER BY ord`, n)
	var ids []int64
	err := sendQuery(ctx, t, b, func(rows pgx.Rows) error {
		var err error
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return err
	}
	return t.assign(ids)
}

// eventTimes is the range of the times of the transaction's events, for its span.
func (t *txn) eventTimes() (lo, hi time.Time) {
	for _, ev := range t.log {
		at := ev.at
		if ev.e != nil {
			at = ev.e.At
		}
		if at.IsZero() {
			continue
		}
		if lo.IsZero() || at.Before(lo) {
			lo = at
		}
		if at.After(hi) {
			hi = at
		}
	}
	return lo, hi
}

// sendQuery sends b, whose last statement is a query, reads the results of the statements
// before it and passes the query's rows to read.
func sendQuery(ctx context.Context, t *txn, b *pgx.Batch, read func(pgx.Rows) error) error {
	br := t.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	if err := read(rows); err != nil {
		return err
	}
	return br.Close()
}
