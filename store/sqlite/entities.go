package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/onceflow/onceflow/store"
)

var _ store.EntityStore = (*Store)(nil)

// EntityTransition implements store.EntityStore.
func (s *Store) EntityTransition(ctx context.Context, p store.EntityTransitionParams) (*store.TransitionResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	initial := p.Initial
	if initial == "" {
		initial = "new"
	}
	var res *store.TransitionResult
	err := s.write(ctx, "entity transition", func(w *writeTx) error {
		tx := w.tx
		var from, to, entity string
		err := tx.QueryRowContext(ctx, `SELECT entity_key, from_state, to_state FROM entity_transitions WHERE effect_key = ?`, p.EffectKey).Scan(&entity, &from, &to)
		if err == nil {
			if entity != p.Key {
				return fmt.Errorf("effect key %q already transitioned entity %q, not %q", p.EffectKey, entity, p.Key)
			}
			var now string
			if err := tx.QueryRowContext(ctx, `SELECT state FROM entities WHERE entity_key = ?`, p.Key).Scan(&now); err != nil {
				return err
			}
			res = &store.TransitionResult{Applied: true, Replayed: true, From: from, State: now}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		current, version := initial, int64(0)
		err = tx.QueryRowContext(ctx, `SELECT state, version FROM entities WHERE entity_key = ?`, p.Key).Scan(&current, &version)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		ev := &store.Event{At: p.Now, RunID: p.RunID, StepID: p.StepID, Workflow: p.Workflow, Entity: p.Key, StepName: p.StepName,
			EffectKey: p.EffectKey, Actor: p.Actor}
		if !slices.Contains(p.From, current) {
			res = &store.TransitionResult{From: current, State: current}
			ev.Type, ev.Reason = store.EventEntityRefused, store.ReasonTransitionInvalid
			ev.Detail = detail(map[string]any{"entity": p.Key, "state": current, "allowed_from": p.From, "to": p.To})
			w.event(ev)
			return nil
		}
		now := ts(p.Now)
		r, err := tx.ExecContext(ctx, `INSERT INTO entities (entity_key, state, version, run_id, effect_key, updated_at) VALUES (?, ?, 1, ?, ?, ?)
			ON CONFLICT (entity_key) DO UPDATE SET state = excluded.state, version = entities.version + 1, run_id = excluded.run_id,
				effect_key = excluded.effect_key, updated_at = excluded.updated_at
			WHERE entities.version = ?`, p.Key, p.To, p.RunID, p.EffectKey, now, version)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("entity %q changed while being transitioned", p.Key)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO entity_transitions (effect_key, entity_key, from_state, to_state, run_id, step_id, at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.EffectKey, p.Key, current, p.To, p.RunID, p.StepID, now); err != nil {
			return err
		}
		res = &store.TransitionResult{Applied: true, From: current, State: p.To}
		ev.Type = store.EventEntityTransitioned
		ev.Detail = detail(map[string]any{"entity": p.Key, "from": current, "to": p.To, "version": version + 1})
		w.event(ev)
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
	var updated int64
	err := s.r.QueryRowContext(ctx, `SELECT entity_key, state, version, run_id, effect_key, updated_at FROM entities WHERE entity_key = ?`, key).
		Scan(&e.Key, &e.State, &e.Version, &e.RunID, &e.EffectKey, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: entity %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: entity get: %w", err)
	}
	e.UpdatedAt = fromTS(updated)
	return &e, nil
}
