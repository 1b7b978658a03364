package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

const stepColumns = `s.id, s.run_id, s.workflow, s.name, s.needs, s.waiting, s.state, s.effect_key, s.fingerprint, s.attempt,
	s.next_at, s.lease_owner, s.lease_expires_at, s.last_outcome, s.output, s.last_error, s.reason, s.created_at, s.updated_at, s.attempt_base`

func scanStep(sc scanner, extra ...any) (*store.Step, error) {
	var st store.Step
	var needs, state, outcome string
	var output []byte
	var next, lease, created, updated int64
	dest := []any{&st.ID, &st.RunID, &st.Workflow, &st.Name, &needs, &st.Waiting, &state, &st.EffectKey, &st.Fingerprint, &st.Attempt,
		&next, &st.LeaseOwner, &lease, &outcome, &output, &st.LastError, &st.Reason, &created, &updated, &st.AttemptBase}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(needs), &st.Needs); err != nil {
		return nil, fmt.Errorf("step %d: needs: %w", st.ID, err)
	}
	st.State, st.LastOutcome = store.State(state), store.Outcome(outcome)
	if output != nil {
		st.Output = json.RawMessage(output)
	}
	st.NextAt, st.LeaseExpiresAt = fromTS(next), fromTS(lease)
	st.CreatedAt, st.UpdatedAt = fromTS(created), fromTS(updated)
	return &st, nil
}

// scanStepRun scans a row of stepColumns followed by runColumns.
func scanStepRun(sc scanner) (*store.Step, *store.Run, error) {
	var r store.Run
	var input []byte
	var state string
	var created, updated int64
	st, err := scanStep(sc, &r.ID, &r.Workflow, &r.RunKey, &r.Entity, &input, &r.InputHash, &state, &created, &updated)
	if err != nil {
		return nil, nil, err
	}
	r.Input, r.State, r.CreatedAt, r.UpdatedAt = json.RawMessage(input), store.State(state), fromTS(created), fromTS(updated)
	return st, &r, nil
}

// StepListByRun implements store.Store.
func (s *Store) StepListByRun(ctx context.Context, runID int64) ([]*store.Step, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = ? ORDER BY s.id`, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: step list: %w", err)
	}
	defer rows.Close()
	var out []*store.Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: step list: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// stepEvent builds an event about a step of a run.
func stepEvent(typ string, at time.Time, run *store.Run, st *store.Step, actor, reason string, d map[string]any) *store.Event {
	return &store.Event{
		At: at, Type: typ, RunID: run.ID, StepID: st.ID, Workflow: run.Workflow, Entity: run.Entity,
		StepName: st.Name, EffectKey: st.EffectKey, Attempt: st.Attempt, Actor: actor, Reason: reason, Detail: detail(d),
	}
}

// StepClaim implements store.Store.
func (s *Store) StepClaim(ctx context.Context, p store.StepClaimParams) (*store.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if len(p.Workflows) == 0 {
		return &store.ClaimResult{}, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1
	}
	res := &store.ClaimResult{}
	err := s.tx(ctx, "step claim", func(tx *sql.Tx) error {
		*res = store.ClaimResult{}
		args := []any{ts(p.Now)}
		for _, w := range p.Workflows {
			args = append(args, w)
		}
		args = append(args, limit)
		rows, err := tx.QueryContext(ctx, `SELECT `+stepColumns+`, `+runColumns+`
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state IN ('pending', 'retrying') AND s.waiting = 0 AND s.next_at <= ?
			  AND s.workflow IN (`+placeholders(len(p.Workflows))+`)
			ORDER BY s.next_at, s.id LIMIT ?`, args...)
		if err != nil {
			return err
		}
		var cands []*store.ClaimCandidate
		for rows.Next() {
			st, r, err := scanStepRun(rows)
			if err != nil {
				rows.Close()
				return err
			}
			cands = append(cands, &store.ClaimCandidate{Run: r, Step: st})
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, c := range cands {
			if c.Outputs, err = runOutputs(ctx, tx, c.Run.ID); err != nil {
				return err
			}
			claimed, err := s.claimOne(ctx, tx, p, c, res)
			if err != nil {
				return fmt.Errorf("step %d: %w", c.Step.ID, err)
			}
			if claimed != nil {
				res.Claimed = append(res.Claimed, claimed)
			}
			if err := refreshRunState(ctx, tx, c.Run.ID, ts(p.Now), store.ActorEngine); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// runOutputs returns the outputs of a run's completed steps by name.
func runOutputs(ctx context.Context, tx *sql.Tx, runID int64) (map[string]json.RawMessage, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, output FROM steps WHERE run_id = ? AND state = 'completed'`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]json.RawMessage{}
	for rows.Next() {
		var name string
		var output []byte
		if err := rows.Scan(&name, &output); err != nil {
			return nil, err
		}
		out[name] = json.RawMessage(output)
	}
	return out, rows.Err()
}

