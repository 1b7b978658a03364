package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

var _ store.ReviewStore = (*Store)(nil)

// reviewColumns are a step, its run and its latest ended attempt, as a review item.
const reviewColumns = `s.id, s.run_id, s.workflow, s.name, s.state, s.effect_key, s.reason, s.last_error, s.last_outcome,
	s.attempt, s.attempt_base, s.updated_at, r.run_key, r.entity, r.created_at,
	coalesce(a.response_status, 0), coalesce(a.response_excerpt, '')`

const reviewFrom = ` FROM steps s JOIN runs r ON r.id = s.run_id
	LEFT JOIN attempts a ON a.id = (SELECT la.id FROM attempts la WHERE la.step_id = s.id AND la.ended_at IS NOT NULL ORDER BY la.number DESC LIMIT 1)`

func scanReviewItem(row pgx.Row) (*store.ReviewItem, error) {
	var it store.ReviewItem
	var state, outcome string
	var since, created time.Time
	if err := row.Scan(&it.StepID, &it.RunID, &it.Workflow, &it.StepName, &state, &it.EffectKey, &it.Reason, &it.LastError, &outcome,
		&it.Attempts, &it.AttemptBase, &since, &it.RunKey, &it.Entity, &created, &it.ResponseStatus, &it.ResponseExcerpt); err != nil {
		return nil, err
	}
	it.State, it.LastOutcome = store.State(state), store.Outcome(outcome)
	it.Since, it.RunCreatedAt = since.UTC(), created.UTC()
	return &it, nil
}

// ReviewList implements store.ReviewStore.
func (s *Store) ReviewList(ctx context.Context, p store.ReviewListParams) ([]*store.ReviewItem, error) {
	where := []string{"s.state = 'needs_review'"}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
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
		add("s.updated_at < ?", p.ParkedBefore)
	}
	if p.AfterStepID > 0 {
		add("s.id > ?", p.AfterStepID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	q := `SELECT ` + reviewColumns + reviewFrom + ` WHERE ` + strings.Join(where, " AND ") + ` ORDER BY s.id LIMIT $` + strconv.Itoa(len(args))
	var out []*store.ReviewItem
	err := s.read(ctx, "review list", func(qr querier) error {
		rows, err := qr.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ReviewItem, error) { return scanReviewItem(row) })
		return err
	})
	return out, err
}

// ReviewGetByStep implements store.ReviewStore.
func (s *Store) ReviewGetByStep(ctx context.Context, runID int64, step string) (*store.ReviewItem, error) {
	var it *store.ReviewItem
	err := s.read(ctx, "review get", func(q querier) error {
		var err error
		it, err = scanReviewItem(q.QueryRow(ctx, `SELECT `+reviewColumns+reviewFrom+` WHERE s.run_id = $1 AND s.name = $2`, runID, step))
		if errors.Is(err, pgx.ErrNoRows) {
			return missing(ctx, q, runID, step)
		}
		return err
	})
	return it, err
}

