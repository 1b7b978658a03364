package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

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
	// The candidates are decided in rounds of candidates of different runs: a candidate's
	// outputs are its run's as the candidates before it left them (a reused step completes
	// with an output), and only a candidate of the same run changes them.
	for len(cands) > 0 {
		n := roundLen(cands)
		if err := claimRound(w, p, cands[:n], res); err != nil {
			return err
		}
		cands = cands[n:]
	}
	return nil
}

// roundLen returns how many candidates at the head of cands belong to different runs.
func roundLen(cands []*store.ClaimCandidate) int {
	seen := make(map[int64]bool, len(cands))
	for i, c := range cands {
		if seen[c.Run.ID] {
			return i
		}
		seen[c.Run.ID] = true
	}
	return len(cands)
}

// claimRound decides candidates of different runs, in order, as if each were decided
// alone in turn: multi-row inserts take the ledger rows of their keys, store.PlanClaim
// decides each candidate given the row its key has once the candidates before it tried to
// take it, a compare-and-set takes the steps to take (many rows at a time), and then each
// candidate's decision is applied, audited and its run's state re-derived, in order.
func claimRound(w *writeTx, p *store.StepClaimParams, cands []*store.ClaimCandidate, res *store.ClaimResult) error {
	now := ts(p.Now)
	plans := make([]*store.ClaimPlan, len(cands))
	specs := make([]store.EffectSpec, len(cands))
	for i, c := range cands {
		rs, err := w.run(c.Run.ID)
		if err != nil {
			return err
		}
		c.Outputs = rs.outputsOf()
		plans[i], specs[i] = store.PlanPrepare(p, c)
	}
	ledger, err := takeEffects(w, cands, plans, specs, now)
	if err != nil {
		return err
	}
	effs := make([]*store.Effect, len(cands))
	var takes []*store.Step // the steps to take, as store.PlanClaim left them
	for i, c := range cands {
		if plans[i] != nil {
			continue
		}
		eff := ledger[specs[i].Key]
		effs[i] = eff
		plan := store.PlanClaim(p, c, specs[i], eff)
		plans[i] = plan
		if plan.Action != store.ClaimTake {
			continue
		}
		if plan.UpdateFingerprint {
			if _, err := w.exec(stmtEffectFingerprint, specs[i].Fingerprint, specs[i].Key); err != nil {
				return fmt.Errorf("step %d: %w", c.Step.ID, err)
			}
			eff.Fingerprint = specs[i].Fingerprint // as the candidates after this one see it
		}
		takes = append(takes, c.Step)
	}
	taken, err := takeSteps(w, p, takes, now)
	if err != nil {
		return err
	}
	for i, c := range cands {
		claimed, err := applyClaim(w, p, c, plans[i], specs[i], effs[i], taken[c.Step.ID], res)
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

// takeEffects inserts, in candidate order, the ledger row of each key the candidates
// without a plan prepared, held by the first candidate with that key, unless the key has a
// row, and returns the rows as they stand by key: a second candidate with a key sees the
// first one's row, as it would after the first one's own insert.
func takeEffects(w *writeTx, cands []*store.ClaimCandidate, plans []*store.ClaimPlan, specs []store.EffectSpec, now int64) (map[string]*store.Effect, error) {
	first := make(map[string]int, len(cands)) // the candidate that inserts each key
	var keys []string
	var args []any // rows of effectTakeArgs values
	for i, c := range cands {
		if plans[i] != nil {
			continue
		}
		k := specs[i].Key
		if _, ok := first[k]; ok {
			continue // its insert would conflict with the first one's row
		}
		first[k] = i
		keys = append(keys, k)
		args = append(args, k, specs[i].Fingerprint, c.Run.ID, c.Step.ID, c.Run.Workflow, c.Step.Name, now)
	}
	ledger := make(map[string]*store.Effect, len(keys))
	if len(keys) == 0 {
		return ledger, nil
	}
	inserted, _, err := w.bulkN(stmtEffectsTakeBulk, bulkSizes[:], effectTakeArgs, args, nil)
	if err != nil {
		return nil, err
	}
	if inserted == int64(len(keys)) {
		// Every key was new: its row is the one its first candidate inserted.
		for _, k := range keys {
			c, spec := cands[first[k]], specs[first[k]]
			ledger[k] = &store.Effect{Key: k, State: store.EffectInFlight, Fingerprint: spec.Fingerprint, RunID: c.Run.ID, StepID: c.Step.ID,
				Workflow: c.Run.Workflow, StepName: c.Step.Name, CreatedAt: fromTS(now)}
		}
		return ledger, nil
	}
	// Some keys had a row: the rows of all of them as they stand, read in one statement.
	list, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	err = w.scanAll(stmtEffectsByKeys, []any{string(list)}, func(rows *sql.Rows) error {
		e, err := scanEffect(rows)
		if err != nil {
			return err
		}
		if _, ok := first[e.Key]; ok {
			ledger[e.Key] = e
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A key JSON cannot carry as it is (invalid UTF-8) is read alone.
	for _, k := range keys {
		if ledger[k] != nil {
			continue
		}
		e, err := scanEffect(w.queryRow(stmtEffectGet, k))
		if err != nil {
			return nil, fmt.Errorf("effect %q: %w", k, err)
		}
		ledger[k] = e
	}
	return ledger, nil
}

// takeSteps applies the compare-and-set of the steps to take, as store.PlanClaim left
// them (attempt, key, fingerprint and lease), and returns the IDs of those it changed:
// many at a time while they fill a statement, the rest one by one.
func takeSteps(w *writeTx, p *store.StepClaimParams, takes []*store.Step, now int64) (map[int64]bool, error) {
	if len(takes) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(takes)*stepTakeArgs)
	for _, st := range takes {
		args = append(args, st.ID, st.Attempt, st.EffectKey, st.Fingerprint, ts(st.LeaseExpiresAt), st.Attempt-1)
	}
	changed, rest, err := w.bulkN(stmtStepsTakeWide, wideSizes[:], stepTakeArgs, args, []any{p.Owner, now})
	if err != nil {
		return nil, err
	}
	wide, single := takes[:len(takes)-len(rest)/stepTakeArgs], takes[len(takes)-len(rest)/stepTakeArgs:]
	taken := make(map[int64]bool, len(takes))
	if changed == int64(len(wide)) {
		for _, st := range wide {
			taken[st.ID] = true
		}
	} else if err := takenOf(w, p, wide, now, taken); err != nil {
		return nil, err
	}
	for _, st := range single {
		n, err := w.execN(stmtStepTake, st.Attempt, st.EffectKey, st.Fingerprint, p.Owner, ts(st.LeaseExpiresAt), now, st.ID, st.Attempt-1)
		if err != nil {
			return nil, err
		}
		taken[st.ID] = n == 1
	}
	return taken, nil
}

// takenOf adds to taken the steps of takes that a multi-row compare-and-set changed, when
// it did not change them all (none can be lost while the transaction holds the write lock
// since it read them): those processing with the owner, attempt and lease it wrote, since
// now.
func takenOf(w *writeTx, p *store.StepClaimParams, takes []*store.Step, now int64, taken map[int64]bool) error {
	byID := make(map[int64]*store.Step, len(takes))
	ids := make([]int64, len(takes))
	for i, st := range takes {
		byID[st.ID], ids[i] = st, st.ID
	}
	return w.scanAll(stmtStepsTaken, []any{idList(ids), p.Owner, now}, func(rows *sql.Rows) error {
		var id, lease int64
		var attempt int
		if err := rows.Scan(&id, &attempt, &lease); err != nil {
			return err
		}
		if st := byID[id]; st != nil && st.Attempt == attempt && ts(st.LeaseExpiresAt) == lease {
			taken[id] = true
		}
		return nil
	})
}

// applyClaim writes and audits what plan decided for candidate c, whose spec is spec: eff
// is the ledger row its key had (for a plan of store.PlanClaim), and taken says whether the
// compare-and-set of a step to take applied.
func applyClaim(w *writeTx, p *store.StepClaimParams, c *store.ClaimCandidate, plan *store.ClaimPlan, spec store.EffectSpec, eff *store.Effect,
	taken bool, res *store.ClaimResult) (*store.ClaimedStep, error) {
	run, st := c.Run, c.Step
	now := ts(p.Now)
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
		if !taken {
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