// claimOne consults the ledger for one candidate and claims, reuses, parks or postpones it.
func (s *Store) claimOne(ctx context.Context, tx *sql.Tx, p store.StepClaimParams, c *store.ClaimCandidate, res *store.ClaimResult) (*store.ClaimedStep, error) {
	run, st := c.Run, c.Step
	now := ts(p.Now)
	spec, perr := p.Prepare(c)
	if perr == nil && spec.Key == "" && spec.Skip == "" {
		perr = errors.New("the effect key is empty")
	}
	if perr != nil {
		reason := store.ReasonInvalidKey
		var pe *store.PrepareError
		if errors.As(perr, &pe) {
			reason = pe.Reason
		}
		res.Parked++
		return nil, park(ctx, tx, p.Now, run, st, reason, perr.Error(), nil)
	}
	if spec.Skip != "" {
		res.Skipped++
		if _, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'skipped', reason = ?, updated_at = ? WHERE id = ?`, spec.Skip, now, st.ID); err != nil {
			return nil, err
		}
		if err := insertEvent(ctx, tx, stepEvent(store.EventStepSkipped, p.Now, run, st, store.ActorEngine, spec.Skip, nil)); err != nil {
			return nil, err
		}
		return nil, skipDependents(ctx, tx, run, p.Now)
	}
	st.EffectKey, st.Fingerprint = spec.Key, spec.Fingerprint

	if _, err := tx.ExecContext(ctx, `INSERT INTO effects (effect_key, state, fingerprint, run_id, step_id, workflow, step_name, created_at)
		VALUES (?, 'in_flight', ?, ?, ?, ?, ?, ?) ON CONFLICT (effect_key) DO NOTHING`,
		spec.Key, spec.Fingerprint, run.ID, st.ID, run.Workflow, st.Name, now); err != nil {
		return nil, err
	}
	eff, err := getEffect(ctx, tx, spec.Key)
	if err != nil {
		return nil, err
	}
	switch {
	case eff.State == store.EffectCompleted && fingerprintsDiffer(eff.Fingerprint, spec.Fingerprint):
		res.Parked++
		msg := fmt.Sprintf("effect key %q was completed by run %d step %q with a different request", spec.Key, eff.RunID, eff.StepName)
		if err := insertEvent(ctx, tx, stepEvent(store.EventEffectConflict, p.Now, run, st, store.ActorEngine, store.ReasonKeyConflict, map[string]any{
			"completed_by_run": eff.RunID, "completed_by_step": eff.StepName, "completed_at": eff.CompletedAt,
			"stored_fingerprint": eff.Fingerprint, "request_fingerprint": spec.Fingerprint,
		})); err != nil {
			return nil, err
		}
		return nil, park(ctx, tx, p.Now, run, st, store.ReasonKeyConflict, msg, nil)

	case eff.State == store.EffectCompleted:
		res.Reused++
		st.State = store.StateCompleted
		res.ReusedSteps = append(res.ReusedSteps, &store.ClaimedStep{Run: run, Step: st, Outputs: c.Outputs})
		if _, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'completed', effect_key = ?, fingerprint = ?, output = ?, reason = 'effect_reused',
			lease_owner = '', lease_expires_at = 0, updated_at = ? WHERE id = ?`,
			spec.Key, spec.Fingerprint, []byte(eff.Result), now, st.ID); err != nil {
			return nil, err
		}
		d := map[string]any{"completed_by_run": eff.RunID, "completed_by_workflow": eff.Workflow, "completed_by_step": eff.StepName, "completed_at": eff.CompletedAt}
		if err := insertEvent(ctx, tx, stepEvent(store.EventEffectReused, p.Now, run, st, store.ActorEngine, "effect_completed", d)); err != nil {
			return nil, err
		}
		if err := insertEvent(ctx, tx, stepEvent(store.EventStepCompleted, p.Now, run, st, store.ActorEngine, "effect_reused", d)); err != nil {
			return nil, err
		}
		return nil, releaseDependents(ctx, tx, run.ID, st.Name, now)

	case eff.StepID != st.ID:
		res.Waiting++
		wait := p.WaitFor
		if wait <= 0 {
			wait = time.Second
		}
		if _, err := tx.ExecContext(ctx, `UPDATE steps SET next_at = ?, effect_key = ?, fingerprint = ?, reason = 'effect_in_flight', updated_at = ? WHERE id = ?`,
			ts(p.Now.Add(wait)), spec.Key, spec.Fingerprint, now, st.ID); err != nil {
			return nil, err
		}
		if st.Reason == store.ReasonEffectInFlight {
			return nil, nil // already said so
		}
		return nil, insertEvent(ctx, tx, stepEvent(store.EventEffectWaiting, p.Now, run, st, store.ActorEngine, store.ReasonEffectInFlight, map[string]any{
			"held_by_run": eff.RunID, "held_by_step": eff.StepName, "wait": wait.String(),
		}))
	}

	// This step holds the key: claim it.
	if eff.Fingerprint != spec.Fingerprint {
		if _, err := tx.ExecContext(ctx, `UPDATE effects SET fingerprint = ? WHERE effect_key = ?`, spec.Fingerprint, spec.Key); err != nil {
			return nil, err
		}
	}
	prev := st.LastOutcome
	st.Attempt++
	st.State = store.StateProcessing
	st.LeaseOwner = p.Owner
	st.LeaseExpiresAt = p.Now.Add(p.LeaseFor)
	r, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'processing', attempt = ?, effect_key = ?, fingerprint = ?, lease_owner = ?, lease_expires_at = ?,
		reason = '', updated_at = ? WHERE id = ? AND state IN ('pending', 'retrying') AND attempt = ?`,
		st.Attempt, spec.Key, spec.Fingerprint, p.Owner, ts(st.LeaseExpiresAt), now, st.ID, st.Attempt-1)
	if err != nil {
		return nil, err
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return nil, nil // taken meanwhile
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (run_id, step_id, step_name, number, effect_key, worker, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		run.ID, st.ID, st.Name, st.Attempt, spec.Key, p.Owner, now); err != nil {
		return nil, err
	}
	d := map[string]any{"worker": p.Owner, "lease_expires_at": st.LeaseExpiresAt}
	if prev != "" {
		d["previous_outcome"] = string(prev)
	}
	if err := insertEvent(ctx, tx, stepEvent(store.EventStepClaimed, p.Now, run, st, store.ActorEngine, "", d)); err != nil {
		return nil, err
	}
	return &store.ClaimedStep{Run: run, Step: st, Outputs: c.Outputs, PreviousOutcome: prev}, nil
}

func fingerprintsDiffer(a, b string) bool { return a != "" && b != "" && a != b }

// park sends a step that was not claimed to needs_review.
func park(ctx context.Context, tx *sql.Tx, at time.Time, run *store.Run, st *store.Step, reason, msg string, d map[string]any) error {
	if _, err := tx.ExecContext(ctx, `UPDATE steps SET state = 'needs_review', effect_key = ?, fingerprint = ?, reason = ?, last_error = ?,
		lease_owner = '', lease_expires_at = 0, updated_at = ? WHERE id = ?`,
		st.EffectKey, st.Fingerprint, reason, msg, ts(at), st.ID); err != nil {
		return err
	}
	return insertEvent(ctx, tx, stepEvent(store.EventStepNeedsReview, at, run, st, store.ActorEngine, reason, merge(map[string]any{"error": msg}, d)))
}

// releaseDependents lets the pending steps that need name run once their other needs are met.
func releaseDependents(ctx context.Context, tx *sql.Tx, runID int64, name string, now int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE steps SET waiting = waiting - 1, next_at = max(next_at, ?), updated_at = ?
		WHERE run_id = ? AND state = 'pending' AND waiting > 0
		  AND EXISTS (SELECT 1 FROM json_each(steps.needs) WHERE json_each.value = ?)`, now, now, runID, name)
	return err
}

