package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/store"
)

var _ store.ReviewStore = (*Store)(nil)

// reviewColumns are a step, its run and its latest ended attempt, as a review item.
const reviewColumns = `s.id, s.run_id, s.workflow, s.name, s.state, s.effect_key, s.reason, s.last_error, s.last_outcome,
	s.attempt, s.attempt_base, s.updated_at, r.run_key, r.entity, r.created_at,
	coalesce(a.response_status, 0), coalesce(a.response_excerpt, '')`

const reviewFrom = ` FROM steps s JOIN runs r ON r.id = s.run_id
	LEFT JOIN attempts a ON a.id = (SELECT la.id FROM attempts la WHERE la.step_id = s.id AND la.ended_at > 0 ORDER BY la.number DESC LIMIT 1)`

func scanReviewItem(sc scanner) (*store.ReviewItem, error) {
	var it store.ReviewItem
	var state, outcome string
	var since, created int64
	if err := sc.Scan(&it.StepID, &it.RunID, &it.Workflow, &it.StepName, &state, &it.EffectKey, &it.Reason, &it.LastError, &outcome,
		&it.Attempts, &it.AttemptBase, &since, &it.RunKey, &it.Entity, &created, &it.ResponseStatus, &it.ResponseExcerpt); err != nil {
		return nil, err
	}
	it.State, it.LastOutcome = store.State(state), store.Outcome(outcome)
	it.Since, it.RunCreatedAt = fromTS(since), fromTS(created)
	return &it, nil
}

// ReviewList implements store.ReviewStore.
func (s *Store) ReviewList(ctx context.Context, p store.ReviewListParams) ([]*store.ReviewItem, error) {
	where := []string{"s.state = 'needs_review'"}
	var args []any
	add := func(cond string, v any) {
		where, args = append(where, cond), append(args, v)
	}
	if p.Workflow != "" {
		add("s.workflow = ?", p.Workflow)
	}
	if p.StepName != "" {
		add("s.name = ?", p.StepName)
	}
	if p.Reason != "" {
		add("s.reason = ?", p.Reason)
	}
	if p.Entity != "" {
		add("r.entity = ?", p.Entity)
	}
	if p.RunID > 0 {
		add("s.run_id = ?", p.RunID)
	}
	if !p.ParkedBefore.IsZero() {
		add("s.updated_at < ?", ts(p.ParkedBefore))
	}
	if p.AfterStepID > 0 {
		add("s.id > ?", p.AfterStepID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, `SELECT `+reviewColumns+reviewFrom+` WHERE `+strings.Join(where, " AND ")+` ORDER BY s.id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: review list: %w", err)
	}
	defer rows.Close()
	var out []*store.ReviewItem
	for rows.Next() {
		it, err := scanReviewItem(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: review list: %w", err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// ReviewGetByStep implements store.ReviewStore.
func (s *Store) ReviewGetByStep(ctx context.Context, runID int64, step string) (*store.ReviewItem, error) {
	it, err := scanReviewItem(s.r.QueryRowContext(ctx, `SELECT `+reviewColumns+reviewFrom+` WHERE s.run_id = ? AND s.name = ?`, runID, step))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: review get: %w", missing(ctx, s.r, runID, step))
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: review get: %w", err)
	}
	return it, nil
}

// missing explains which of run and step does not exist, wrapping store.ErrNotFound.
func missing(ctx context.Context, q queryRower, runID int64, step string) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, runID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %d: %w", runID, store.ErrNotFound)
	}
	return fmt.Errorf("run %d has no step %q: %w", runID, step, store.ErrNotFound)
}

// reviewTarget loads the run and the step an action is about, and requires the step to
// be in needs_review.
func reviewTarget(ctx context.Context, tx dbtx, a store.ReviewAction) (*store.Run, *store.Step, error) {
	if a.Actor == "" {
		return nil, nil, errors.New("the actor is required")
	}
	st, err := scanStep(tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = ? AND s.name = ?`, a.RunID, a.Step))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, missing(ctx, tx, a.RunID, a.Step)
	}
	if err != nil {
		return nil, nil, err
	}
	run, err := runByID(ctx, tx, st.RunID)
	if err != nil {
		return nil, nil, err
	}
	if st.State != store.StateNeedsReview {
		return nil, nil, fmt.Errorf("run %d step %q is %s, not needs_review: %w", a.RunID, a.Step, st.State, store.ErrNotInReview)
	}
	if err := store.CheckVersion(st, a.Version); err != nil {
		return nil, nil, err
	}
	return run, st, nil
}