// missing explains which of run and step does not exist, wrapping store.ErrNotFound.
func missing(ctx context.Context, q querier, runID int64, step string) error {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM runs WHERE id = $1`, runID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %d: %w", runID, store.ErrNotFound)
	}
	return fmt.Errorf("run %d has no step %q: %w", runID, step, store.ErrNotFound)
}

// reviewTarget locks the step an action is about, then its run (the order in which
// StepRecord locks them), and requires the step to be in needs_review.
func reviewTarget(ctx context.Context, t *txn, a store.ReviewAction) (*store.Run, *store.Step, error) {
	if a.Actor == "" {
		return nil, nil, errors.New("the actor is required")
	}
	st, err := scanStep(t.QueryRow(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = $1 AND s.name = $2 FOR UPDATE`, a.RunID, a.Step))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, missing(ctx, t, a.RunID, a.Step)
	}
	if err != nil {
		return nil, nil, err
	}
	run, err := scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1 FOR NO KEY UPDATE`, st.RunID))
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
		d["note"] = clean(note)
	}
	if st.LastError != "" {
		d["last_error"] = st.LastError
	}
	return merge(d, extra)
}

// reviewResult reads back the step and its run's state after an action.
func reviewResult(ctx context.Context, t *txn, stepID int64, ledger string) (*store.ReviewResult, error) {
	st, err := scanStep(t.QueryRow(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.id = $1`, stepID))
	if err != nil {
		return nil, err
	}
	var state string
	if err := t.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1`, st.RunID).Scan(&state); err != nil {
		return nil, err
	}
	return &store.ReviewResult{Step: st, RunState: store.State(state), Ledger: ledger}, nil
}

// ReviewRetry implements store.ReviewStore.
func (s *Store) ReviewRetry(ctx context.Context, p store.ReviewRetryParams) (*store.ReviewResult, error) {
	var res *store.ReviewResult
	err := s.tx(ctx, "review retry", func(t *txn) error {
		run, st, err := reviewTarget(ctx, t, p.ReviewAction)
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
		if _, err := t.Exec(ctx, `UPDATE steps SET state = $1, next_at = $2, attempt_base = attempt, reason = $3, lease_owner = '', lease_expires_at = NULL,
			updated_at = $2 WHERE id = $4`, string(state), p.Now, store.ReasonManualRetry, st.ID); err != nil {
			return err
		}
		d := reviewDetail(p.Note, st, map[string]any{"send_again": p.SendAgain, "attempt_base": st.Attempt})
		t.event(store.StepEvent(store.EventReviewRetried, p.Now, run, st, p.Actor, store.ReasonManualRetry, d))
		t.notify = true
		if err := refreshRunState(ctx, t, run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		res, err = reviewResult(ctx, t, st.ID, "")
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
		return nil, fmt.Errorf("postgres: %w", err)
	}
	var res *store.ReviewResult
	err := s.tx(ctx, "review resolve", func(t *txn) error {
		run, st, err := reviewTarget(ctx, t, p.ReviewAction)
		if err != nil {
			return err
		}
		if store.StepEffectMayExist(st) && !p.ItHappened {
			return fmt.Errorf("run %d step %q (reason %s): %w", p.RunID, p.Step, st.Reason, store.ErrEffectMayExist)
		}
		output := []byte(p.Output)
		ledger := store.LedgerNone
		if st.EffectKey != "" {
			// The key is locked first: if it is free, the step takes it, completed.
			h, err := keyHolder(ctx, t, st.EffectKey, true)
			if err != nil {
				return err
			}
			switch eff := h.Effect; {
			case eff == nil:
				ledger = store.LedgerCompleted
				if _, err := t.Exec(ctx, `UPDATE steps SET key_slot = 0, key_state = 'completed', key_taken_at = $1, key_completed_at = $1,
					key_retain_until = NULL, key_result = NULL WHERE id = $2`, p.Now, st.ID); err != nil {
					return err
				}
			case eff.State == store.EffectCompleted:
				ledger = store.LedgerKept
				if output == nil {
					output = []byte(eff.Result)
				}
			case eff.StepID == st.ID && h.inStep:
				ledger = store.LedgerCompleted
				if _, err := t.Exec(ctx, `UPDATE steps SET key_state = 'completed', key_completed_at = $1, key_result = NULL
					WHERE id = $2 AND key_slot = 0 AND key_state = 'in_flight'`, p.Now, st.ID); err != nil {
					return err
				}
			case eff.StepID == st.ID:
				// Its row in effects (written before migration 0014).
				ledger = store.LedgerCompleted
				if _, err := t.Exec(ctx, `UPDATE effects SET state = 'completed', result = $1, completed_at = $2 WHERE effect_key = $3 AND step_id = $4 AND state = 'in_flight'`,
					orNull(output), p.Now, st.EffectKey, st.ID); err != nil {
					return err
				}
			default:
				return fmt.Errorf("effect key %q is in flight in run %d step %q; resolve this step when that one has finished: %w",
					st.EffectKey, eff.RunID, eff.StepName, store.ErrReviewConflict)
			}
		}
		output = orNull(output)
		if _, err := t.Exec(ctx, `UPDATE steps SET state = 'completed', output = $1, reason = $2, lease_owner = '', lease_expires_at = NULL, updated_at = $3
			WHERE id = $4`, output, store.ReasonResolvedByHand, p.Now, st.ID); err != nil {
			return err
		}
		d := reviewDetail(p.Note, st, map[string]any{"ledger": ledger, "it_happened": p.ItHappened, "output_given": p.Output != nil})
		t.event(store.StepEvent(store.EventReviewResolved, p.Now, run, st, p.Actor, store.ReasonResolvedByHand, d))
		due, err := releaseDependents(ctx, t, run.ID, st.Name, p.Now)
		if err != nil {
			return err
		}
		t.notify = t.notify || due > 0
		if err := refreshRunState(ctx, t, run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		res, err = reviewResult(ctx, t, st.ID, ledger)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// orNull returns b, or the JSON null for nil.
func orNull(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

// ReviewAbandon implements store.ReviewStore.
func (s *Store) ReviewAbandon(ctx context.Context, p store.ReviewAction) (*store.ReviewResult, error) {
	var res *store.ReviewResult
	err := s.tx(ctx, "review abandon", func(t *txn) error {
		run, st, err := reviewTarget(ctx, t, p)
		if err != nil {
			return err
		}
		if store.StepEffectMayExist(st) {
			return fmt.Errorf("run %d step %q (reason %s): %w", p.RunID, p.Step, st.Reason, store.ErrEffectMayExist)
		}
		if _, err := t.Exec(ctx, `UPDATE steps SET state = 'failed', reason = $1, lease_owner = '', lease_expires_at = NULL, updated_at = $2
			WHERE id = $3`, store.ReasonAbandoned, p.Now, st.ID); err != nil {
			return err
		}
		if st.EffectKey != "" {
			if err := releaseKeys(ctx, t, []string{st.EffectKey}, []int64{st.ID}); err != nil {
				return err
			}
		}
		t.event(store.StepEvent(store.EventReviewAbandoned, p.Now, run, st, p.Actor, store.ReasonAbandoned, reviewDetail(p.Note, st, nil)))
		if err := cancelDependents(ctx, t, run, p.Now); err != nil {
			return err
		}
		if err := refreshRunState(ctx, t, run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		res, err = reviewResult(ctx, t, st.ID, "")
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// RunReplay implements store.ReviewStore. It locks every step of the run, then the run
// (the order StepRecord follows), so no worker changes them while the replay decides.
func (s *Store) RunReplay(ctx context.Context, p store.RunReplayParams) (*store.RunReplayResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	var res *store.RunReplayResult
	err := s.tx(ctx, "run replay", func(t *txn) error {
		res = nil
		run, steps, err := lockRun(ctx, t, p.RunID)
		if err != nil {
			return err
		}
		if p.Input != nil && !bytes.Equal(run.Input, p.BaseInput) {
			return fmt.Errorf("the input of run %d changed since the correction was computed; compute it again: %w", p.RunID, store.ErrReviewConflict)
		}
		reset, err := store.ReplayCheck(p, steps)
		if err != nil {
			return err
		}
		res = &store.RunReplayResult{}
		if p.Input != nil {
			var rev int
			if err := t.QueryRow(ctx, `SELECT coalesce(max(revision), 0) + 1 FROM run_revisions WHERE run_id = $1`, run.ID).Scan(&rev); err != nil {
				return err
			}
			d := map[string]any{"revision": rev, "fields": store.MergePatchPaths(p.Diff)}
			if p.Note != "" {
				d["note"] = clean(p.Note)
			}
			if p.Entity != run.Entity {
				d["entity_before"], d["entity_after"] = run.Entity, p.Entity
			}
			corrected := t.store(&store.Event{At: p.Now, Type: store.EventRunInputCorrected, RunID: run.ID, Workflow: run.Workflow,
				Entity: p.Entity, Actor: p.Actor, Reason: store.ReasonCorrection, Detail: detail(d)})
			// The revision names its event: the events derived before it name the entity
			// before, those after it the entity after.
			if err := t.drawNow(ctx); err != nil {
				return err
			}
			if _, err := t.Exec(ctx, `INSERT INTO run_revisions (run_id, revision, input_before, input_after, entity_before, entity_after, diff, actor, note, at, event_id)
				VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11)`, run.ID, rev, []byte(run.Input), []byte(p.Input), run.Entity, p.Entity,
				string(jsonbSafe(p.Diff)), clean(p.Actor), clean(p.Note), p.Now, corrected.id); err != nil {
				return err
			}
			if _, err := t.Exec(ctx, `UPDATE runs SET input = $1, entity = $2, updated_at = $3 WHERE id = $4`, []byte(p.Input), p.Entity, p.Now, run.ID); err != nil {
				return err
			}
			run.Input, run.Entity = p.Input, p.Entity
			res.Revision = rev
		}
		waiting := store.ReplayWaiting(steps)
		for _, st := range reset {
			if _, err := t.Exec(ctx, `UPDATE steps SET state = 'pending', waiting = $1, next_at = $2, attempt_base = attempt, reason = $3,
				lease_owner = '', lease_expires_at = NULL, updated_at = $2 WHERE id = $4`,
				waiting[st.Name], p.Now, store.ReasonReplay, st.ID); err != nil {
				return err
			}
			d := reviewDetail(p.Note, st, map[string]any{"previous_state": string(st.State)})
			if res.Revision > 0 {
				d["revision"] = res.Revision
			}
			t.event(store.StepEvent(store.EventReviewReplayed, p.Now, run, st, p.Actor, store.ReasonReplay, d))
		}
		t.notify = true
		if err := skipDependents(ctx, t, run, p.Now); err != nil {
			return err
		}
		if err := refreshRunState(ctx, t, run.ID, p.Now, p.Actor); err != nil {
			return err
		}
		if res.Run, err = scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1`, run.ID)); err != nil {
			return err
		}
		for _, st := range reset {
			after, err := scanStep(t.QueryRow(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.id = $1`, st.ID))
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
	var out []*store.RunRevision
	err := s.read(ctx, "run revision list", func(q querier) error {
		rows, err := q.Query(ctx, `SELECT run_id, revision, input_before, input_after, entity_before, entity_after, diff, actor, note, at
			FROM run_revisions WHERE run_id = $1 ORDER BY revision`, runID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.RunRevision, error) {
			var rv store.RunRevision
			var before, after, diff []byte
			if err := row.Scan(&rv.RunID, &rv.Revision, &before, &after, &rv.EntityBefore, &rv.EntityAfter, &diff, &rv.Actor, &rv.Note, &rv.At); err != nil {
				return nil, err
			}
			rv.InputBefore, rv.InputAfter, rv.Diff, rv.At = before, after, diff, rv.At.UTC()
			return &rv, nil
		})
		return err
	})
	return out, err
}
