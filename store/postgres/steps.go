package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

const stepColumns = `s.id, s.run_id, s.workflow, s.name, s.needs, s.waiting, s.state, s.effect_key, s.fingerprint, s.attempt,
	s.next_at, s.lease_owner, s.lease_expires_at, s.last_outcome, s.output, s.last_error, s.reason, s.created_at, s.updated_at, s.attempt_base`

// stepDest returns the scan destinations of stepColumns into st and a function that
// finishes the conversion after the scan.
func stepDest(st *store.Step) ([]any, func()) {
	var state, outcome string
	var output []byte
	var next, created, updated time.Time
	var lease pgtype.Timestamptz
	return []any{&st.ID, &st.RunID, &st.Workflow, &st.Name, &st.Needs, &st.Waiting, &state, &st.EffectKey, &st.Fingerprint, &st.Attempt,
			&next, &st.LeaseOwner, &lease, &outcome, &output, &st.LastError, &st.Reason, &created, &updated, &st.AttemptBase}, func() {
			st.State, st.LastOutcome = store.State(state), store.Outcome(outcome)
			if st.Needs == nil {
				st.Needs = []string{}
			}
			if output != nil {
				st.Output = json.RawMessage(output)
			}
			st.NextAt, st.LeaseExpiresAt = next.UTC(), fromTS(lease)
			st.CreatedAt, st.UpdatedAt = created.UTC(), updated.UTC()
		}
}

func scanStep(row pgx.Row) (*store.Step, error) {
	var st store.Step
	dest, done := stepDest(&st)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	done()
	return &st, nil
}

// scanStepRun scans a row of stepColumns followed by runColumns.
func scanStepRun(row pgx.Row) (*store.Step, *store.Run, error) {
	var st store.Step
	var r store.Run
	sdest, sdone := stepDest(&st)
	rdest, rdone := runDest(&r)
	if err := row.Scan(append(sdest, rdest...)...); err != nil {
		return nil, nil, err
	}
	sdone()
	rdone()
	return &st, &r, nil
}

// StepListByRun implements store.Store.
func (s *Store) StepListByRun(ctx context.Context, runID int64) ([]*store.Step, error) {
	var out []*store.Step
	err := s.read(ctx, "step list", func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.run_id = $1 ORDER BY s.id`, runID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Step, error) { return scanStep(row) })
		return err
	})
	return out, err
}

// stepEvent builds an event about a step of a run.
func stepEvent(typ string, at time.Time, run *store.Run, st *store.Step, actor, reason string, d map[string]any) *store.Event {
	return &store.Event{
		At: at, Type: typ, RunID: run.ID, StepID: st.ID, Workflow: run.Workflow, Entity: run.Entity,
		StepName: st.Name, EffectKey: st.EffectKey, Attempt: st.Attempt, Actor: actor, Reason: reason, Detail: detail(d),
	}
}

// lockRuns locks the rows of the given runs in ID order, so that transactions touching
// several runs never wait for each other in a cycle.
func lockRuns(ctx context.Context, t *txn, ids []int64) error {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	_, err := t.Exec(ctx, `SELECT 1 FROM runs WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, ids)
	return err
}

