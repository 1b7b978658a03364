package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

// detail encodes an event's detail object.
func detail(m map[string]any) json.RawMessage { return store.EncodeDetail(m) }

// merge returns base with extra's entries added (extra wins).
func merge(base, extra map[string]any) map[string]any { return store.MergeDetail(base, extra) }

// AttemptListByRun implements store.Store: the attempts that ended, and those in flight
// from the claims their steps hold, in the order they were claimed.
func (s *Store) AttemptListByRun(ctx context.Context, runID int64) ([]*store.Attempt, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error,
			response_status, response_excerpt, request, coalesce(claim_event_id, id)
		FROM attempts WHERE step_id IN (SELECT id FROM steps WHERE run_id = ?1)
		UNION ALL
		SELECT 0, run_id, id, name, attempt, effect_key, lease_owner, claimed_at, 0, '', '', 0, '', '', claim_event_id
		FROM steps WHERE run_id = ?1 AND claim_event_id > 0
		ORDER BY 15`, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: attempt list: %w", err)
	}
	defer rows.Close()
	var out []*store.Attempt
	for rows.Next() {
		var a store.Attempt
		var started, ended, order int64
		var outcome string
		if err := rows.Scan(&a.ID, &a.RunID, &a.StepID, &a.StepName, &a.Number, &a.EffectKey, &a.Worker, &started, &ended, &outcome, &a.Error,
			&a.ResponseStatus, &a.ResponseExcerpt, &a.Request, &order); err != nil {
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

// getEffect reads the ledger row of key with q (the read pool or a transaction): the step
// that holds it, or its row in effects.
func getEffect(ctx context.Context, q queryRower, key string) (*store.Effect, error) {
	return scanEffect(q.QueryRowContext(ctx, keyHolderSQL, key))
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
