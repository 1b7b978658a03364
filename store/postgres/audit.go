package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

// detail encodes an event's detail object; nil encodes as {}.
func detail(m map[string]any) json.RawMessage { return jsonbSafe(store.EncodeDetail(m)) }

// jsonbSafe replaces the escape \u0000, which jsonb refuses, by \ufffd in the JSON text b.
// An escaped backslash followed by "u0000" is text, and is left alone.
func jsonbSafe(b []byte) []byte {
	const nul = `\u0000`
	if !bytes.Contains(b, []byte(nul)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			if bytes.HasPrefix(b[i:], []byte(nul)) {
				out = append(out, `\ufffd`...)
				i += len(nul) - 1
				continue
			}
			out = append(out, b[i], b[i+1]) // any other escape, including \\, as a whole
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}

// merge returns base with extra's entries added (extra wins).
func merge(base, extra map[string]any) map[string]any { return store.MergeDetail(base, extra) }

// eventHorizon returns the highest event ID below which every event is settled: committed
// or rolled back, with no transaction in progress able to commit one. Each event-writing
// transaction holds, until it ends, a shared advisory lock (eventMarkKey, m) where m is, in
// 32 bits, the last ID drawn before its own; the horizon is the smallest such m, or the
// last ID drawn if no writer is in progress. The last ID is read before the locks: a
// writer that marks itself later draws IDs above it.
func (s *Store) eventHorizon(ctx context.Context) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM events_id_seq`)
	b.Queue(`SELECT objid::bigint FROM pg_locks
		WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, int64(uint32(s.eventMarkKey)))
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var last int64
	if err := br.QueryRow().Scan(&last); err != nil {
		return 0, err
	}
	rows, err := br.Query()
	if err != nil {
		return 0, err
	}
	marks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, err
	}
	horizon := last
	for _, low := range marks {
		// The mark is the low 32 bits of an ID at most last: the nearest such ID.
		m := last - ((last-low)%(1<<32)+(1<<32))%(1<<32)
		horizon = min(horizon, m)
	}
	return horizon, br.Close()
}

// AttemptListByRun implements store.Store: the attempts that ended, and those in flight
// from the claims their steps hold, in the order they were claimed.
func (s *Store) AttemptListByRun(ctx context.Context, runID int64) ([]*store.Attempt, error) {
	var out []*store.Attempt
	err := s.read(ctx, "attempt list", func(q querier) error {
		rows, err := q.Query(ctx, `SELECT id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status,
				response_excerpt, request, coalesce(claim_event_id, id) AS claim
			FROM attempts WHERE step_id IN (SELECT id FROM steps WHERE run_id = $1)
			UNION ALL
			SELECT 0, run_id, id, name, attempt, effect_key, lease_owner, claimed_at, NULL, '', '', 0, '', '', claim_event_id
			FROM steps WHERE run_id = $1 AND claim_event_id > 0
			ORDER BY claim`, runID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Attempt, error) {
			var a store.Attempt
			var ended pgtype.Timestamptz
			var outcome string
			var claim int64
			if err := row.Scan(&a.ID, &a.RunID, &a.StepID, &a.StepName, &a.Number, &a.EffectKey, &a.Worker, &a.StartedAt, &ended, &outcome, &a.Error,
				&a.ResponseStatus, &a.ResponseExcerpt, &a.Request, &claim); err != nil {
				return nil, err
			}
			a.StartedAt, a.EndedAt, a.Outcome = a.StartedAt.UTC(), fromTS(ended), store.Outcome(outcome)
			return &a, nil
		})
		return err
	})
	return out, err
}

// EffectGetByKey implements store.Store.
func (s *Store) EffectGetByKey(ctx context.Context, key string) (*store.Effect, error) {
	var e *store.Effect
	err := s.read(ctx, "effect get", func(q querier) error {
		var err error
		e, err = getEffect(ctx, q, key)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: effect %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// effectColumns are the columns of a ledger row, as scanEffect reads them.
const effectColumns = `effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until`

// scanEffect scans a row of extra's columns, then effectColumns.
func scanEffect(row pgx.Row, extra ...any) (*store.Effect, error) {
	var e store.Effect
	var state string
	var result []byte
	var created time.Time
	var completed, retain pgtype.Timestamptz
	if err := row.Scan(append(extra, &e.Key, &state, &e.Fingerprint, &result, &e.RunID, &e.StepID, &e.Workflow, &e.StepName, &created, &completed, &retain)...); err != nil {
		return nil, err
	}
	e.State, e.Result = store.EffectState(state), json.RawMessage(result)
	e.CreatedAt, e.CompletedAt, e.RetainUntil = created.UTC(), fromTS(completed), fromTS(retain)
	return &e, nil
}

// getEffect reads the ledger row of key: the step that holds it, or its row in effects.
func getEffect(ctx context.Context, q querier, key string) (*store.Effect, error) {
	var inStep bool
	return scanEffect(q.QueryRow(ctx, keyHoldersSQL+` LIMIT 1`, []string{key}), &inStep)
}