// StepClaim implements store.Store. Due steps are locked with FOR UPDATE SKIP LOCKED, so
// concurrent claimers each take different steps without waiting; their runs are then locked
// in ID order.
func (s *Store) StepClaim(ctx context.Context, p store.StepClaimParams) (*store.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if len(p.Workflows) == 0 {
		return &store.ClaimResult{}, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1
	}
	res := &store.ClaimResult{}
	err := s.tx(ctx, "step claim", func(t *txn) error {
		*res = store.ClaimResult{}
		rows, err := t.Query(ctx, `SELECT `+stepColumns+`, `+runColumns+`
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state IN ('pending', 'retrying') AND s.waiting = 0 AND s.next_at <= $1 AND s.workflow = ANY($2)
			ORDER BY s.next_at, s.id
			LIMIT $3
			FOR UPDATE OF s SKIP LOCKED`, p.Now, p.Workflows, limit)
		if err != nil {
			return err
		}
		cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ClaimCandidate, error) {
			st, r, err := scanStepRun(row)
			return &store.ClaimCandidate{Run: r, Step: st}, err
		})
		if err != nil || len(cands) == 0 {
			return err
		}
		var runIDs []int64
		for _, c := range cands {
			runIDs = append(runIDs, c.Run.ID)
		}
		if err := lockRuns(ctx, t, runIDs); err != nil {
			return err
		}
		for _, c := range cands {
			if c.Outputs, err = runOutputs(ctx, t, c.Run.ID); err != nil {
				return err
			}
			claimed, err := claimOne(ctx, t, p, c, res)
			if err != nil {
				return fmt.Errorf("step %d: %w", c.Step.ID, err)
			}
			if claimed != nil {
				res.Claimed = append(res.Claimed, claimed)
			}
			if err := refreshRunState(ctx, t, c.Run.ID, p.Now, store.ActorEngine); err != nil {
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
func runOutputs(ctx context.Context, t *txn, runID int64) (map[string]json.RawMessage, error) {
	rows, err := t.Query(ctx, `SELECT name, output FROM steps WHERE run_id = $1 AND state = 'completed'`, runID)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	var name string
	var output []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &output}, func() error {
		out[name] = json.RawMessage(slices.Clone(output))
		return nil
	})
	return out, err
}

// takeEffect makes sure key has a ledger row, held by st unless another step holds or
// completed it, and returns the row locked until the transaction ends. When another
// transaction inserts the same key at the same time, the INSERT waits for it to end; the
// SELECT that follows takes a new snapshot (read committed), so it sees that row.
func takeEffect(ctx context.Context, t *txn, spec store.EffectSpec, run *store.Run, st *store.Step, now time.Time) (*store.Effect, error) {
	for try := 1; ; try++ {
		if _, err := t.Exec(ctx, `INSERT INTO effects (effect_key, state, fingerprint, run_id, step_id, workflow, step_name, created_at)
			VALUES ($1, 'in_flight', $2, $3, $4, $5, $6, $7) ON CONFLICT (effect_key) DO NOTHING`,
			spec.Key, spec.Fingerprint, run.ID, st.ID, run.Workflow, st.Name, now); err != nil {
			return nil, err
		}
		eff, err := getEffect(ctx, t, spec.Key, true)
		if !errors.Is(err, pgx.ErrNoRows) || try == 5 {
			return eff, err
		}
		// The row this INSERT conflicted with was deleted since (its step gave up): again.
	}
}

// claimOne consults the ledger for one candidate and claims, reuses, parks, skips or
// postpones it.
func claimOne(ctx context.Context, t *txn, p store.StepClaimParams, c *store.ClaimCandidate, res *store.ClaimResult) (*store.ClaimedStep, error) {
	run, st := c.Run, c.Step
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
		return nil, park(ctx, t, p.Now, run, st, reason, perr.Error(), nil)
	}
	if spec.Skip != "" {
		res.Skipped++
		if _, err := t.Exec(ctx, `UPDATE steps SET state = 'skipped', reason = $1, updated_at = $2 WHERE id = $3`, clean(spec.Skip), p.Now, st.ID); err != nil {
			return nil, err
		}
		t.event(stepEvent(store.EventStepSkipped, p.Now, run, st, store.ActorEngine, spec.Skip, nil))
		return nil, skipDependents(ctx, t, run, p.Now)
	}
	st.EffectKey, st.Fingerprint = spec.Key, spec.Fingerprint

	eff, err := takeEffect(ctx, t, spec, run, st, p.Now)
	if err != nil {
		return nil, err
	}
	switch {
	case eff.State == store.EffectCompleted && fingerprintsDiffer(eff.Fingerprint, spec.Fingerprint):
		res.Parked++
		msg := fmt.Sprintf("effect key %q was completed by run %d step %q with a different request", spec.Key, eff.RunID, eff.StepName)
		t.event(stepEvent(store.EventEffectConflict, p.Now, run, st, store.ActorEngine, store.ReasonKeyConflict, map[string]any{
			"completed_by_run": eff.RunID, "completed_by_step": eff.StepName, "completed_at": eff.CompletedAt,
			"stored_fingerprint": eff.Fingerprint, "request_fingerprint": spec.Fingerprint,
		}))
		return nil, park(ctx, t, p.Now, run, st, store.ReasonKeyConflict, msg, nil)

	case eff.State == store.EffectCompleted:
		res.Reused++
		st.State = store.StateCompleted
		res.ReusedSteps = append(res.ReusedSteps, &store.ClaimedStep{Run: run, Step: st, Outputs: c.Outputs})
		if _, err := t.Exec(ctx, `UPDATE steps SET state = 'completed', effect_key = $1, fingerprint = $2, output = $3, reason = 'effect_reused',
			lease_owner = '', lease_expires_at = NULL, updated_at = $4 WHERE id = $5`,
			spec.Key, spec.Fingerprint, []byte(eff.Result), p.Now, st.ID); err != nil {
			return nil, err
		}
		d := map[string]any{"completed_by_run": eff.RunID, "completed_by_workflow": eff.Workflow, "completed_by_step": eff.StepName, "completed_at": eff.CompletedAt}
		t.event(stepEvent(store.EventEffectReused, p.Now, run, st, store.ActorEngine, "effect_completed", d))
		t.event(stepEvent(store.EventStepCompleted, p.Now, run, st, store.ActorEngine, "effect_reused", d))
		_, err := releaseDependents(ctx, t, run.ID, st.Name, p.Now)
		return nil, err

	case eff.StepID != st.ID:
		res.Waiting++
		wait := p.WaitFor
		if wait <= 0 {
			wait = time.Second
		}
		if _, err := t.Exec(ctx, `UPDATE steps SET next_at = $1, effect_key = $2, fingerprint = $3, reason = 'effect_in_flight', updated_at = $4 WHERE id = $5`,
			p.Now.Add(wait), spec.Key, spec.Fingerprint, p.Now, st.ID); err != nil {
			return nil, err
		}
		if st.Reason == store.ReasonEffectInFlight {
			return nil, nil // already said so
		}
		t.event(stepEvent(store.EventEffectWaiting, p.Now, run, st, store.ActorEngine, store.ReasonEffectInFlight, map[string]any{
			"held_by_run": eff.RunID, "held_by_step": eff.StepName, "wait": wait.String(),
		}))
		return nil, nil
	}

	// This step holds the key: claim it.
	if eff.Fingerprint != spec.Fingerprint {
		if _, err := t.Exec(ctx, `UPDATE effects SET fingerprint = $1 WHERE effect_key = $2`, spec.Fingerprint, spec.Key); err != nil {
			return nil, err
		}
	}
	prev := st.LastOutcome
	st.Attempt++
	st.State = store.StateProcessing
	st.LeaseOwner = p.Owner
	st.LeaseExpiresAt = p.Now.Add(p.LeaseFor)
	tag, err := t.Exec(ctx, `UPDATE steps SET state = 'processing', attempt = $1, effect_key = $2, fingerprint = $3, lease_owner = $4, lease_expires_at = $5,
		reason = '', updated_at = $6 WHERE id = $7 AND state IN ('pending', 'retrying') AND attempt = $8`,
		st.Attempt, spec.Key, spec.Fingerprint, p.Owner, st.LeaseExpiresAt, p.Now, st.ID, st.Attempt-1)
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() != 1 {
		return nil, nil // taken meanwhile
	}
	if _, err := t.Exec(ctx, `INSERT INTO attempts (run_id, step_id, step_name, number, effect_key, worker, started_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		run.ID, st.ID, st.Name, st.Attempt, spec.Key, p.Owner, p.Now); err != nil {
		return nil, err
	}
	d := map[string]any{"worker": p.Owner, "lease_expires_at": st.LeaseExpiresAt}
	if prev != "" {
		d["previous_outcome"] = string(prev)
	}
	t.event(stepEvent(store.EventStepClaimed, p.Now, run, st, store.ActorEngine, "", d))
	return &store.ClaimedStep{Run: run, Step: st, Outputs: c.Outputs, PreviousOutcome: prev}, nil
}

func fingerprintsDiffer(a, b string) bool { return a != "" && b != "" && a != b }

// park sends a step that was not claimed to needs_review.
func park(ctx context.Context, t *txn, at time.Time, run *store.Run, st *store.Step, reason, msg string, d map[string]any) error {
	msg = clean(msg)
	if _, err := t.Exec(ctx, `UPDATE steps SET state = 'needs_review', effect_key = $1, fingerprint = $2, reason = $3, last_error = $4,
		lease_owner = '', lease_expires_at = NULL, updated_at = $5 WHERE id = $6`,
		st.EffectKey, st.Fingerprint, clean(reason), msg, at, st.ID); err != nil {
		return err
	}
	t.event(stepEvent(store.EventStepNeedsReview, at, run, st, store.ActorEngine, reason, merge(map[string]any{"error": msg}, d)))
	return nil
}

// releaseDependents lets the pending steps that need name run once their other needs are
// met, and returns how many became due.
func releaseDependents(ctx context.Context, t *txn, runID int64, name string, now time.Time) (int, error) {
	var due int
	err := t.QueryRow(ctx, `WITH released AS (
			UPDATE steps SET waiting = waiting - 1, next_at = greatest(next_at, $1), updated_at = $1
			WHERE run_id = $2 AND state = 'pending' AND waiting > 0 AND $3 = ANY (needs)
			RETURNING waiting)
		SELECT count(*) FROM released WHERE waiting = 0`, now, runID, name).Scan(&due)
	return due, err
}

// cancelDependents cancels, transitively, the pending steps that need a failed or
// cancelled step.
func cancelDependents(ctx context.Context, t *txn, run *store.Run, at time.Time) error {
	return propagate(ctx, t, run, at, []string{string(store.StateFailed), string(store.StateCancelled)},
		store.StateCancelled, store.ReasonDependencyFailed, store.EventStepCancelled)
}

// skipDependents skips, transitively, the pending steps that need a skipped step.
func skipDependents(ctx context.Context, t *txn, run *store.Run, at time.Time) error {
	return propagate(ctx, t, run, at, []string{string(store.StateSkipped)},
		store.StateSkipped, store.ReasonDependencySkipped, store.EventStepSkipped)
}

// propagate moves, transitively, the pending steps of run that need a step in one of the
// states causes to state, appending an event for each.
func propagate(ctx context.Context, t *txn, run *store.Run, at time.Time, causes []string, state store.State, reason, event string) error {
	for {
		rows, err := t.Query(ctx, `WITH moved AS (
				UPDATE steps SET state = $1, reason = $2, updated_at = $3
				WHERE run_id = $4 AND state = 'pending' AND EXISTS (
					SELECT 1 FROM steps d WHERE d.run_id = steps.run_id AND d.name = ANY (steps.needs)
					  AND d.state = ANY ($5))
				RETURNING id, name, attempt)
			SELECT id, name, attempt FROM moved ORDER BY id`, string(state), reason, at, run.ID, causes)
		if err != nil {
			return err
		}
		moved, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Step, error) {
			st := &store.Step{}
			err := row.Scan(&st.ID, &st.Name, &st.Attempt)
			return st, err
		})
		if err != nil {
			return err
		}
		if len(moved) == 0 {
			return nil
		}
		for _, st := range moved {
			t.event(stepEvent(event, at, run, st, store.ActorEngine, reason, nil))
		}
	}
}

// StepHeartbeat implements store.Store.
func (s *Store) StepHeartbeat(ctx context.Context, p store.StepHeartbeatParams) ([]int64, error) {
	if len(p.StepIDs) == 0 {
		return nil, nil
	}
	held := map[int64]bool{}
	err := s.tx(ctx, "step heartbeat", func(t *txn) error {
		clear(held)
		rows, err := t.Query(ctx, `UPDATE steps SET lease_expires_at = $1, updated_at = $2
			WHERE lease_owner = $3 AND state = 'processing' AND id = ANY($4) RETURNING id`,
			p.Now.Add(p.LeaseFor), p.Now, p.Owner, p.StepIDs)
		if err != nil {
			return err
		}
		var id int64
		_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
			held[id] = true
			return nil
		})
		return err
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
	err := s.tx(ctx, "step record", func(t *txn) error {
		for i := range ps {
			results[i] = nil
			lost, err := recordOne(ctx, t, &ps[i])
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

func recordOne(ctx context.Context, t *txn, p *store.StepRecordParams) (lost bool, err error) {
	switch p.NextState {
	case store.StateCompleted, store.StateRetrying, store.StateNeedsReview, store.StateFailed, store.StateSkipped:
	default:
		return false, fmt.Errorf("next state %q is not one of completed, retrying, needs_review, failed, skipped", p.NextState)
	}
	actor := p.Actor
	if actor == "" {
		actor = p.Owner
	}
	errText := clean(p.Error)
	var output []byte
	if p.NextState == store.StateCompleted {
		output = []byte(p.Output)
		if output == nil {
			output = []byte("null")
		}
	}
	nextAt := p.Now
	if p.NextState == store.StateRetrying {
		nextAt = p.NextAt
	}
	// One round trip: the step's compare-and-set, returning the step if it applied, then
	// its attempt (in the order the reaper locks them). Only the caller's own attempt row
	// is closed: a record from another owner must not close the attempt the lease holder
	// is still running.
	b := &pgx.Batch{}
	b.Queue(`UPDATE steps s SET state = $1, next_at = $2, lease_owner = '', lease_expires_at = NULL, last_outcome = $3,
		output = coalesce($4, output), last_error = $5, reason = $6, updated_at = $7
		WHERE id = $8 AND lease_owner = $9 AND attempt = $10 AND state = 'processing'
		RETURNING `+stepColumns,
		string(p.NextState), nextAt, string(p.Outcome), output, errText, clean(p.Reason), p.Now, p.StepID, p.Owner, p.Attempt)
	b.Queue(`UPDATE attempts SET ended_at = $1, outcome = $2, error = $3, response_status = $4, response_excerpt = $5
		WHERE step_id = $6 AND number = $7 AND worker = $8`,
		p.Now, string(p.Outcome), errText, p.ResponseStatus, clean(p.ResponseExcerpt), p.StepID, p.Attempt, p.Owner)
	br := t.SendBatch(ctx, b)
	st, err := scanStep(br.QueryRow())
	applied := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		br.Close()
		return false, err
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return false, err
	}
	if err := br.Close(); err != nil {
		return false, err
	}
	if !applied {
		if st, err = scanStep(t.QueryRow(ctx, `SELECT `+stepColumns+` FROM steps s WHERE s.id = $1`, p.StepID)); err != nil {
			return false, err
		}
	}
	run, err := scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1`, st.RunID))
	if err != nil {
		return false, err
	}
	if !applied {
		return true, recordLost(ctx, t, p, run, st)
	}

	d := merge(map[string]any{"outcome": string(p.Outcome)}, p.Detail)
	if errText != "" {
		d["error"] = errText
	}
	if p.ResponseStatus != 0 {
		d["response_status"] = p.ResponseStatus
	}
	switch p.NextState {
	case store.StateCompleted:
		if _, err := t.Exec(ctx, `UPDATE effects SET state = 'completed', result = $1, completed_at = $2, retain_until = $5 WHERE effect_key = $3 AND step_id = $4 AND state = 'in_flight'`,
			output, p.Now, st.EffectKey, st.ID, nullTime(p.RetainUntil)); err != nil {
			return false, err
		}
		t.event(stepEvent(store.EventStepCompleted, p.Now, run, st, actor, p.Reason, d))
		due, err := releaseDependents(ctx, t, run.ID, st.Name, p.Now)
		if err != nil {
			return false, err
		}
		t.notify = t.notify || due > 0
	case store.StateRetrying:
		d["next_at"] = p.NextAt
		d["delay"] = p.NextAt.Sub(p.Now).String()
		t.event(stepEvent(store.EventStepRetryPlanned, p.Now, run, st, actor, p.Reason, d))
		t.notify = t.notify || !p.NextAt.After(p.Now)
	case store.StateNeedsReview, store.StateFailed:
		if p.Outcome == store.OutcomePermanent || p.Outcome == store.OutcomeRetryable {
			// The destination said no: the effect did not happen, so the key is free again.
			// After a success or an unknown outcome the effect may exist: the key stays held.
			if _, err := t.Exec(ctx, `DELETE FROM effects WHERE effect_key = $1 AND step_id = $2 AND state = 'in_flight'`, st.EffectKey, st.ID); err != nil {
				return false, err
			}
		}
		typ := store.EventStepNeedsReview
		if p.NextState == store.StateFailed {
			typ = store.EventStepFailed
		}
		t.event(stepEvent(typ, p.Now, run, st, actor, p.Reason, d))
		if p.NextState == store.StateFailed {
			if err := cancelDependents(ctx, t, run, p.Now); err != nil {
				return false, err
			}
		}
	case store.StateSkipped:
		// The step found nothing to do: nothing happened, so the key is free again.
		if _, err := t.Exec(ctx, `DELETE FROM effects WHERE effect_key = $1 AND step_id = $2 AND state = 'in_flight'`, st.EffectKey, st.ID); err != nil {
			return false, err
		}
		t.event(stepEvent(store.EventStepSkipped, p.Now, run, st, actor, p.Reason, d))
		if err := skipDependents(ctx, t, run, p.Now); err != nil {
			return false, err
		}
	}
	return false, refreshRunState(ctx, t, run.ID, p.Now, actor)
}

