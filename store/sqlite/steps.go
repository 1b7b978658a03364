package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/store"
)

const stepColumns = `s.id, s.run_id, s.workflow, s.name, s.needs, s.waiting, s.state, s.effect_key, s.fingerprint, s.attempt,
	s.next_at, s.lease_owner, s.lease_expires_at, s.last_outcome, s.output, s.last_error, s.reason, s.created_at, s.updated_at, s.attempt_base,
	s.progress`

func scanStep(sc scanner, extra ...any) (*store.Step, error) {
	var st store.Step
	var needs, state, outcome string
	var output, progress []byte
	var next, lease, created, updated int64
	dest := []any{&st.ID, &st.RunID, &st.Workflow, &st.Name, &needs, &st.Waiting, &state, &st.EffectKey, &st.Fingerprint, &st.Attempt,
		&next, &st.LeaseOwner, &lease, &outcome, &output, &st.LastError, &st.Reason, &created, &updated, &st.AttemptBase, &progress}
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
	if progress != nil {
		st.Progress = json.RawMessage(progress)
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
	workflows, err := json.Marshal(p.Workflows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: step claim: %w", err)
	}
	res := &store.ClaimResult{}
	err = s.write(ctx, "step claim", func(w *writeTx) error {
		*res = store.ClaimResult{}
		return claimIn(w, &p, string(workflows), limit, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// claimIn claims, in w, up to limit due steps of the workflows in the JSON array
// workflows, as StepClaim does, and adds them to res.
func claimIn(w *writeTx, p *store.StepClaimParams, workflows string, limit int, res *store.ClaimResult) error {
	rows, err := w.query(stmtClaimCandidates, ts(p.Now), workflows, limit)
	if err != nil {
		return err
	}
	var cands []*store.ClaimCandidate
	var runs []*store.Run
	for rows.Next() {
		st, r, err := scanStepRun(rows)
		if err != nil {
			rows.Close()
			return err
		}
		cands = append(cands, &store.ClaimCandidate{Run: r, Step: st})
		runs = append(runs, r)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	// The steps of every candidate's run, with the outputs of the completed ones.
	if err := w.addRuns(runs, true); err != nil {
		return err
	}
	for _, c := range cands {
		rs, err := w.run(c.Run.ID)
		if err != nil {
			return err
		}
		c.Outputs = rs.outputsOf()
		claimed, err := claimOne(w, p, c, res)
		if err != nil {
			return fmt.Errorf("step %d: %w", c.Step.ID, err)
		}
		if claimed != nil {
			res.Claimed = append(res.Claimed, claimed)
		}
		if err := w.refresh(c.Run.ID, p.Now, store.ActorEngine); err != nil {
			return err
		}
	}
	return nil
}

// claimOne consults the ledger for one candidate and claims, reuses, parks, skips or
// postpones it as store.PlanClaim decides.
func claimOne(w *writeTx, p *store.StepClaimParams, c *store.ClaimCandidate, res *store.ClaimResult) (*store.ClaimedStep, error) {
	run, st := c.Run, c.Step
	now := ts(p.Now)
	plan, spec := store.PlanPrepare(p, c)
	var eff *store.Effect
	if plan == nil {
		var err error
		if eff, err = takeEffect(w, spec, run, st, now); err != nil {
			return nil, err
		}
		plan = store.PlanClaim(p, c, spec, eff)
	}
	var claimed *store.ClaimedStep
	switch plan.Action {
	case store.ClaimPark:
		res.Parked++
		if _, err := w.exec(stmtStepPark, st.EffectKey, st.Fingerprint, plan.Reason, plan.Error, now, st.ID); err != nil {
			return nil, err
		}
		if err := w.setStep(run.ID, st.ID, store.StateNeedsReview, nil); err != nil {
			return nil, err
		}
	case store.ClaimSkip:
		res.Skipped++
		if _, err := w.exec(stmtStepSkip, plan.Reason, now, st.ID); err != nil {
			return nil, err
		}
		if err := w.setStep(run.ID, st.ID, store.StateSkipped, nil); err != nil {
			return nil, err
		}
	case store.ClaimReuse:
		res.Reused++
		res.ReusedSteps = append(res.ReusedSteps, &store.ClaimedStep{Run: run, Step: st, Outputs: c.Outputs})
		if _, err := w.exec(stmtStepReuse, spec.Key, spec.Fingerprint, []byte(eff.Result), now, st.ID); err != nil {
			return nil, err
		}
		if err := w.setStep(run.ID, st.ID, store.StateCompleted, eff.Result); err != nil {
			return nil, err
		}
	case store.ClaimWait:
		res.Waiting++
		if _, err := w.exec(stmtStepWait, ts(plan.NextAt), st.EffectKey, st.Fingerprint, plan.Reason, now, st.ID); err != nil {
			return nil, err
		}
		if s := w.steps[st.ID]; s != nil {
			s.delayed = plan.Reason == store.ReasonDelayed
		}
	case store.ClaimTake:
		if plan.UpdateFingerprint {
			if _, err := w.exec(stmtEffectFingerprint, spec.Fingerprint, spec.Key); err != nil {
				return nil, err
			}
		}
		n, err := w.execN(stmtStepTake, st.Attempt, spec.Key, spec.Fingerprint, p.Owner, ts(st.LeaseExpiresAt), now, st.ID, st.Attempt-1)
		if err != nil {
			return nil, err
		}
		if n != 1 {
			return nil, nil // taken meanwhile
		}
		w.insertAttempt(run.ID, st.ID, st.Name, st.Attempt, spec.Key, p.Owner, now)
		if err := w.setStep(run.ID, st.ID, store.StateProcessing, nil); err != nil {
			return nil, err
		}
		claimed = &store.ClaimedStep{Run: run, Step: st, Outputs: c.Outputs, PreviousOutcome: st.LastOutcome}
	default:
		return nil, fmt.Errorf("unknown claim action %d", plan.Action)
	}
	for _, e := range plan.Events {
		w.event(e)
	}
	switch plan.Action {
	case store.ClaimSkip:
		return nil, w.skipDependents(run, p.Now)
	case store.ClaimReuse:
		return nil, w.release(run.ID, st.Name, now)
	}
	return claimed, nil
}

// takeEffect inserts the ledger row for spec.Key held by st unless the key has one, and
// returns the row as it stands.
func takeEffect(w *writeTx, spec store.EffectSpec, run *store.Run, st *store.Step, now int64) (*store.Effect, error) {
	n, err := w.execN(stmtEffectInsert, spec.Key, spec.Fingerprint, run.ID, st.ID, run.Workflow, st.Name, now)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return &store.Effect{Key: spec.Key, State: store.EffectInFlight, Fingerprint: spec.Fingerprint, RunID: run.ID, StepID: st.ID,
			Workflow: run.Workflow, StepName: st.Name, CreatedAt: fromTS(now)}, nil
	}
	return scanEffect(w.queryRow(stmtEffectGet, spec.Key))
}

// StepRecord implements store.Store.
func (s *Store) StepRecord(ctx context.Context, ps []store.StepRecordParams) ([]error, error) {
	results, valid, ids := validateRecords(ps)
	if len(ids) == 0 {
		return results, nil
	}
	err := s.write(ctx, "step record", func(w *writeTx) error {
		return recordAll(w, ps, valid, ids, results)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// validateRecords checks every entry: results holds the errors of the invalid ones, valid
// says which are valid and ids lists their steps.
func validateRecords(ps []store.StepRecordParams) (results []error, valid []bool, ids []int64) {
	results = make([]error, len(ps))
	valid = make([]bool, len(ps))
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			results[i] = fmt.Errorf("sqlite: step record: step %d: %w", ps[i].StepID, err)
			continue
		}
		valid[i] = true
		ids = append(ids, ps[i].StepID)
	}
	return results, valid, ids
}

// recordAll records the valid entries of ps in w and sets their results.
func recordAll(w *writeTx, ps []store.StepRecordParams, valid []bool, ids []int64, results []error) error {
	// The steps of the runs of every entry's step, read once.
	if err := w.loadRuns(stmtRunsOfSteps, ids); err != nil {
		return err
	}
	for i := range ps {
		if !valid[i] {
			continue
		}
		lost, err := recordOne(w, &ps[i])
		if err != nil {
			return fmt.Errorf("step %d: %w", ps[i].StepID, err)
		}
		results[i] = nil
		switch lost {
		case lostLease:
			results[i] = store.LeaseLostError(&ps[i])
		case lostCancelled:
			results[i] = store.CancelledError(&ps[i])
		}
	}
	return nil
}

// Why a record's compare-and-set did not apply.
const (
	applied       = 0
	lostLease     = 1 // another owner or attempt holds the step, or it is no longer processing
	lostCancelled = 2 // the step was cancelled with its run while the attempt ran
)

// recordOne applies one attempt result as store.PlanRecord decides; lost says why the
// compare-and-set on the step did not apply.
func recordOne(w *writeTx, p *store.StepRecordParams) (lost int, err error) {
	now := ts(p.Now)
	if _, err := w.exec(stmtAttemptRecord, now, string(p.Outcome), p.Error, p.ResponseStatus, p.ResponseExcerpt, p.StepID, p.Attempt, p.Owner); err != nil {
		return applied, err
	}
	// The step as the transaction read it: its run, name and key do not change here.
	ss := w.steps[p.StepID]
	if ss == nil || ss.state != store.StateProcessing {
		return recordLost(w, p)
	}
	output := p.RecordOutput()
	n, err := w.execN(stmtStepRecord, string(p.NextState), ts(p.RecordNextAt()), string(p.Outcome), output, p.Error, p.Reason, now,
		p.StepID, p.Owner, p.Attempt)
	if err != nil {
		return applied, err
	}
	if n == 0 {
		return recordLost(w, p)
	}
	rs, err := w.run(ss.runID)
	if err != nil {
		return applied, err
	}
	ss.set(p.NextState, output)
	st := &store.Step{ID: p.StepID, RunID: ss.runID, Name: ss.name, EffectKey: ss.effectKey, State: p.NextState, Attempt: p.Attempt}
	plan := store.PlanRecord(p, rs.run, st, p.Error)
	switch plan.Effect {
	case store.EffectComplete:
		if _, err := w.exec(stmtEffectComplete, output, now, ts(p.RetainUntil), st.EffectKey, st.ID); err != nil {
			return applied, err
		}
	case store.EffectRelease:
		if _, err := w.exec(stmtEffectRelease, st.EffectKey, st.ID); err != nil {
			return applied, err
		}
	}
	w.event(plan.Event)
	switch plan.Dependents {
	case store.DependentsRelease:
		err = w.release(st.RunID, st.Name, now)
	case store.DependentsCancel:
		err = w.cancelDependents(rs.run, p.Now)
	case store.DependentsSkip:
		err = w.skipDependents(rs.run, p.Now)
	}
	if err != nil {
		return applied, err
	}
	return applied, w.refresh(st.RunID, p.Now, p.RecordActor())
}

// recordLost handles the result of an attempt whose lease is gone: the attempt row keeps
// what really happened, and a success is kept in the ledger so it is not repeated. For a
// step cancelled while the attempt ran, the ledger keeps what happened
// (store.PlanCancelledRecord).
func recordLost(w *writeTx, p *store.StepRecordParams) (int, error) {
	st, err := scanStep(w.queryRow(stmtStepGet, p.StepID))
	if err != nil {
		return lostLease, err
	}
	rs, err := w.run(st.RunID)
	if err != nil {
		return lostLease, err
	}
	if effect, ev, ok := store.PlanCancelledRecord(p, rs.run, st, p.Error); ok {
		w.event(ev)
		// The step stays cancelled; it keeps what its attempt ended with, and its lease ends.
		if _, err := w.tx.ExecContext(w.ctx, `UPDATE steps SET lease_owner = '', lease_expires_at = 0, last_outcome = ?, last_error = ?, reason = ?, updated_at = ?
			WHERE id = ? AND state = 'cancelled' AND lease_owner = ? AND attempt = ?`,
			string(p.Outcome), p.Error, store.CancelledRecordReason(p), ts(p.Now), st.ID, p.Owner, p.Attempt); err != nil {
			return lostCancelled, err
		}
		switch effect {
		case store.EffectComplete:
			_, err = w.exec(stmtEffectComplete, p.SuccessOutput(), ts(p.Now), ts(p.RetainUntil), st.EffectKey, st.ID)
		case store.EffectRelease:
			_, err = w.exec(stmtEffectRelease, st.EffectKey, st.ID)
		}
		return lostCancelled, err
	}
	w.event(store.LostRecordEvent(p, rs.run, st))
	if p.Outcome != store.OutcomeSuccess {
		return lostLease, nil
	}
	n, err := w.execN(stmtEffectComplete, p.SuccessOutput(), ts(p.Now), ts(p.RetainUntil), st.EffectKey, st.ID)
	if err != nil {
		return lostLease, err
	}
	if n == 1 {
		w.event(store.LostResultKeptEvent(p, rs.run, st))
	}
	return lostLease, nil
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
	err := s.write(ctx, "step reap", func(w *writeTx) error {
		reaped = 0
		type pair struct {
			run *store.Run
			st  *store.Step
		}
		var expired []pair
		var runs []*store.Run
		for _, q := range []stmtID{stmtReapCandidates, stmtReapCancelled} {
			rows, err := w.query(q, ts(p.Now), limit)
			if err != nil {
				return err
			}
			for rows.Next() {
				st, r, err := scanStepRun(rows)
				if err != nil {
					rows.Close()
					return err
				}
				expired = append(expired, pair{r, st})
				runs = append(runs, r)
			}
			if err := rows.Close(); err != nil {
				return err
			}
		}
		if err := w.addRuns(runs, false); err != nil {
			return err
		}
		now := ts(p.Now)
		for _, e := range expired {
			plan, err := store.PlanReap(p.Now, e.run, e.st, p.Decide)
			if err != nil {
				return err
			}
			n, err := w.execN(stmtStepReap, string(plan.State), ts(plan.NextAt), plan.Error, plan.Reason, now, e.st.ID, e.st.LeaseOwner, e.st.Attempt)
			if err != nil {
				return err
			}
			if n != 1 {
				continue
			}
			if _, err := w.exec(stmtAttemptReap, now, plan.Error, e.st.ID, e.st.Attempt); err != nil {
				return err
			}
			for _, ev := range plan.Events {
				w.event(ev)
			}
			if err := w.setStep(e.run.ID, e.st.ID, plan.State, nil); err != nil {
				return err
			}
			if err := w.refresh(e.run.ID, p.Now, store.ActorReaper); err != nil {
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

// StepHeartbeat implements store.Store.
func (s *Store) StepHeartbeat(ctx context.Context, p store.StepHeartbeatParams) ([]int64, error) {
	if len(p.StepIDs) == 0 {
		return nil, nil
	}
	held := map[int64]bool{}
	err := s.write(ctx, "step heartbeat", func(w *writeTx) error {
		clear(held)
		rows, err := w.query(stmtStepHeartbeat, ts(p.Now.Add(p.LeaseFor)), ts(p.Now), p.Owner, idList(p.StepIDs))
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
	return p.Lost(held), nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// StepCheckpoint implements store.StepCheckpointer.
func (s *Store) StepCheckpoint(ctx context.Context, p store.StepCheckpointParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.write(ctx, "step checkpoint", func(w *writeTx) error {
		n, err := w.execN(stmtStepCheckpoint, []byte(p.Progress), ts(p.Now), p.StepID, p.Owner, p.Attempt)
		if err == nil && n == 0 {
			err = p.LeaseLost()
		}
		return err
	})
}
