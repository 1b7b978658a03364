package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/store"
)

var _ store.IncidentStore = (*Store)(nil)

// EventScan implements store.IncidentStore. Event IDs are drawn inside write transactions,
// which SQLite runs one at a time, so they commit in ID order: reading the newest ID drawn
// (audit_spans) and the page in one read transaction sees every event up to that ID.
func (s *Store) EventScan(ctx context.Context, p store.EventScanParams) (*store.EventScanResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: event scan: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var newest int64
	if err := tx.QueryRowContext(ctx, `SELECT max(coalesce((SELECT max(last_id) FROM audit_spans), 0), coalesce((SELECT max(id) FROM events), 0))`).Scan(&newest); err != nil {
		return nil, fmt.Errorf("sqlite: event scan: %w", err)
	}
	res := &store.EventScanResult{Through: max(p.AfterID, newest)}
	if newest <= p.AfterID {
		return res, nil
	}
	// Stored events, and derived ones when a type asked for is derived.
	q, args := eventsSQL(store.EventListParams{AfterID: p.AfterID, Limit: limit}, p.Types, newest)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: event scan: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanListedEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: event scan: %w", err)
		}
		res.Events = append(res.Events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: event scan: %w", err)
	}
	if len(res.Events) == limit {
		res.Through = res.Events[len(res.Events)-1].ID
	}
	return res, nil
}

// IncidentCursorGet implements store.IncidentStore.
func (s *Store) IncidentCursorGet(ctx context.Context, name string) (int64, bool, error) {
	var pos int64
	err := s.r.QueryRowContext(ctx, `SELECT position FROM incident_cursors WHERE name = ?`, name).Scan(&pos)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("sqlite: incident cursor get: %w", err)
	}
	return pos, true, nil
}

