package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

var _ store.ControlStore = (*Store)(nil)

// RunCancel implements store.ControlStore. It locks every step of the run, then the run
// (the order StepRecord follows), so no worker changes them while it decides.
func (s *Store) RunCancel(ctx context.Context, p store.RunCancelParams) (*store.RunCancelResult, error) {
	if p.Actor == "" {
		return nil, errors.New("postgres: run cancel: the actor is required")
	}
	var res *store.RunCancelResult
	err := s.tx(ctx, "run cancel", func(t *txn) error {
		res = &store.RunCancelResult{}
		rows, err := t.Query(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = $1 ORDER BY s.id FOR UPDATE`, p.RunID)
		if err != nil {
			return err
		}
		steps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Step, error) { return scanStep(row) })
		if err != nil {
			return err
		}
		run, err := scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1 FOR NO KEY UPDATE`, p.RunID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %d: %w", p.RunID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var ids, mayExist []int64
		var releaseKeys []string
		var releaseIDs []int64
		var cancelled, running []string
		for _, st := range steps {
			if !store.Cancellable(st) {
				continue
			}
			ids = append(ids, st.ID)
			keep := store.CancelKeepsKey(st)
			reason := store.CancelReason(st)
			if reason == store.ReasonCancelledEffectMayExist {
				mayExist = append(mayExist, st.ID)
			}
			if st.EffectKey != "" && !keep {
				releaseKeys, releaseIDs = append(releaseKeys, st.EffectKey), append(releaseIDs, st.ID)
			}
			d := map[string]any{"previous_state": string(st.State), "key_held": keep && st.EffectKey != ""}
			if p.Note != "" {
				d["note"] = clean(p.Note)
			}
			prev := st.State
			st.State, st.Reason = store.StateCancelled, reason
			t.event(store.StepEvent(store.EventStepCancelled, p.Now, run, st, p.Actor, reason, d))
			if prev == store.StateProcessing {
				running = append(running, st.Name)
				res.Running = append(res.Running, st)
			} else {
				cancelled = append(cancelled, st.Name)
				res.Cancelled = append(res.Cancelled, st)
			}
		}
		if len(ids) == 0 {
			return fmt.Errorf("run %d is %s; no step is left to cancel: %w", p.RunID, run.State, store.ErrRunFinished)
		}
		// A running step keeps its lease owner and attempt, so that the attempt's result is
		// recognised and recorded when it comes.
		if _, err := t.Exec(ctx, `UPDATE steps SET state = 'cancelled', reason = CASE WHEN id = ANY($4) THEN $5 ELSE $1 END, updated_at = $2
			WHERE id = ANY($3)`, store.ReasonRunCancelled, p.Now, ids, mayExist, store.ReasonCancelledEffectMayExist); err != nil {
			return err
		}
		if len(releaseKeys) > 0 {
			if _, err := t.Exec(ctx, `DELETE FROM effects e USING unnest($1::text[], $2::bigint[]) AS r(k, id)
				WHERE e.effect_key = r.k AND e.step_id = r.id AND e.state = 'in_flight'`, releaseKeys, releaseIDs); err != nil {
				return err
			}
			t.notify = true // a step waiting for a released key may go on
		}
		note := p
		note.Note = clean(p.Note)
		t.event(store.RunCancelEvent(note, run, cancelled, running))
		if err := refreshRunState(ctx, t, run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		res.Run, err = scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1`, run.ID))
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// WorkflowPause implements store.ControlStore.
func (s *Store) WorkflowPause(ctx context.Context, p store.WorkflowPauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	p.Note = clean(p.Note)
	changed := false
	err := s.tx(ctx, "workflow pause", func(t *txn) error {
		tag, err := t.Exec(ctx, `INSERT INTO workflow_pauses (workflow, paused_at, actor, note) VALUES ($1, $2, $3, $4) ON CONFLICT (workflow) DO NOTHING`,
			p.Workflow, p.Now, clean(p.Actor), p.Note)
		if err != nil {
			return err
		}
		if changed = tag.RowsAffected() == 1; changed {
			t.event(store.WorkflowPauseEvent(store.EventWorkflowPaused, p))
		}
		return nil
	})
	return changed, err
}

// WorkflowResume implements store.ControlStore.
func (s *Store) WorkflowResume(ctx context.Context, p store.WorkflowPauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	p.Note = clean(p.Note)
	changed := false
	err := s.tx(ctx, "workflow resume", func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM workflow_pauses WHERE workflow = $1`, p.Workflow)
		if err != nil {
			return err
		}
		if changed = tag.RowsAffected() == 1; changed {
			t.event(store.WorkflowPauseEvent(store.EventWorkflowResumed, p))
			t.notify = true // its steps are due again
		}
		return nil
	})
	return changed, err
}

// WorkflowPauseList implements store.ControlStore.
func (s *Store) WorkflowPauseList(ctx context.Context) ([]store.WorkflowPause, error) {
	var out []store.WorkflowPause
	err := s.read(ctx, "workflow pause list", func(q querier) error {
		rows, err := q.Query(ctx, `SELECT workflow, paused_at, actor, note FROM workflow_pauses ORDER BY workflow`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.WorkflowPause, error) {
			var wp store.WorkflowPause
			err := row.Scan(&wp.Workflow, &wp.Since, &wp.Actor, &wp.Note)
			wp.Since = wp.Since.UTC()
			return wp, err
		})
		return err
	})
	return out, err
}
