package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// EventList implements store.Store. It lists only events below the horizon of
// transactions in progress (see eventHorizon), so that, as the contract says, IDs appear in
// commit order: a reader paging with AfterID never skips an event committed later with a
// smaller ID.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]*store.Event, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.RunID > 0 {
		add("run_id = ?", p.RunID)
	}
	if p.Entity != "" {
		add("entity = ?", p.Entity)
	}
	if p.EffectKey != "" {
		add("effect_key = ?", p.EffectKey)
	}
	if !p.Since.IsZero() {
		add("at >= ?", p.Since)
	}
	if !p.Until.IsZero() {
		add("at < ?", p.Until)
	}
	if p.AfterID > 0 {
		add("id > ?", p.AfterID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var out []*store.Event
	err := s.read(ctx, "event list", func(q querier) error {
		horizon, err := s.eventHorizon(ctx)
		if err != nil {
			return err
		}
		args := append(args[:len(args):len(args)], horizon, limit)
		conds := append(where[:len(where):len(where)], "id <= $"+strconv.Itoa(len(args)-1))
		rows, err := q.Query(ctx, `SELECT id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail
			FROM events WHERE `+strings.Join(conds, " AND ")+` ORDER BY id LIMIT $`+strconv.Itoa(len(args)), args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Event, error) {
			var e store.Event
			var d []byte
			if err := row.Scan(&e.ID, &e.At, &e.Type, &e.RunID, &e.StepID, &e.Workflow, &e.Entity, &e.StepName, &e.EffectKey, &e.Attempt, &e.Actor, &e.Reason, &d); err != nil {
				return nil, err
			}
			e.At, e.Detail = e.At.UTC(), json.RawMessage(d)
			return &e, nil
		})
		return err
	})
	return out, err
}

// AttemptListByRun implements store.Store.
func (s *Store) AttemptListByRun(ctx context.Context, runID int64) ([]*store.Attempt, error) {
	var out []*store.Attempt
	err := s.read(ctx, "attempt list", func(q querier) error {
		rows, err := q.Query(ctx, `SELECT id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt
			FROM attempts WHERE run_id = $1 ORDER BY id`, runID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Attempt, error) {
			var a store.Attempt
			var ended pgtype.Timestamptz
			var outcome string
			if err := row.Scan(&a.ID, &a.RunID, &a.StepID, &a.StepName, &a.Number, &a.EffectKey, &a.Worker, &a.StartedAt, &ended, &outcome, &a.Error, &a.ResponseStatus, &a.ResponseExcerpt); err != nil {
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
		e, err = getEffect(ctx, q, key, false)
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

func scanEffect(row pgx.Row) (*store.Effect, error) {
	var e store.Effect
	var state string
	var result []byte
	var created time.Time
	var completed, retain pgtype.Timestamptz
	if err := row.Scan(&e.Key, &state, &e.Fingerprint, &result, &e.RunID, &e.StepID, &e.Workflow, &e.StepName, &created, &completed, &retain); err != nil {
		return nil, err
	}
	e.State, e.Result = store.EffectState(state), json.RawMessage(result)
	e.CreatedAt, e.CompletedAt, e.RetainUntil = created.UTC(), fromTS(completed), fromTS(retain)
	return &e, nil
}

// getEffect reads a ledger row, locking it until the transaction ends if forUpdate.
func getEffect(ctx context.Context, q querier, key string, forUpdate bool) (*store.Effect, error) {
	sql := `SELECT ` + effectColumns + ` FROM effects WHERE effect_key = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	return scanEffect(q.QueryRow(ctx, sql, key))
}
