package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

var _ store.ControlStore = (*Store)(nil)

// RunCancel implements store.ControlStore.
func (s *Store) RunCancel(ctx context.Context, p store.RunCancelParams) (*store.RunCancelResult, error) {
	if p.Actor == "" {
		return nil, errors.New("sqlite: run cancel: the actor is required")
	}
	var res *store.RunCancelResult
	err := s.write(ctx, "run cancel", func(w *writeTx) error {
		tx := w.tx
		run, err := runByID(ctx, tx, p.RunID)
		if err != nil {
			return err
		}
		steps, err := stepsOfRun(ctx, tx, p.RunID)
		if err != nil {
			return err
		}
		plan, err := store.PlanCancel(p, run, steps)
		if err != nil {
			return err
		}
		res = plan.Result
		now := ts(p.Now)
		for _, c := range plan.Steps {
			r, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'cancelled', reason = ?, updated_at = ? WHERE id = ? AND state = ?`,
				c.Step.Reason, now, c.Step.ID, string(c.Prev))
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n != 1 {
				return fmt.Errorf("step %q changed meanwhile: %w", c.Step.Name, store.ErrReviewConflict)
			}
			if c.Release {
				if err := w.releaseKey(c.Step); err != nil {
					return err
				}
			}
		}
		for _, e := range plan.Events {
			w.event(e)
		}
		if err := w.refresh(run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		res.Run, err = runByID(ctx, tx, run.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// stepsOfRun reads a run's steps in insertion order.
func stepsOfRun(ctx context.Context, tx dbtx, runID int64) ([]*store.Step, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = ? ORDER BY s.id`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var steps []*store.Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, rows.Err()
}

// WorkflowPause implements store.ControlStore.
func (s *Store) WorkflowPause(ctx context.Context, p store.WorkflowPauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	changed := false
	err := s.write(ctx, "workflow pause", func(w *writeTx) error {
		r, err := w.tx.ExecContext(ctx, `INSERT INTO workflow_pauses (workflow, paused_at, actor, note) VALUES (?, ?, ?, ?) ON CONFLICT (workflow) DO NOTHING`,
			p.Workflow, ts(p.Now), p.Actor, p.Note)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		if changed = n == 1; changed {
			w.event(store.WorkflowPauseEvent(store.EventWorkflowPaused, p))
		}
		return w.flush()
	})
	return changed, err
}

// WorkflowResume implements store.ControlStore.
func (s *Store) WorkflowResume(ctx context.Context, p store.WorkflowPauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	changed := false
	err := s.write(ctx, "workflow resume", func(w *writeTx) error {
		r, err := w.tx.ExecContext(ctx, `DELETE FROM workflow_pauses WHERE workflow = ?`, p.Workflow)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		if changed = n == 1; changed {
			w.event(store.WorkflowPauseEvent(store.EventWorkflowResumed, p))
		}
		return w.flush()
	})
	return changed, err
}

// WorkflowPauseList implements store.ControlStore.
func (s *Store) WorkflowPauseList(ctx context.Context) ([]store.WorkflowPause, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT workflow, paused_at, actor, note FROM workflow_pauses ORDER BY workflow`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: workflow pause list: %w", err)
	}
	defer rows.Close()
	var out []store.WorkflowPause
	for rows.Next() {
		var wp store.WorkflowPause
		var at int64
		if err := rows.Scan(&wp.Workflow, &at, &wp.Actor, &wp.Note); err != nil {
			return nil, fmt.Errorf("sqlite: workflow pause list: %w", err)
		}
		wp.Since = fromTS(at)
		out = append(out, wp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: workflow pause list: %w", err)
	}
	return out, nil
}
