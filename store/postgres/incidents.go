package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

var _ store.IncidentStore = (*Store)(nil)

// EventScan implements store.IncidentStore. Like EventList, it reads only up to the
// horizon of transactions in progress (see eventHorizon), so a reader that advances its
// cursor to Through never passes an event that commits later with a smaller ID.
func (s *Store) EventScan(ctx context.Context, p store.EventScanParams) (*store.EventScanResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var res *store.EventScanResult
	err := s.read(ctx, "event scan", func(q querier) error {
		horizon, err := s.eventHorizon(ctx)
		if err != nil {
			return err
		}
		// Stored events, and derived ones when a type asked for is derived.
		evs, err := listEvents(ctx, q, store.EventListParams{AfterID: p.AfterID, Limit: limit}, p.Types, horizon)
		if err != nil {
			return err
		}
		res = &store.EventScanResult{Events: evs, Through: max(p.AfterID, horizon)}
		if len(evs) == limit {
			res.Through = evs[len(evs)-1].ID
		}
		return nil
	})
	return res, err
}

// IncidentCursorGet implements store.IncidentStore.
func (s *Store) IncidentCursorGet(ctx context.Context, name string) (int64, bool, error) {
	var pos int64
	found := true
	err := s.read(ctx, "incident cursor get", func(q querier) error {
		err := q.QueryRow(ctx, `SELECT position FROM incident_cursors WHERE name = $1`, name).Scan(&pos)
		if errors.Is(err, pgx.ErrNoRows) {
			pos, found = 0, false
			return nil
		}
		return err
	})
	return pos, found, err
}

// IncidentRecord implements store.IncidentStore. The cursor row, locked (or, the first
// time, inserted) before anything else, serializes recorders: a second one waits for the
// first to commit, then finds the cursor moved.
func (s *Store) IncidentRecord(ctx context.Context, p store.IncidentRecordParams) ([]*store.Incident, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: incident record: %w", err)
	}
	var opened []*store.Incident
	err := s.tx(ctx, "incident record", func(t *txn) error {
		opened = nil
		moved := func(pos int64) error {
			return fmt.Errorf("cursor %s is at %d, not %d: %w", p.Cursor, pos, p.From, store.ErrCursorMoved)
		}
		var pos int64
		err := t.QueryRow(ctx, `SELECT position FROM incident_cursors WHERE name = $1 FOR UPDATE`, p.Cursor).Scan(&pos)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if p.From != 0 {
				return moved(0)
			}
			tag, err := t.Exec(ctx, `INSERT INTO incident_cursors (name, position, updated_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
				p.Cursor, p.To, p.Now)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return moved(-1) // another recorder created it meanwhile
			}
		case err != nil:
			return err
		case pos != p.From:
			return moved(pos)
		default:
			if _, err := t.Exec(ctx, `UPDATE incident_cursors SET position = $2, updated_at = $3 WHERE name = $1`, p.Cursor, p.To, p.Now); err != nil {
				return err
			}
		}
		for _, h := range p.Hits {
			inc, err := s.applyHit(ctx, t, h, p)
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
func (s *Store) applyHit(ctx context.Context, t *txn, h store.IncidentHit, p store.IncidentRecordParams) (*store.Incident, error) {
	cur, err := scanIncident(t.QueryRow(ctx, `SELECT `+incidentColumns+` FROM incidents
		WHERE policy = $1 AND workflow = $2 AND step_name = $3 AND reason = $4 AND closed_at IS NULL ORDER BY id DESC LIMIT 1 FOR UPDATE`,
		h.Policy, h.Workflow, clean(h.StepName), clean(h.Reason)))
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
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
		_, err = t.Exec(ctx, `UPDATE incidents SET count = count + 1, repeats = $2::jsonb, last_event_id = $3, last_at = greatest(last_at, $4) WHERE id = $1`,
			cur.ID, string(jsonbSafe(repeats)), h.Event.EventID, h.Event.At)
		return nil, err
	}
	first, err := json.Marshal(h.Event)
	if err != nil {
		return nil, err
	}
	inc := &store.Incident{Policy: h.Policy, Workflow: h.Workflow, StepName: clean(h.StepName), Reason: clean(h.Reason),
		OpenedAt: h.Event.At, EndsAt: h.Event.At.Add(h.Window), Count: 1, First: h.Event,
		LastEventID: h.Event.EventID, LastAt: h.Event.At}
	err = t.QueryRow(ctx, `INSERT INTO incidents (policy, workflow, step_name, reason, opened_at, ends_at, count, first, first_event_id, last_event_id, last_at)
		VALUES ($1, $2, $3, $4, $5, $6, 1, $7::jsonb, $8, $8, $9)
		ON CONFLICT (policy, first_event_id) DO NOTHING RETURNING id`,
		inc.Policy, inc.Workflow, inc.StepName, inc.Reason, inc.OpenedAt, inc.EndsAt, string(jsonbSafe(first)), h.Event.EventID, h.Event.At).Scan(&inc.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // this event opened an incident of this policy already
	}
	if err != nil {
		return nil, err
	}
	t.event(&store.Event{At: p.Now, Type: store.EventIncidentOpened, RunID: h.Event.RunID, Workflow: inc.Workflow, Entity: h.Event.Entity,
		StepName: inc.StepName, Actor: p.Actor, Reason: inc.Reason,
		Detail: detail(map[string]any{"incident": inc.ID, "policy": inc.Policy, "event_id": h.Event.EventID, "window": h.Window.String(), "ends_at": inc.EndsAt})})
	return inc, nil
}

// IncidentListDue implements store.IncidentStore.
func (s *Store) IncidentListDue(ctx context.Context, p store.IncidentListDueParams) ([]*store.Incident, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	return s.incidents(ctx, "incident list due", `SELECT `+incidentColumns+` FROM incidents
		WHERE closed_at IS NULL AND (alerted_at IS NULL OR ends_at <= $1) AND (coalesce(cardinality($2::text[]), 0) = 0 OR policy = ANY($2))
		ORDER BY id LIMIT $3`, p.Now, p.Policies, limit)
}

// IncidentList implements store.IncidentStore.
func (s *Store) IncidentList(ctx context.Context, p store.IncidentListParams) ([]*store.Incident, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.Policy != "" {
		add("policy = ?", p.Policy)
	}
	if p.Workflow != "" {
		add("workflow = ?", p.Workflow)
	}
	if p.Open {
		where = append(where, "closed_at IS NULL")
	}
	if p.BeforeID > 0 {
		add("id < ?", p.BeforeID)
	}
	q := `SELECT ` + incidentColumns + ` FROM incidents`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	return s.incidents(ctx, "incident list", q+` ORDER BY id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
}

func (s *Store) incidents(ctx context.Context, op, sql string, args ...any) ([]*store.Incident, error) {
	var out []*store.Incident
	err := s.read(ctx, op, func(q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Incident, error) { return scanIncident(row) })
		return err
	})
	return out, err
}