// recordLost handles the result of an attempt whose lease is gone: the attempt row keeps
// what really happened, and a success is kept in the ledger so it is not repeated.
func recordLost(ctx context.Context, t *txn, p *store.StepRecordParams, run *store.Run, st *store.Step) error {
	d := map[string]any{
		"owner": p.Owner, "attempt": p.Attempt, "outcome": string(p.Outcome),
		"step_state": string(st.State), "step_attempt": st.Attempt, "step_owner": st.LeaseOwner,
	}
	ev := stepEvent(store.EventLeaseLost, p.Now, run, st, p.Owner, "", d)
	ev.Attempt = p.Attempt
	t.event(ev)
	if p.Outcome != store.OutcomeSuccess {
		return nil
	}
	output := []byte(p.Output)
	if output == nil {
		output = []byte("null")
	}
	tag, err := t.Exec(ctx, `UPDATE effects SET state = 'completed', result = $1, completed_at = $2, retain_until = $5 WHERE effect_key = $3 AND step_id = $4 AND state = 'in_flight'`,
		output, p.Now, st.EffectKey, st.ID, nullTime(p.RetainUntil))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		kept := stepEvent(store.EventLeaseLostRecorded, p.Now, run, st, p.Owner, "", map[string]any{"attempt": p.Attempt})
		kept.Attempt = p.Attempt
		t.event(kept)
	}
	return nil
}

