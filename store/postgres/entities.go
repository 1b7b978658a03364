package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onceflow/onceflow/store"
)

var _ store.EntityStore = (*Store)(nil)

// errConflict is returned inside a transaction that lost a race it cannot resolve in place;
// the transaction is rolled back and retried, and then sees the winner's row.
var errConflict = errors.New("concurrent change; retrying")

// EntityTransition implements store.EntityStore. The entity's row is locked before its
// transitions are looked up, so a concurrent transition under the same effect key is seen
// as a replay; two first transitions of a new entity race on its insertion, and the loser
// is retried.
func (s *Store) EntityTransition(ctx context.Context, p store.EntityTransitionParams) (*store.TransitionResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	initial := p.Initial
	if initial == "" {
		initial = "new"
	}
	var res *store.TransitionResult
	err := s.tx(ctx, "entity transition", func(t *txn) error {
		current, version := initial, int64(0)
		err := t.QueryRow(ctx, `SELECT state, version FROM entities WHERE entity_key = $1 FOR UPDATE`, p.Key).Scan(&current, &version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var from, entity string
		err = t.QueryRow(ctx, `SELECT entity_key, from_state FROM entity_transitions WHERE effect_key = $1`, p.EffectKey).Scan(&entity, &from)
		if err == nil {
			if entity != p.Key {
				return fmt.Errorf("effect key %q already transitioned entity %q, not %q", p.EffectKey, entity, p.Key)
			}
			// Read again: the transition may have committed after the entity was read above.
			var now string
			if err := t.QueryRow(ctx, `SELECT state FROM entities WHERE entity_key = $1`, p.Key).Scan(&now); err != nil {
				return err
			}
			res = &store.TransitionResult{Applied: true, Replayed: true, From: from, State: now}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		ev := &store.Event{At: p.Now, RunID: p.RunID, StepID: p.StepID, Workflow: p.Workflow, Entity: p.Key, StepName: p.StepName,
			EffectKey: p.EffectKey, Actor: p.Actor}
		if !slices.Contains(p.From, current) {
			res = &store.TransitionResult{From: current, State: current}
			ev.Type, ev.Reason = store.EventEntityRefused, store.ReasonTransitionInvalid
			ev.Detail = detail(map[string]any{"entity": p.Key, "state": current, "allowed_from": p.From, "to": p.To})
			t.event(ev)
			return nil
		}
		tag, err := t.Exec(ctx, `INSERT INTO entities AS e (entity_key, state, version, run_id, effect_key, updated_at) VALUES ($1, $2, 1, $3, $4, $5)
			ON CONFLICT (entity_key) DO UPDATE SET state = excluded.state, version = e.version + 1, run_id = excluded.run_id,
				effect_key = excluded.effect_key, updated_at = excluded.updated_at
			WHERE e.version = $6`, p.Key, p.To, p.RunID, p.EffectKey, p.Now, version)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errConflict // another transaction created the entity meanwhile
		}
		if _, err := t.Exec(ctx, `INSERT INTO entity_transitions (effect_key, entity_key, from_state, to_state, run_id, step_id, at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.EffectKey, p.Key, current, p.To, p.RunID, p.StepID, p.Now); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23505" {
				return errConflict // the same effect key applied to a new entity meanwhile
			}
			return err
		}
		res = &store.TransitionResult{Applied: true, From: current, State: p.To}
		ev.Type = store.EventEntityTransitioned
		ev.Detail = detail(map[string]any{"entity": p.Key, "from": current, "to": p.To, "version": version + 1})
		t.event(ev)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// EntityGetByKey implements store.EntityStore.
func (s *Store) EntityGetByKey(ctx context.Context, key string) (*store.Entity, error) {
	var e store.Entity
	err := s.read(ctx, "entity get", func(q querier) error {
		var updated time.Time
		err := q.QueryRow(ctx, `SELECT entity_key, state, version, run_id, effect_key, updated_at FROM entities WHERE entity_key = $1`, key).
			Scan(&e.Key, &e.State, &e.Version, &e.RunID, &e.EffectKey, &updated)
		e.UpdatedAt = updated.UTC()
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: entity %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}