// IncidentMarkAlerted implements store.IncidentStore.
func (s *Store) IncidentMarkAlerted(ctx context.Context, p store.IncidentMarkParams) (bool, error) {
	var changed bool
	err := s.tx(ctx, "incident mark alerted", func(t *txn) error {
		tag, err := t.Exec(ctx, `UPDATE incidents SET alerted_at = $2 WHERE id = $1 AND alerted_at IS NULL`, p.ID, p.Now)
		if err != nil {
			return err
		}
		changed = tag.RowsAffected() == 1
		if !changed {
			return incidentExists(ctx, t, p.ID)
		}
		return nil
	})
	return changed, err
}

// IncidentClose implements store.IncidentStore.
func (s *Store) IncidentClose(ctx context.Context, p store.IncidentMarkParams) (bool, error) {
	var changed bool
	err := s.tx(ctx, "incident close", func(t *txn) error {
		inc, err := scanIncident(t.QueryRow(ctx, `UPDATE incidents SET closed_at = $2 WHERE id = $1 AND closed_at IS NULL RETURNING `+incidentColumns, p.ID, p.Now))
		if errors.Is(err, pgx.ErrNoRows) {
			changed = false
			return incidentExists(ctx, t, p.ID)
		}
		if err != nil {
			return err
		}
		changed = true
		t.event(&store.Event{At: p.Now, Type: store.EventIncidentClosed, Workflow: inc.Workflow, StepName: inc.StepName, Actor: p.Actor, Reason: inc.Reason,
			Detail: detail(map[string]any{"incident": inc.ID, "policy": inc.Policy, "count": inc.Count, "repeats": inc.Count - 1,
				"opened_at": inc.OpenedAt, "ends_at": inc.EndsAt})})
		return nil
	})
	return changed, err
}

func incidentExists(ctx context.Context, q querier, id int64) error {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM incidents WHERE id = $1`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("incident %d: %w", id, store.ErrNotFound)
	}
	return nil
}

const incidentColumns = `id, policy, workflow, step_name, reason, opened_at, ends_at, count, first, repeats, last_event_id, last_at, alerted_at, closed_at`

func scanIncident(r pgx.Row) (*store.Incident, error) {
	var inc store.Incident
	var alerted, closed pgtype.Timestamptz
	var first, repeats []byte
	if err := r.Scan(&inc.ID, &inc.Policy, &inc.Workflow, &inc.StepName, &inc.Reason, &inc.OpenedAt, &inc.EndsAt, &inc.Count, &first, &repeats,
		&inc.LastEventID, &inc.LastAt, &alerted, &closed); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(first, &inc.First); err != nil {
		return nil, fmt.Errorf("incident %d: first: %w", inc.ID, err)
	}
	if err := json.Unmarshal(repeats, &inc.Repeats); err != nil {
		return nil, fmt.Errorf("incident %d: repeats: %w", inc.ID, err)
	}
	inc.OpenedAt, inc.EndsAt, inc.LastAt = inc.OpenedAt.UTC(), inc.EndsAt.UTC(), inc.LastAt.UTC()
	inc.AlertedAt, inc.ClosedAt = fromTS(alerted), fromTS(closed)
	return &inc, nil
}