// IncidentRecord implements store.IncidentStore. The write lock serializes recorders; the
// cursor, read inside the transaction, decides which of them applies its hits.
func (s *Store) IncidentRecord(ctx context.Context, p store.IncidentRecordParams) ([]*store.Incident, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: incident record: %w", err)
	}
	var opened []*store.Incident
	err := s.write(ctx, "incident record", func(w *writeTx) error {
		tx := w.tx
		opened = nil
		var pos int64
		err := tx.QueryRowContext(ctx, `SELECT position FROM incident_cursors WHERE name = ?`, p.Cursor).Scan(&pos)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if pos != p.From {
			return fmt.Errorf("cursor %s is at %d, not %d: %w", p.Cursor, pos, p.From, store.ErrCursorMoved)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO incident_cursors (name, position, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at`,
			p.Cursor, p.To, ts(p.Now)); err != nil {
			return err
		}
		for _, h := range p.Hits {
			inc, err := applyHit(ctx, w, h, p)
			if err != nil {
				return err
			}
			if inc != nil {
				opened = append(opened, inc)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return opened, nil
}

// applyHit counts h in the open incident of its kind whose window it falls in, or opens a
// new incident and returns it.
func applyHit(ctx context.Context, w *writeTx, h store.IncidentHit, p store.IncidentRecordParams) (*store.Incident, error) {
	tx := w.tx
	cur, err := scanIncident(tx.QueryRowContext(ctx, `SELECT `+incidentColumns+` FROM incidents
		WHERE policy = ? AND workflow = ? AND step_name = ? AND reason = ? AND closed_at = 0 ORDER BY id DESC LIMIT 1`,
		h.Policy, h.Workflow, h.StepName, h.Reason))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if err == nil && h.Event.At.Before(cur.EndsAt) {
		if h.Event.EventID <= cur.LastEventID {
			return nil, nil // counted already
		}
		if len(cur.Repeats) < store.MaxIncidentRepeats {
			cur.Repeats = append(cur.Repeats, h.Event)
		}
		repeats, err := json.Marshal(cur.Repeats)
		if err != nil {
			return nil, err
		}
		_, err = tx.ExecContext(ctx, `UPDATE incidents SET count = count + 1, repeats = ?, last_event_id = ?, last_at = max(last_at, ?) WHERE id = ?`,
			string(repeats), h.Event.EventID, ts(h.Event.At), cur.ID)
		return nil, err
	}
	first, err := json.Marshal(h.Event)
	if err != nil {
		return nil, err
	}
	inc := &store.Incident{Policy: h.Policy, Workflow: h.Workflow, StepName: h.StepName, Reason: h.Reason,
		OpenedAt: h.Event.At, EndsAt: h.Event.At.Add(h.Window), Count: 1, First: h.Event,
		LastEventID: h.Event.EventID, LastAt: h.Event.At}
	err = tx.QueryRowContext(ctx, `INSERT INTO incidents (policy, workflow, step_name, reason, opened_at, ends_at, count, first, first_event_id, last_event_id, last_at)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
		ON CONFLICT (policy, first_event_id) DO NOTHING RETURNING id`,
		inc.Policy, inc.Workflow, inc.StepName, inc.Reason, ts(inc.OpenedAt), ts(inc.EndsAt), string(first), h.Event.EventID, h.Event.EventID, ts(h.Event.At)).Scan(&inc.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // this event opened an incident of this policy already
	}
	if err != nil {
		return nil, err
	}
	w.event(incidentOpenedEvent(inc, h, p))
	return inc, nil
}

// incidentOpenedEvent is the audit event of a new incident: it names the run whose review
// opened it.
func incidentOpenedEvent(inc *store.Incident, h store.IncidentHit, p store.IncidentRecordParams) *store.Event {
	return &store.Event{At: p.Now, Type: store.EventIncidentOpened, RunID: h.Event.RunID, Workflow: inc.Workflow, Entity: h.Event.Entity,
		StepName: inc.StepName, Actor: p.Actor, Reason: inc.Reason,
		Detail: detail(map[string]any{"incident": inc.ID, "policy": inc.Policy, "event_id": h.Event.EventID, "window": h.Window.String(), "ends_at": inc.EndsAt})}
}

// IncidentListDue implements store.IncidentStore.
func (s *Store) IncidentListDue(ctx context.Context, p store.IncidentListDueParams) ([]*store.Incident, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + incidentColumns + ` FROM incidents WHERE closed_at = 0 AND (alerted_at = 0 OR ends_at <= ?)`
	args := []any{ts(p.Now)}
	if len(p.Policies) > 0 {
		q += ` AND policy IN (` + placeholders(len(p.Policies)) + `)`
		for _, name := range p.Policies {
			args = append(args, name)
		}
	}
	return s.incidents(ctx, "incident list due", q+` ORDER BY id LIMIT ?`, append(args, limit)...)
}

// IncidentList implements store.IncidentStore.
func (s *Store) IncidentList(ctx context.Context, p store.IncidentListParams) ([]*store.Incident, error) {
	var where []string
	var args []any
	if p.Policy != "" {
		where, args = append(where, "policy = ?"), append(args, p.Policy)
	}
	if p.Workflow != "" {
		where, args = append(where, "workflow = ?"), append(args, p.Workflow)
	}
	if p.Open {
		where = append(where, "closed_at = 0")
	}
	if p.BeforeID > 0 {
		where, args = append(where, "id < ?"), append(args, p.BeforeID)
	}
	q := `SELECT ` + incidentColumns + ` FROM incidents`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	return s.incidents(ctx, "incident list", q+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
}

func (s *Store) incidents(ctx context.Context, op, q string, args ...any) ([]*store.Incident, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer rows.Close()
	var out []*store.Incident
	for rows.Next() {
		inc, err := scanIncident(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: %s: %w", op, err)
		}
		out = append(out, inc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return out, nil
}

// IncidentMarkAlerted implements store.IncidentStore.
func (s *Store) IncidentMarkAlerted(ctx context.Context, p store.IncidentMarkParams) (bool, error) {
	var changed bool
	err := s.tx(ctx, "incident mark alerted", func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE incidents SET alerted_at = ? WHERE id = ? AND alerted_at = 0`, ts(p.Now), p.ID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		changed = n == 1
		if !changed {
			return incidentExists(ctx, tx, p.ID)
		}
		return nil
	})
	return changed, err
}

// IncidentClose implements store.IncidentStore.
func (s *Store) IncidentClose(ctx context.Context, p store.IncidentMarkParams) (bool, error) {
	var changed bool
	err := s.write(ctx, "incident close", func(w *writeTx) error {
		tx := w.tx
		res, err := tx.ExecContext(ctx, `UPDATE incidents SET closed_at = ? WHERE id = ? AND closed_at = 0`, ts(p.Now), p.ID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		changed = n == 1
		if !changed {
			return incidentExists(ctx, tx, p.ID)
		}
		inc, err := scanIncident(tx.QueryRowContext(ctx, `SELECT `+incidentColumns+` FROM incidents WHERE id = ?`, p.ID))
		if err != nil {
			return err
		}
		w.event(incidentClosedEvent(inc, p))
		return nil
	})
	return changed, err
}

// incidentClosedEvent is the audit event of a closed incident: how many events it held.
func incidentClosedEvent(inc *store.Incident, p store.IncidentMarkParams) *store.Event {
	return &store.Event{At: p.Now, Type: store.EventIncidentClosed, Workflow: inc.Workflow, StepName: inc.StepName, Actor: p.Actor, Reason: inc.Reason,
		Detail: detail(map[string]any{"incident": inc.ID, "policy": inc.Policy, "count": inc.Count, "repeats": inc.Count - 1,
			"opened_at": inc.OpenedAt, "ends_at": inc.EndsAt})}
}

func incidentExists(ctx context.Context, tx dbtx, id int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM incidents WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("incident %d: %w", id, store.ErrNotFound)
	}
	return nil
}

const incidentColumns = `id, policy, workflow, step_name, reason, opened_at, ends_at, count, first, repeats, last_event_id, last_at, alerted_at, closed_at`

func scanIncident(r scanner) (*store.Incident, error) {
	var inc store.Incident
	var opened, ends, last, alerted, closed int64
	var first, repeats string
	if err := r.Scan(&inc.ID, &inc.Policy, &inc.Workflow, &inc.StepName, &inc.Reason, &opened, &ends, &inc.Count, &first, &repeats,
		&inc.LastEventID, &last, &alerted, &closed); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(first), &inc.First); err != nil {
		return nil, fmt.Errorf("incident %d: first: %w", inc.ID, err)
	}
	if err := json.Unmarshal([]byte(repeats), &inc.Repeats); err != nil {
		return nil, fmt.Errorf("incident %d: repeats: %w", inc.ID, err)
	}
	inc.OpenedAt, inc.EndsAt, inc.LastAt, inc.AlertedAt, inc.ClosedAt = fromTS(opened), fromTS(ends), fromTS(last), fromTS(alerted), fromTS(closed)
	return &inc, nil
}
