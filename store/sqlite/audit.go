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

// detail encodes an event's detail object.
func detail(m map[string]any) json.RawMessage { return store.EncodeDetail(m) }

// merge returns base with extra's entries added (extra wins).
func merge(base, extra map[string]any) map[string]any { return store.MergeDetail(base, extra) }

func insertEvent(ctx context.Context, tx *sql.Tx, e *store.Event) error {
	d := e.Detail
	if len(d) == 0 {
		d = json.RawMessage(`{}`)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO events (at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ts(e.At), e.Type, e.RunID, e.StepID, e.Workflow, e.Entity, e.StepName, e.EffectKey, e.Attempt, e.Actor, e.Reason, string(d))
	if err != nil {
		return fmt.Errorf("append event %s: %w", e.Type, err)
	}
	return nil
}

// EventList implements store.Store.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]*store.Event, error) {
	var where []string
	var args []any
	if p.RunID > 0 {
		where, args = append(where, "run_id = ?"), append(args, p.RunID)
	}
	if p.Entity != "" {
		where, args = append(where, "entity = ?"), append(args, p.Entity)
	}
	if p.EffectKey != "" {
		where, args = append(where, "effect_key = ?"), append(args, p.EffectKey)
	}
	if !p.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, ts(p.Since))
	}
	if !p.Until.IsZero() {
		where, args = append(where, "at < ?"), append(args, ts(p.Until))
	}
	if p.AfterID > 0 {
		where, args = append(where, "id > ?"), append(args, p.AfterID)
	}
	q := `SELECT id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail FROM events`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	q += ` ORDER BY id LIMIT ?`
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: event list: %w", err)
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		var e store.Event
		var at int64
		var d string
		if err := rows.Scan(&e.ID, &at, &e.Type, &e.RunID, &e.StepID, &e.Workflow, &e.Entity, &e.StepName, &e.EffectKey, &e.Attempt, &e.Actor, &e.Reason, &d); err != nil {
			return nil, fmt.Errorf("sqlite: event list: %w", err)
		}
		e.At, e.Detail = fromTS(at), json.RawMessage(d)
		out = append(out, &e)
	}
	return out, rows.Err()
}

// AttemptListByRun implements store.Store.
func (s *Store) AttemptListByRun(ctx context.Context, runID int64) ([]*store.Attempt, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt
		FROM attempts WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: attempt list: %w", err)
	}
	defer rows.Close()
	var out []*store.Attempt
	for rows.Next() {
		var a store.Attempt
		var started, ended int64
		var outcome string
		if err := rows.Scan(&a.ID, &a.RunID, &a.StepID, &a.StepName, &a.Number, &a.EffectKey, &a.Worker, &started, &ended, &outcome, &a.Error, &a.ResponseStatus, &a.ResponseExcerpt); err != nil {
			return nil, fmt.Errorf("sqlite: attempt list: %w", err)
		}
		a.StartedAt, a.EndedAt, a.Outcome = fromTS(started), fromTS(ended), store.Outcome(outcome)
		out = append(out, &a)
	}
	return out, rows.Err()
}

// EffectGetByKey implements store.Store.
func (s *Store) EffectGetByKey(ctx context.Context, key string) (*store.Effect, error) {
	e, err := getEffect(ctx, s.r, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: effect %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: effect get: %w", err)
	}
	return e, nil
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getEffect(ctx context.Context, q queryRower, key string) (*store.Effect, error) {
	return scanEffect(q.QueryRowContext(ctx, stmtSQL[stmtEffectGet], key))
}

// scanEffect scans a row of effectColumns.
func scanEffect(sc scanner) (*store.Effect, error) {
	var e store.Effect
	var state string
	var result []byte
	var created, completed, retain int64
	err := sc.Scan(&e.Key, &state, &e.Fingerprint, &result, &e.RunID, &e.StepID, &e.Workflow, &e.StepName, &created, &completed, &retain)
	if err != nil {
		return nil, err
	}
	e.State, e.Result = store.EffectState(state), json.RawMessage(result)
	e.CreatedAt, e.CompletedAt, e.RetainUntil = fromTS(created), fromTS(completed), fromTS(retain)
	return &e, nil
}
