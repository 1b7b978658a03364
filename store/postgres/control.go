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
		run, steps, err := lockRun(ctx, t, p.RunID)
		if err != nil {
			return err
		}
		note := p
		note.Note = clean(p.Note)
		plan, err := store.PlanCancel(note, run, steps)
		if err != nil {
			return err
		}
		res = plan.Result
		var ids, mayExist []int64
		var relKeys []string
		var releaseIDs []int64
		for _, c := range plan.Steps {
			ids = append(ids, c.Step.ID)
			if c.Step.Reason == store.ReasonCancelledEffectMayExist {
				mayExist = append(mayExist, c.Step.ID)
			}
			if c.Release {
				relKeys, releaseIDs = append(relKeys, c.Step.EffectKey), append(releaseIDs, c.Step.ID)
			}
		}
		// A running step keeps its lease owner and attempt, so that the attempt's result is
		// recognised and recorded when it comes.
		if _, err := t.Exec(ctx, `UPDATE steps SET state = 'cancelled', reason = CASE WHEN id = ANY($4) THEN $5 ELSE $1 END, updated_at = $2
			WHERE id = ANY($3)`, store.ReasonRunCancelled, p.Now, ids, mayExist, store.ReasonCancelledEffectMayExist); err != nil {
			return err
		}
		if len(relKeys) > 0 {
			if err := releaseKeys(ctx, t, relKeys, releaseIDs); err != nil {
				return err
			}
			t.notify = true // a step waiting for a released key may go on
		}
		for _, e := range plan.Events {
			t.event(e)
		}
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

// lockRun reads a run and its steps for a change decided in Go: every step locked first,
// then the run (the order StepRecord follows), so that no worker changes them meanwhile.
func lockRun(ctx context.Context, t *txn, runID int64) (*store.Run, []*store.Step, error) {
	rows, err := t.Query(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = $1 ORDER BY s.id FOR UPDATE`, runID)
	if err != nil {
		return nil, nil, err
	}
	steps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Step, error) { return scanStep(row) })
	if err != nil {
		return nil, nil, err
	}
	run, err := scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1 FOR NO KEY UPDATE`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("run %d: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return nil, nil, err
	}
	return run, steps, nil
}