// StepReapExpired implements store.Store. Expired steps are locked with FOR UPDATE SKIP
// LOCKED: a step whose worker is recording its result right now is left to that worker.
func (s *Store) StepReapExpired(ctx context.Context, p store.StepReapParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var reaped int
	err := s.tx(ctx, "step reap", func(t *txn) error {
		reaped = 0
		rows, err := t.Query(ctx, `SELECT `+stepColumns+`, `+runColumns+`
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state = 'processing' AND s.lease_expires_at < $1
			ORDER BY s.lease_expires_at, s.id
			LIMIT $2
			FOR UPDATE OF s SKIP LOCKED`, p.Now, limit)
		if err != nil {
			return err
		}
		type pair struct {
			run *store.Run
			st  *store.Step
		}
		expired, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pair, error) {
			st, r, err := scanStepRun(row)
			return pair{r, st}, err
		})
		if err != nil || len(expired) == 0 {
			return err
		}
		var runIDs []int64
		for _, e := range expired {
			runIDs = append(runIDs, e.run.ID)
		}
		if err := lockRuns(ctx, t, runIDs); err != nil {
			return err
		}
		for _, e := range expired {
			dec := p.Decide(e.st)
			if dec.State != store.StateRetrying && dec.State != store.StateNeedsReview {
				return fmt.Errorf("reap decision for step %d: state %q is not retrying or needs_review", e.st.ID, dec.State)
			}
			msg := fmt.Sprintf("lease held by %q expired at %s without a result; the outcome is unknown", e.st.LeaseOwner, e.st.LeaseExpiresAt.Format(time.RFC3339Nano))
			nextAt := p.Now
			if dec.State == store.StateRetrying && !dec.NextAt.IsZero() {
				nextAt = dec.NextAt
			}
			tag, err := t.Exec(ctx, `UPDATE steps SET state = $1, next_at = $2, lease_owner = '', lease_expires_at = NULL, last_outcome = 'unknown',
				last_error = $3, reason = $4, updated_at = $5 WHERE id = $6 AND state = 'processing' AND lease_owner = $7 AND attempt = $8`,
				string(dec.State), nextAt, clean(msg), clean(dec.Reason), p.Now, e.st.ID, e.st.LeaseOwner, e.st.Attempt)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				continue
			}
			if _, err := t.Exec(ctx, `UPDATE attempts SET ended_at = $1, outcome = 'unknown', error = $2 WHERE step_id = $3 AND number = $4 AND ended_at IS NULL`,
				p.Now, clean(msg), e.st.ID, e.st.Attempt); err != nil {
				return err
			}
			t.event(stepEvent(store.EventLeaseExpired, p.Now, e.run, e.st, store.ActorReaper, store.ReasonLeaseExpired, map[string]any{
				"owner": e.st.LeaseOwner, "lease_expired_at": e.st.LeaseExpiresAt,
			}))
			typ := store.EventStepRetryPlanned
			d := merge(map[string]any{"outcome": string(store.OutcomeUnknown)}, dec.Detail)
			if dec.State == store.StateNeedsReview {
				typ = store.EventStepNeedsReview
				d["error"] = msg
			} else {
				d["next_at"] = nextAt
				t.notify = t.notify || !nextAt.After(p.Now)
			}
			t.event(stepEvent(typ, p.Now, e.run, e.st, store.ActorReaper, dec.Reason, d))
			if err := refreshRunState(ctx, t, e.run.ID, p.Now, store.ActorReaper); err != nil {
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