// cancelDependents cancels, transitively, the pending steps that need a failed or
// cancelled step.
func cancelDependents(ctx context.Context, tx *sql.Tx, run *store.Run, at time.Time) error {
	return propagate(ctx, tx, run, at, `'failed', 'cancelled'`, store.StateCancelled, store.ReasonDependencyFailed, store.EventStepCancelled)
}

// skipDependents skips, transitively, the pending steps that need a skipped step.
func skipDependents(ctx context.Context, tx *sql.Tx, run *store.Run, at time.Time) error {
	return propagate(ctx, tx, run, at, `'skipped'`, store.StateSkipped, store.ReasonDependencySkipped, store.EventStepSkipped)
}

// propagate moves, transitively, the pending steps of run that need a step in one of the
// states of the SQL list causes to state, appending an event for each.
func propagate(ctx context.Context, tx *sql.Tx, run *store.Run, at time.Time, causes string, state store.State, reason, event string) error {
	for {
		rows, err := tx.QueryContext(ctx, `UPDATE steps SET state = ?, reason = ?, updated_at = ?
			WHERE run_id = ? AND state = 'pending' AND EXISTS (
				SELECT 1 FROM json_each(steps.needs) j JOIN steps d ON d.run_id = steps.run_id AND d.name = j.value
				WHERE d.state IN (`+causes+`))
			RETURNING id, name, attempt`, string(state), reason, ts(at), run.ID)
		if err != nil {
			return err
		}
		var moved []*store.Step
		for rows.Next() {
			st := &store.Step{}
			if err := rows.Scan(&st.ID, &st.Name, &st.Attempt); err != nil {
				rows.Close()
				return err
			}
			moved = append(moved, st)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if len(moved) == 0 {
			return nil
		}
		for _, st := range moved {
			if err := insertEvent(ctx, tx, stepEvent(event, at, run, st, store.ActorEngine, reason, nil)); err != nil {
				return err
			}
		}
	}
}

// StepHeartbeat implements store.Store.
func (s *Store) StepHeartbeat(ctx context.Context, p store.StepHeartbeatParams) ([]int64, error) {
	if len(p.StepIDs) == 0 {
		return nil, nil
	}
	held := map[int64]bool{}
	err := s.tx(ctx, "step heartbeat", func(tx *sql.Tx) error {
		clear(held)
		args := []any{ts(p.Now.Add(p.LeaseFor)), ts(p.Now), p.Owner}
		for _, id := range p.StepIDs {
			args = append(args, id)
		}
		rows, err := tx.QueryContext(ctx, `UPDATE steps SET lease_expires_at = ?, updated_at = ?
			WHERE lease_owner = ? AND state = 'processing' AND id IN (`+placeholders(len(p.StepIDs))+`) RETURNING id`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			held[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	var lost []int64
	for _, id := range p.StepIDs {
		if !held[id] {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// StepRecord implements store.Store.
func (s *Store) StepRecord(ctx context.Context, ps []store.StepRecordParams) ([]error, error) {
	results := make([]error, len(ps))
	err := s.tx(ctx, "step record", func(tx *sql.Tx) error {
		for i := range ps {
			results[i] = nil
			lost, err := recordOne(ctx, tx, &ps[i])
			if err != nil {
				return fmt.Errorf("step %d: %w", ps[i].StepID, err)
			}
			if lost {
				results[i] = fmt.Errorf("step %d attempt %d owner %q: %w", ps[i].StepID, ps[i].Attempt, ps[i].Owner, store.ErrLeaseLost)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

func recordOne(ctx context.Context, tx *sql.Tx, p *store.StepRecordParams) (lost bool, err error) {
	switch p.NextState {
	case store.StateCompleted, store.StateRetrying, store.StateNeedsReview, store.StateFailed, store.StateSkipped:
	default:
		return false, fmt.Errorf("next state %q is not one of completed, retrying, needs_review, failed, skipped", p.NextState)
	}
	now := ts(p.Now)
	actor := p.Actor
	if actor == "" {
		actor = p.Owner
	}
	// Only the caller's own attempt row: a record from another owner must not close the
	// attempt the lease holder is still running.
	if _, err := tx.ExecContext(ctx, `UPDATE attempts SET ended_at = ?, outcome = ?, error = ?, response_status = ?, response_excerpt = ?
		WHERE step_id = ? AND number = ? AND worker = ?`,
		now, string(p.Outcome), p.Error, p.ResponseStatus, p.ResponseExcerpt, p.StepID, p.Attempt, p.Owner); err != nil {
		return false, err
	}
	var output []byte
	if p.NextState == store.StateCompleted {
		output = []byte(p.Output)
		if output == nil {
			output = []byte("null")
		}
	}
	nextAt := now
	if p.NextState == store.StateRetrying {
		nextAt = ts(p.NextAt)
	}
	res, err := tx.ExecContext(ctx, `UPDATE steps SET state = ?, next_at = ?, lease_owner = '', lease_expires_at = 0, last_outcome = ?,
		output = coalesce(?, output), last_error = ?, reason = ?, updated_at = ?
		WHERE id = ? AND lease_owner = ? AND attempt = ? AND state = 'processing'`,
		string(p.NextState), nextAt, string(p.Outcome), output, p.Error, p.Reason, now, p.StepID, p.Owner, p.Attempt)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}

	st, err := scanStep(tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.id = ?`, p.StepID))
	if err != nil {
		return false, err
	}
	run, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = ?`, st.RunID))
	if err != nil {
		return false, err
	}
	if n == 0 {
		return true, recordLost(ctx, tx, p, run, st)
	}

	d := merge(map[string]any{"outcome": string(p.Outcome)}, p.Detail)
	if p.Error != "" {
		d["error"] = p.Error
	}
	if p.ResponseStatus != 0 {
		d["response_status"] = p.ResponseStatus
	}
	switch p.NextState {
	case store.StateCompleted:
		if _, err := tx.ExecContext(ctx, `UPDATE effects SET state = 'completed', result = ?, completed_at = ?, retain_until = ? WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`,
			output, now, ts(p.RetainUntil), st.EffectKey, st.ID); err != nil {
			return false, err
		}
		if err := insertEvent(ctx, tx, stepEvent(store.EventStepCompleted, p.Now, run, st, actor, p.Reason, d)); err != nil {
			return false, err
		}
		if err := releaseDependents(ctx, tx, run.ID, st.Name, now); err != nil {
			return false, err
		}
	case store.StateRetrying:
		d["next_at"] = p.NextAt
		d["delay"] = p.NextAt.Sub(p.Now).String()
		if err := insertEvent(ctx, tx, stepEvent(store.EventStepRetryPlanned, p.Now, run, st, actor, p.Reason, d)); err != nil {
			return false, err
		}
	case store.StateSkipped:
		// The step found nothing to do: nothing happened, so the key is free again.
		if _, err := tx.ExecContext(ctx, `DELETE FROM effects WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`, st.EffectKey, st.ID); err != nil {
			return false, err
		}
		if err := insertEvent(ctx, tx, stepEvent(store.EventStepSkipped, p.Now, run, st, actor, p.Reason, d)); err != nil {
			return false, err
		}
		if err := skipDependents(ctx, tx, run, p.Now); err != nil {
			return false, err
		}
	case store.StateNeedsReview, store.StateFailed:
		if p.Outcome == store.OutcomePermanent || p.Outcome == store.OutcomeRetryable {
			// The destination said no: the effect did not happen, so the key is free again.
			// After a success or an unknown outcome the effect may exist: the key stays held.
			if _, err := tx.ExecContext(ctx, `DELETE FROM effects WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`, st.EffectKey, st.ID); err != nil {
				return false, err
			}
		}
		typ := store.EventStepNeedsReview
		if p.NextState == store.StateFailed {
			typ = store.EventStepFailed
		}
		if err := insertEvent(ctx, tx, stepEvent(typ, p.Now, run, st, actor, p.Reason, d)); err != nil {
			return false, err
		}
		if p.NextState == store.StateFailed {
			if err := cancelDependents(ctx, tx, run, p.Now); err != nil {
				return false, err
			}
		}
	}
	return false, refreshRunState(ctx, tx, run.ID, now, actor)
}

// recordLost handles the result of an attempt whose lease is gone: the attempt row keeps
// what really happened, and a success is kept in the ledger so it is not repeated.
func recordLost(ctx context.Context, tx *sql.Tx, p *store.StepRecordParams, run *store.Run, st *store.Step) error {
	d := map[string]any{
		"owner": p.Owner, "attempt": p.Attempt, "outcome": string(p.Outcome),
		"step_state": string(st.State), "step_attempt": st.Attempt, "step_owner": st.LeaseOwner,
	}
	ev := stepEvent(store.EventLeaseLost, p.Now, run, st, p.Owner, "", d)
	ev.Attempt = p.Attempt
	if err := insertEvent(ctx, tx, ev); err != nil {
		return err
	}
	if p.Outcome != store.OutcomeSuccess {
		return nil
	}
	output := []byte(p.Output)
	if output == nil {
		output = []byte("null")
	}
	res, err := tx.ExecContext(ctx, `UPDATE effects SET state = 'completed', result = ?, completed_at = ?, retain_until = ? WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`,
		output, ts(p.Now), ts(p.RetainUntil), st.EffectKey, st.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		kept := stepEvent(store.EventLeaseLostRecorded, p.Now, run, st, p.Owner, "", map[string]any{"attempt": p.Attempt})
		kept.Attempt = p.Attempt
		return insertEvent(ctx, tx, kept)
	}
	return nil
}

// StepReapExpired implements store.Store.
func (s *Store) StepReapExpired(ctx context.Context, p store.StepReapParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var reaped int
	err := s.tx(ctx, "step reap", func(tx *sql.Tx) error {
		reaped = 0
		rows, err := tx.QueryContext(ctx, `SELECT `+stepColumns+`, `+runColumns+`
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state = 'processing' AND s.lease_expires_at < ? ORDER BY s.lease_expires_at LIMIT ?`, ts(p.Now), limit)
		if err != nil {
			return err
		}
		type pair struct {
			run *store.Run
			st  *store.Step
		}
		var expired []pair
		for rows.Next() {
			st, r, err := scanStepRun(rows)
			if err != nil {
				rows.Close()
				return err
			}
			expired = append(expired, pair{r, st})
		}
		if err := rows.Close(); err != nil {
			return err
		}
		now := ts(p.Now)
		for _, e := range expired {
			dec := p.Decide(e.st)
			if dec.State != store.StateRetrying && dec.State != store.StateNeedsReview {
				return fmt.Errorf("reap decision for step %d: state %q is not retrying or needs_review", e.st.ID, dec.State)
			}
			msg := fmt.Sprintf("lease held by %q expired at %s without a result; the outcome is unknown", e.st.LeaseOwner, e.st.LeaseExpiresAt.Format(time.RFC3339Nano))
			nextAt := now
			if dec.State == store.StateRetrying && !dec.NextAt.IsZero() {
				nextAt = ts(dec.NextAt)
			}
			res, err := tx.ExecContext(ctx, `UPDATE steps SET state = ?, next_at = ?, lease_owner = '', lease_expires_at = 0, last_outcome = 'unknown',
				last_error = ?, reason = ?, updated_at = ? WHERE id = ? AND state = 'processing' AND lease_owner = ? AND attempt = ?`,
				string(dec.State), nextAt, msg, dec.Reason, now, e.st.ID, e.st.LeaseOwner, e.st.Attempt)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE attempts SET ended_at = ?, outcome = 'unknown', error = ? WHERE step_id = ? AND number = ? AND ended_at = 0`,
				now, msg, e.st.ID, e.st.Attempt); err != nil {
				return err
			}
			if err := insertEvent(ctx, tx, stepEvent(store.EventLeaseExpired, p.Now, e.run, e.st, store.ActorReaper, store.ReasonLeaseExpired, map[string]any{
				"owner": e.st.LeaseOwner, "lease_expired_at": e.st.LeaseExpiresAt,
			})); err != nil {
				return err
			}
			typ := store.EventStepRetryPlanned
			d := merge(map[string]any{"outcome": string(store.OutcomeUnknown)}, dec.Detail)
			if dec.State == store.StateNeedsReview {
				typ = store.EventStepNeedsReview
				d["error"] = msg
			} else {
				d["next_at"] = fromTS(nextAt)
			}
			if err := insertEvent(ctx, tx, stepEvent(typ, p.Now, e.run, e.st, store.ActorReaper, dec.Reason, d)); err != nil {
				return err
			}
			if err := refreshRunState(ctx, tx, e.run.ID, now, store.ActorReaper); err != nil {
				return err
			}
			reaped++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return reaped, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