// reviewDetail is the detail every review event carries.
func reviewDetail(note string, st *store.Step, extra map[string]any) map[string]any {
	d := map[string]any{"previous_reason": st.Reason}
	if note != "" {
		d["note"] = note
	}
	if st.LastError != "" {
		d["last_error"] = st.LastError
	}
	return merge(d, extra)
}

// reviewResult reads back the step and its run's state after an action.
func reviewResult(ctx context.Context, tx dbtx, stepID int64, ledger string) (*store.ReviewResult, error) {
	st, err := scanStep(tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.id = ?`, stepID))
	if err != nil {
		return nil, err
	}
	var state string
	if err := tx.QueryRowContext(ctx, `SELECT state FROM runs WHERE id = ?`, st.RunID).Scan(&state); err != nil {
		return nil, err
	}
	return &store.ReviewResult{Step: st, RunState: store.State(state), Ledger: ledger}, nil
}

// ReviewRetry implements store.ReviewStore.
func (s *Store) ReviewRetry(ctx context.Context, p store.ReviewRetryParams) (*store.ReviewResult, error) {
	var res *store.ReviewResult
	err := s.write(ctx, "review retry", func(w *writeTx) error {
		tx := w.tx
		run, st, err := reviewTarget(ctx, tx, p.ReviewAction)
		if err != nil {
			return err
		}
		if store.StepEffectMayExist(st) && !p.SendAgain {
			return fmt.Errorf("run %d step %q (reason %s): %w", p.RunID, p.Step, st.Reason, store.ErrEffectMayExist)
		}
		state := store.StateRetrying
		if st.Attempt == 0 {
			state = store.StatePending
		}
		now := ts(p.Now)
		r, err := tx.ExecContext(ctx, `UPDATE steps SET state = ?, next_at = ?, attempt_base = attempt, reason = ?, lease_owner = '', lease_expires_at = 0,
			updated_at = ? WHERE id = ? AND state = 'needs_review'`, string(state), now, store.ReasonManualRetry, now, st.ID)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("run %d step %q changed meanwhile: %w", p.RunID, p.Step, store.ErrReviewConflict)
		}
		d := reviewDetail(p.Note, st, map[string]any{"send_again": p.SendAgain, "attempt_base": st.Attempt})
		w.event(store.StepEvent(store.EventReviewRetried, p.Now, run, st, p.Actor, store.ReasonManualRetry, d))
		if err := w.refresh(run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		res, err = reviewResult(ctx, tx, st.ID, "")
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ReviewResolve implements store.ReviewStore.
func (s *Store) ReviewResolve(ctx context.Context, p store.ReviewResolveParams) (*store.ReviewResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	var res *store.ReviewResult
	err := s.write(ctx, "review resolve", func(w *writeTx) error {
		tx := w.tx
		run, st, err := reviewTarget(ctx, tx, p.ReviewAction)
		if err != nil {
			return err
		}
		if store.StepEffectMayExist(st) && !p.ItHappened {
			return fmt.Errorf("run %d step %q (reason %s): %w", p.RunID, p.Step, st.Reason, store.ErrEffectMayExist)
		}
		now := ts(p.Now)
		output := []byte(p.Output)
		ledger := store.LedgerNone
		if st.EffectKey != "" {
			eff, err := getEffect(ctx, tx, st.EffectKey)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				// A free key: the step takes it, completed, in its row.
				ledger = store.LedgerCompleted
				if output == nil {
					output = []byte("null")
				}
				if _, err := tx.ExecContext(ctx, `UPDATE steps SET key_slot = 0, key_state = 'completed', key_taken_at = ?, key_completed_at = ?,
					key_retain_until = 0, key_result = NULL WHERE id = ?`, now, now, st.ID); err != nil {
					return err
				}
			case err != nil:
				return err
			case eff.State == store.EffectCompleted:
				ledger = store.LedgerKept
				if output == nil {
					output = []byte(eff.Result)
				}
			case eff.StepID == st.ID:
				// The step holds it in flight, in its row (or, written before migration
				// 0012, in effects): completed with the output.
				ledger = store.LedgerCompleted
				if output == nil {
					output = []byte("null")
				}
				if _, err := tx.ExecContext(ctx, `UPDATE steps SET key_state = 'completed', key_completed_at = ?, key_result = NULL
					WHERE id = ? AND key_slot = 0 AND key_state = 'in_flight'`, now, st.ID); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE effects SET state = 'completed', result = ?, completed_at = ? WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`,
					output, now, st.EffectKey, st.ID); err != nil {
					return err
				}
			default:
				return fmt.Errorf("effect key %q is in flight in run %d step %q; resolve this step when that one has finished: %w",
					st.EffectKey, eff.RunID, eff.StepName, store.ErrReviewConflict)
			}
		}
		if output == nil {
			output = []byte("null")
		}
		r, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'completed', output = ?, reason = ?, lease_owner = '', lease_expires_at = 0, updated_at = ?
			WHERE id = ? AND state = 'needs_review'`, output, store.ReasonResolvedByHand, now, st.ID)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("run %d step %q changed meanwhile: %w", p.RunID, p.Step, store.ErrReviewConflict)
		}
		d := reviewDetail(p.Note, st, map[string]any{"ledger": ledger, "it_happened": p.ItHappened, "output_given": p.Output != nil})
		w.event(store.StepEvent(store.EventReviewResolved, p.Now, run, st, p.Actor, store.ReasonResolvedByHand, d))
		if err := w.release(run.ID, st.Name, now); err != nil {
			return err
		}
		if err := w.refresh(run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		res, err = reviewResult(ctx, tx, st.ID, ledger)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ReviewAbandon implements store.ReviewStore.
func (s *Store) ReviewAbandon(ctx context.Context, p store.ReviewAction) (*store.ReviewResult, error) {
	var res *store.ReviewResult
	err := s.write(ctx, "review abandon", func(w *writeTx) error {
		tx := w.tx
		run, st, err := reviewTarget(ctx, tx, p)
		if err != nil {
			return err
		}
		if store.StepEffectMayExist(st) {
			return fmt.Errorf("run %d step %q (reason %s): %w", p.RunID, p.Step, st.Reason, store.ErrEffectMayExist)
		}
		now := ts(p.Now)
		r, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'failed', reason = ?, lease_owner = '', lease_expires_at = 0, updated_at = ?
			WHERE id = ? AND state = 'needs_review'`, store.ReasonAbandoned, now, st.ID)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("run %d step %q changed meanwhile: %w", p.RunID, p.Step, store.ErrReviewConflict)
		}
		if st.EffectKey != "" {
			if err := w.releaseKey(st); err != nil {
				return err
			}
		}
		w.event(store.StepEvent(store.EventReviewAbandoned, p.Now, run, st, p.Actor, store.ReasonAbandoned, reviewDetail(p.Note, st, nil)))
		if err := w.cancelDependents(run, p.Now); err != nil {
			return err
		}
		if err := w.refresh(run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		res, err = reviewResult(ctx, tx, st.ID, "")
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// RunReplay implements store.ReviewStore.
func (s *Store) RunReplay(ctx context.Context, p store.RunReplayParams) (*store.RunReplayResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	var res *store.RunReplayResult
	err := s.write(ctx, "run replay", func(w *writeTx) error {
		tx := w.tx
		run, err := runByID(ctx, tx, p.RunID)
		if err != nil {
			return err
		}
		if p.Input != nil && !bytes.Equal(run.Input, p.BaseInput) {
			return fmt.Errorf("the input of run %d changed since the correction was computed; compute it again: %w", p.RunID, store.ErrReviewConflict)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = ? ORDER BY s.id`, p.RunID)
		if err != nil {
			return err
		}
		var steps []*store.Step
		for rows.Next() {
			st, err := scanStep(rows)
			if err != nil {
				rows.Close()
				return err
			}
			steps = append(steps, st)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		reset, err := store.ReplayCheck(p, steps)
		if err != nil {
			return err
		}
		now := ts(p.Now)
		res = &store.RunReplayResult{}
		if p.Input != nil {
			var rev int
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(revision), 0) + 1 FROM run_revisions WHERE run_id = ?`, run.ID).Scan(&rev); err != nil {
				return err
			}
			d := map[string]any{"revision": rev, "fields": store.MergePatchPaths(p.Diff)}
			if p.Note != "" {
				d["note"] = p.Note
			}
			if p.Entity != run.Entity {
				d["entity_before"], d["entity_after"] = run.Entity, p.Entity
			}
			ev := &store.Event{At: p.Now, Type: store.EventRunInputCorrected, RunID: run.ID, Workflow: run.Workflow,
				Entity: p.Entity, Actor: p.Actor, Reason: store.ReasonCorrection, Detail: detail(d)}
			w.event(ev)
			// The revision names its event: the events derived before it name the entity
			// before, those after it the entity after.
			if _, err := tx.ExecContext(ctx, `INSERT INTO run_revisions (run_id, revision, input_before, input_after, entity_before, entity_after, diff, actor, note, at, event_id)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, run.ID, rev, []byte(run.Input), []byte(p.Input), run.Entity, p.Entity, string(p.Diff), p.Actor, p.Note, now, ev.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET input = ?, entity = ?, updated_at = ? WHERE id = ?`, []byte(p.Input), p.Entity, now, run.ID); err != nil {
				return err
			}
			run.Input, run.Entity = p.Input, p.Entity
			res.Revision = rev
		}
		waiting := store.ReplayWaiting(steps)
		for _, st := range reset {
			r, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'pending', waiting = ?, next_at = ?, attempt_base = attempt, reason = ?,
				lease_owner = '', lease_expires_at = 0, updated_at = ? WHERE id = ? AND state = ?`,
				waiting[st.Name], now, store.ReasonReplay, now, st.ID, string(st.State))
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n != 1 {
				return fmt.Errorf("step %q changed meanwhile: %w", st.Name, store.ErrReviewConflict)
			}
			d := reviewDetail(p.Note, st, map[string]any{"previous_state": string(st.State)})
			if res.Revision > 0 {
				d["revision"] = res.Revision
			}
			w.event(store.StepEvent(store.EventReviewReplayed, p.Now, run, st, p.Actor, store.ReasonReplay, d))
		}
		if err := w.skipDependents(run, p.Now); err != nil {
			return err
		}
		if err := w.refresh(run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		if res.Run, err = runByID(ctx, tx, run.ID); err != nil {
			return err
		}
		for _, st := range reset {
			after, err := scanStep(tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.id = ?`, st.ID))
			if err != nil {
				return err
			}
			res.Reset = append(res.Reset, after)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// RunRevisionList implements store.ReviewStore.
func (s *Store) RunRevisionList(ctx context.Context, runID int64) ([]*store.RunRevision, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT run_id, revision, input_before, input_after, entity_before, entity_after, diff, actor, note, at
		FROM run_revisions WHERE run_id = ? ORDER BY revision`, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run revision list: %w", err)
	}
	defer rows.Close()
	var out []*store.RunRevision
	for rows.Next() {
		var rv store.RunRevision
		var before, after []byte
		var diff string
		var at int64
		if err := rows.Scan(&rv.RunID, &rv.Revision, &before, &after, &rv.EntityBefore, &rv.EntityAfter, &diff, &rv.Actor, &rv.Note, &at); err != nil {
			return nil, fmt.Errorf("sqlite: run revision list: %w", err)
		}
		rv.InputBefore, rv.InputAfter, rv.Diff, rv.At = json.RawMessage(before), json.RawMessage(after), json.RawMessage(diff), fromTS(at)
		out = append(out, &rv)
	}
	return out, rows.Err()
}
