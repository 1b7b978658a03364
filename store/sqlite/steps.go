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

// scanStepRun scans a row of stepColumns followed by runColumns, then into extra.
func scanStepRun(sc scanner, extra ...any) (*store.Step, *store.Run, error) {
	var r store.Run
	var input []byte
	var state string
	var created, updated int64
	st, err := scanStep(sc, append([]any{&r.ID, &r.Workflow, &r.RunKey, &r.Entity, &input, &r.InputHash, &state, &created, &updated}, extra...)...)
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
	err = s.writeAs(ctx, "step claim", cacheShare, func(w *writeTx) error {
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
	// The statement has no LIMIT: it walks steps_due in order, and the claim stops reading
	// after limit rows. A bound LIMIT would make SQLite prepare the statement again each
	// time the limit changes (it reads the bound value when it plans).
	rows, err := w.query(stmtClaimCandidates, ts(p.Now), workflows)
	if err != nil {
		return err
	}
	var cands []*store.ClaimCandidate
	var facts []*stepStatus
	var runs []*store.Run
	for len(cands) < limit && rows.Next() {
		f := &stepStatus{}
		st, r, err := scanStepRun(rows, f.factsDest()...)
		if err != nil {
			rows.Close()
			return err
		}
		cands = append(cands, &store.ClaimCandidate{Run: r, Step: st})
		facts = append(facts, f)
		runs = append(runs, r)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	// The steps of every candidate's run, with the outputs of the completed ones.
	if err := w.addRuns(runs, true); err != nil {
		return err
	}
	// A run whose state the transaction changed holds its old state in its row until the
	// transaction ends.
	for _, c := range cands {
		if rs := w.runs[c.Run.ID]; rs != nil && rs.changed {
			c.Run.State, c.Run.UpdatedAt = rs.run.State, fromTS(rs.updatedAt)
		}
	}
	for i, c := range cands {
		if st := w.steps[c.Step.ID]; st != nil && !st.hasFacts {
			f := facts[i]
			st.attempt, st.owner, st.claim, st.key, st.hasFacts = f.attempt, f.owner, f.claim, f.key, true
		}
	}
	for _, c := range cands {
		rs, err := w.run(c.Run.ID)
		if err != nil {
			return err
		}
		c.Outputs = rs.outputsOf()
		ss := w.steps[c.Step.ID]
		if ss == nil {
			return fmt.Errorf("step %d of run %d is not loaded", c.Step.ID, c.Run.ID)
		}
		claimed, err := claimOne(w, p, c, &ss.key, res)
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

// claimOne consults the ledger for one candidate, whose ledger facts are kf, and claims,
// reuses, parks, skips or postpones it as store.PlanClaim decides.
func claimOne(w *writeTx, p *store.StepClaimParams, c *store.ClaimCandidate, kf *keyFacts, res *store.ClaimResult) (*store.ClaimedStep, error) {
	run, st := c.Run, c.Step
	now := ts(p.Now)
	oldKey, oldFingerprint := st.EffectKey, st.Fingerprint
	plan, spec := store.PlanPrepare(p, c)
	var eff *store.Effect
	taken := false
	if plan == nil {
		if kf.holds() && oldKey != spec.Key {
			// The step holds another key than the one it acts under now: effects keeps
			// that one, as it stands.
			if err := w.retireKey(st.ID); err != nil {
				return nil, err
			}
			kf.slot, kf.state = st.ID, ""
		}
		if !kf.holds() {
			// Most keys are new: the step is taken as for a free key, by one statement
			// that applies only if the key is free (no step holds it: the unique index
			// steps_key; effects has no row of it), and the ledger is consulted only when
			// it is not.
			saved := *st
			plan = store.PlanClaim(p, c, spec, freeEffect(spec, run, st))
			var err error
			if taken, err = takeStep(w, p, c, plan, true); err != nil {
				return nil, err
			}
			if !taken {
				*st, plan = saved, nil
			}
		}
		if plan == nil {
			var err error
			if eff, err = takeEffect(w, spec, run, st, kf, oldFingerprint); err != nil {
				return nil, err
			}
			plan = store.PlanClaim(p, c, spec, eff)
		}
	}
	if oldKey != "" && oldKey != st.EffectKey && st.Attempt > 0 {
		// The step's attempts were made under its old key: keep it for the audit trail of
		// that key.
		if _, err := w.exec(stmtStepKeyUsed, oldKey, st.ID); err != nil {
			return nil, err
		}
	}
	if ss := w.steps[st.ID]; ss != nil {
		ss.effectKey = st.EffectKey
	}
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
		// The step row is the ledger row: the take writes the fingerprint.
		if !taken {
			if _, err := takeStep(w, p, c, plan, false); err != nil {
				return nil, err
			}
		}
		return &store.ClaimedStep{Run: run, Step: st, Outputs: c.Outputs, PreviousOutcome: st.LastOutcome}, nil
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
	return nil, nil
}

// takeStep claims the candidate c for p.Owner as plan decided: the claim's facts go into
// the step row with the IDs of its step.claimed event and of the run.state_changed event
// that follows when the run's state changes, both derived from that row. With ifFree, the
// take applies only if no step holds the key and effects has no row of it; when it does
// not, takeStep reports false and leaves everything as it found it, the audit sequence
// included.
func takeStep(w *writeTx, p *store.StepClaimParams, c *store.ClaimCandidate, plan *store.ClaimPlan, ifFree bool) (bool, error) {
	run, st := c.Run, c.Step
	ss := w.steps[st.ID]
	if ss == nil {
		return false, fmt.Errorf("step %d of run %d is not loaded", st.ID, run.ID)
	}
	seqLast, span := w.seqLast, w.span
	claim := claimFacts{eventID: w.reserve(p.Now), at: ts(p.Now), leaseUntil: ts(st.LeaseExpiresAt), prev: string(st.LastOutcome)}
	if err := w.checkDerived(func() (*store.Event, *store.Event) {
		return store.TakeEvent(p, c), claimEvent(run, ss.id, ss.name, st.EffectKey, p.Owner, st.Attempt, &claim)
	}); err != nil {
		return false, err
	}
	was := ss.state
	ss.state = store.StateProcessing
	rs, next, changed, err := w.runChange(run.ID)
	ss.state = was
	if err != nil {
		return false, err
	}
	if changed {
		claim.runEventID, claim.runChange = w.reserve(p.Now), store.RunChange(rs.run.State, next)
	}
	q := stmtStepTake
	if ifFree {
		q = stmtStepTakeFree
	}
	n, err := w.execN(q, st.Attempt, plan.Spec.Key, plan.Spec.Fingerprint, p.Owner, claim.leaseUntil, claim.at,
		claim.eventID, claim.leaseUntil, claim.prev, nullID(claim.runEventID), claim.runChange, st.ID, st.Attempt-1, takenAt(ss.key, claim.at))
	if ifFree && (err == nil && n == 0 || uniqueViolation(err)) {
		w.seqLast, w.span = seqLast, span
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if n != 1 {
		return false, fmt.Errorf("step %d changed under the write lock", st.ID)
	}
	ss.state, ss.attempt, ss.owner, ss.effectKey, ss.claim = store.StateProcessing, st.Attempt, p.Owner, plan.Spec.Key, claim
	ss.delayed = false // the take clears the step's reason
	ss.key = keyFacts{slot: 0, state: string(store.EffectInFlight), takenAt: takenAt(ss.key, claim.at)}
	if changed {
		w.applyRunChange(rs, next, p.Now)
	}
	return true, nil
}

// takenAt is when a step whose ledger facts are k took its key, taking it at now: when it
// took it first, for a step that holds it already (a retry).
func takenAt(k keyFacts, now int64) int64 {
	if k.holds() && k.takenAt > 0 {
		return k.takenAt
	}
	return now
}

// claimEvent is the derived step.claimed event of the claim facts c of step name of run.
func claimEvent(run *store.Run, stepID int64, name, key, worker string, attempt int, c *claimFacts) *store.Event {
	return (&store.ClaimSource{EventID: c.eventID, RunID: run.ID, StepID: stepID, Workflow: run.Workflow, Entity: run.Entity, Step: name, Key: key,
		Worker: worker, Attempt: attempt, At: fromTS(c.at), LeaseUntil: fromTS(c.leaseUntil), PrevOutcome: store.Outcome(c.prev)}).Event()
}

// takeEffect returns the ledger row of spec.Key as it stands for candidate st, whose
// ledger facts are kf and whose fingerprint was fingerprint before Prepare: the step's own
// when it holds the key, the holder's or the row in effects, or, for a free key, the row
// the take will write into the step. A row in effects that st holds in flight (written
// before the migration, or retired when st was given another key) moves into st's row.
func takeEffect(w *writeTx, spec store.EffectSpec, run *store.Run, st *store.Step, kf *keyFacts, fingerprint string) (*store.Effect, error) {
	if kf.holds() {
		eff := &store.Effect{Key: spec.Key, State: store.EffectState(kf.state), Fingerprint: fingerprint, RunID: run.ID, StepID: st.ID,
			Workflow: run.Workflow, StepName: st.Name, CreatedAt: fromTS(kf.takenAt), CompletedAt: fromTS(kf.completedAt),
			RetainUntil: fromTS(kf.retainUntil)}
		if eff.State == store.EffectCompleted {
			eff.Result = kf.result
		}
		return eff, nil
	}
	eff, err := w.keyHolder(spec.Key)
	if err != nil {
		return nil, err
	}
	if eff == nil {
		return freeEffect(spec, run, st), nil
	}
	if eff.StepID == st.ID && eff.State == store.EffectInFlight {
		if _, err := w.exec(stmtEffectRelease, spec.Key, st.ID); err != nil {
			return nil, err
		}
		kf.slot, kf.state, kf.takenAt = 0, string(store.EffectInFlight), ts(eff.CreatedAt)
	}
	return eff, nil
}

// freeEffect is the ledger row of a free key spec.Key that step st of run takes.
func freeEffect(spec store.EffectSpec, run *store.Run, st *store.Step) *store.Effect {
	return &store.Effect{Key: spec.Key, State: store.EffectInFlight, Fingerprint: spec.Fingerprint, RunID: run.ID, StepID: st.ID,
		Workflow: run.Workflow, StepName: st.Name}
}

// StepRecord implements store.Store.
func (s *Store) StepRecord(ctx context.Context, ps []store.StepRecordParams) ([]error, error) {
	results, valid, ids := validateRecords(ps)
	if len(ids) == 0 {
		return results, nil
	}
	err := s.writeAs(ctx, "step record", cacheShare, func(w *writeTx) error {
		w.outputs = true // for the writer's cache, which keeps only runs read with them
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
	// The steps of the runs of every entry's step, read once unless the transaction knows
	// them (from the writer's cache), and the facts of the steps recorded.
	var unknown []int64
	for _, id := range ids {
		if st := w.steps[id]; st != nil {
			w.use(w.runs[st.runID])
		} else {
			unknown = append(unknown, id)
		}
	}
	if err := w.loadRuns(stmtRunsOfSteps, unknown); err != nil {
		return err
	}
	if err := w.loadFacts(ids); err != nil {
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
// compare-and-set on the step did not apply. The attempt row is inserted with the end and
// the claim the step row held (or, for an attempt claimed before migration 0011, its row is
// updated); a completion's step.completed event, and the run.state_changed event right
// after it, are derived from that row.
func recordOne(w *writeTx, p *store.StepRecordParams) (lost int, err error) {
	now := ts(p.Now)
	// The step as the transaction knows it: its run, name and key do not change here.
	ss := w.steps[p.StepID]
	if ss == nil || ss.state != store.StateProcessing || ss.owner != p.Owner || ss.attempt != p.Attempt {
		return recordLost(w, p)
	}
	output := p.RecordOutput()
	rs, err := w.run(ss.runID)
	if err != nil {
		return applied, err
	}
	st := &store.Step{ID: p.StepID, RunID: ss.runID, Name: ss.name, EffectKey: ss.effectKey, State: p.NextState, Attempt: p.Attempt}
	plan := store.PlanRecord(p, rs.run, st, p.Error)
	// The ledger row is the step's: the compare-and-set completes or releases the key the
	// step holds. A step written before migration 0012 has its row in effects.
	args := []any{string(p.NextState), ts(p.RecordNextAt()), string(p.Outcome), output, p.Error, p.Reason, now, p.StepID, p.Owner, p.Attempt}
	q := stmtStepRecord
	switch {
	case plan.Effect == store.EffectComplete && ss.key.holdsInFlight():
		q, args = stmtStepRecordComplete, append(args, ts(p.RetainUntil))
		ss.key.state, ss.key.completedAt, ss.key.retainUntil = string(store.EffectCompleted), now, ts(p.RetainUntil)
	case plan.Effect == store.EffectRelease && ss.key.holdsInFlight():
		q = stmtStepRecordRelease
		ss.key = keyFacts{slot: ss.id}
	}
	n, err := w.execN(q, args...)
	if err != nil {
		return applied, err
	}
	if n == 0 {
		return applied, fmt.Errorf("step %d changed under the write lock", p.StepID)
	}
	if ss.key.legacy() {
		switch plan.Effect {
		case store.EffectComplete:
			_, err = w.exec(stmtEffectComplete, output, now, ts(p.RetainUntil), st.EffectKey, st.ID)
		case store.EffectRelease:
			_, err = w.exec(stmtEffectRelease, st.EffectKey, st.ID)
		}
		if err != nil {
			return applied, err
		}
	}
	claim := ss.claim
	ss.set(p.NextState, output)
	ss.delayed = p.Reason == store.ReasonDelayed
	ss.owner, ss.claim = "", claimFacts{eventID: -1}
	derived := claim.inFlight() && store.DerivableRecord(p)
	ev := plan.Event
	if ev == nil && !derived {
		ev = store.RecordEvent(p, rs.run, st, p.Error)
	}
	var a *attemptRow
	if claim.inFlight() {
		endID := w.reserve(p.Now)
		if !derived {
			w.eventAs(ev, endID)
		}
		ss.claim = claim
		a = w.endAttempt(endID, ss, p.Owner, p.Attempt, p.Now, p.Outcome, p.Error, p)
		ss.claim = claimFacts{eventID: -1}
		if derived {
			a.endDerived, a.endReason = true, p.Reason
			if actor := p.RecordActor(); actor != p.Owner {
				a.endActor = actor
			}
			if err := w.checkDerived(func() (*store.Event, *store.Event) {
				return store.RecordEvent(p, rs.run, st, p.Error), endEvent(rs.run, a)
			}); err != nil {
				return applied, err
			}
		}
	} else {
		w.event(ev)
		if claim.legacy() {
			if _, err := w.exec(stmtAttemptRecord, now, string(p.Outcome), p.Error, p.ResponseStatus, p.ResponseExcerpt, p.Request, p.StepID, p.Attempt, p.Owner); err != nil {
				return applied, err
			}
		}
	}
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
	if derived && w.seqLast == a.id {
		// The run's state change follows the derived completion at once: derived too.
		rs, next, changed, err := w.runChange(st.RunID)
		if err != nil || !changed {
			return applied, err
		}
		a.endRunEventID, a.endRunChange = w.reserve(p.Now), store.RunChange(rs.run.State, next)
		if err := w.checkDerived(func() (*store.Event, *store.Event) {
			return store.RunStateEvent(p.Now, rs.run.ID, rs.run.Workflow, rs.run.Entity, p.RecordActor(), rs.run.State, next), endRunEvent(rs.run, a)
		}); err != nil {
			return applied, err
		}
		w.applyRunChange(rs, next, p.Now)
		return applied, nil
	}
	return applied, w.refresh(st.RunID, p.Now, p.RecordActor())
}

// endEvent is the derived step.completed event of attempt row a of run.
func endEvent(run *store.Run, a *attemptRow) *store.Event {
	actor := a.endActor
	if actor == "" {
		actor = a.worker
	}
	return (&store.EndSource{EventID: a.id, RunID: run.ID, StepID: a.stepID, Workflow: run.Workflow, Entity: run.Entity, Step: a.name, Key: a.key,
		Actor: actor, Reason: a.endReason, Error: a.err, Attempt: a.number, ResponseStatus: a.status, Outcome: store.Outcome(a.outcome),
		At: fromTS(a.endedAt)}).Event()
}

// endRunEvent is the derived run.state_changed event that followed the end of attempt a.
func endRunEvent(run *store.Run, a *attemptRow) *store.Event {
	actor := a.endActor
	if actor == "" {
		actor = a.worker
	}
	from, to, _ := store.ParseRunChange(a.endRunChange)
	return (&store.RunChangeSource{EventID: a.endRunEventID, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity, Actor: actor,
		From: from, To: to, At: fromTS(a.endedAt)}).Event()
}

// recordLost handles the result of an attempt whose lease is gone: the attempt row keeps
// what really happened, and a success is kept in the ledger so it is not repeated. For a
// step cancelled while the attempt ran, the ledger keeps what happened
// (store.PlanCancelledRecord) and the attempt row is written with the claim the step row
// held.
func recordLost(w *writeTx, p *store.StepRecordParams) (int, error) {
	var claim claimFacts
	var key keyFacts
	st, err := scanStep(w.queryRow(stmtStepGet, p.StepID), append(claimDest(&claim), keyDest(&key)...)...)
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
		if _, err := w.exec(stmtStepCancelledRecord, string(p.Outcome), p.Error, store.CancelledRecordReason(p), ts(p.Now), st.ID, p.Owner, p.Attempt); err != nil {
			return lostCancelled, err
		}
		if ss := w.steps[st.ID]; ss != nil {
			ss.owner, ss.claim = "", claimFacts{eventID: -1}
		}
		switch {
		case claim.inFlight():
			ss := &stepStatus{id: st.ID, runID: st.RunID, name: st.Name, effectKey: st.EffectKey, claim: claim}
			w.endAttempt(ev.ID, ss, p.Owner, p.Attempt, p.Now, p.Outcome, p.Error, p)
		case claim.legacy():
			if _, err := w.exec(stmtAttemptRecord, ts(p.Now), string(p.Outcome), p.Error, p.ResponseStatus, p.ResponseExcerpt, p.Request, p.StepID, p.Attempt, p.Owner); err != nil {
				return lostCancelled, err
			}
		}
		_, err = keepOrRelease(w, effect, p, st, &key)
		return lostCancelled, err
	}
	// The attempt ended already (a reaper closed it, or this is its second record): its row
	// keeps what really happened, unless the row derives its completion, which is final.
	if a := w.bufferedAttempt(p.StepID, p.Attempt, p.Owner); a != nil {
		if !a.endDerived {
			a.endedAt, a.outcome, a.err, a.status, a.excerpt, a.request = ts(p.Now), string(p.Outcome), p.Error, p.ResponseStatus, p.ResponseExcerpt, p.Request
		}
	} else if _, err := w.exec(stmtAttemptRecord, ts(p.Now), string(p.Outcome), p.Error, p.ResponseStatus, p.ResponseExcerpt, p.Request, p.StepID, p.Attempt, p.Owner); err != nil {
		return lostLease, err
	}
	w.event(store.LostRecordEvent(p, rs.run, st))
	if p.Outcome != store.OutcomeSuccess {
		return lostLease, nil
	}
	kept, err := keepOrRelease(w, store.EffectComplete, p, st, &key)
	if err != nil {
		return lostLease, err
	}
	if kept {
		w.event(store.LostResultKeptEvent(p, rs.run, st))
	}
	return lostLease, nil
}

// keepOrRelease applies to the ledger what the record p of step st, which no longer holds
// its lease (key: its ledger facts), decided: a success is kept in the ledger row the step
// still holds in flight, as the key's result; a refusal releases the key. It reports
// whether it changed the row.
func keepOrRelease(w *writeTx, effect store.EffectChange, p *store.StepRecordParams, st *store.Step, key *keyFacts) (bool, error) {
	var n int64
	var err error
	switch {
	case effect == store.EffectComplete && key.legacy():
		n, err = w.execN(stmtEffectComplete, p.SuccessOutput(), ts(p.Now), ts(p.RetainUntil), st.EffectKey, st.ID)
	case effect == store.EffectComplete:
		n, err = w.execN(stmtKeyKeep, p.SuccessOutput(), ts(p.Now), ts(p.RetainUntil), st.ID)
	case effect == store.EffectRelease && key.legacy():
		n, err = w.execN(stmtEffectRelease, st.EffectKey, st.ID)
	case effect == store.EffectRelease:
		n, err = w.execN(stmtKeyReleaseInFlight, st.ID)
	}
	if n == 1 {
		if ss := w.steps[st.ID]; ss != nil {
			if effect == store.EffectComplete {
				ss.key.state, ss.key.result, ss.key.completedAt, ss.key.retainUntil = string(store.EffectCompleted), p.SuccessOutput(), ts(p.Now), ts(p.RetainUntil)
			} else {
				ss.key = keyFacts{slot: st.ID}
			}
		}
	}
	return n == 1, err
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
		claims := map[int64]claimFacts{}
		for _, q := range []stmtID{stmtReapCandidates, stmtReapCancelled} {
			rows, err := w.query(q, ts(p.Now), limit)
			if err != nil {
				return err
			}
			for rows.Next() {
				var claim claimFacts
				st, r, err := scanStepRun(rows, claimDest(&claim)...)
				if err != nil {
					rows.Close()
					return err
				}
				expired = append(expired, pair{r, st})
				runs = append(runs, r)
				claims[st.ID] = claim
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
			for _, ev := range plan.Events {
				w.event(ev)
			}
			// The attempt ends with an unknown outcome, under the ID of its lease.expired.
			switch claim := claims[e.st.ID]; {
			case claim.inFlight():
				ss := &stepStatus{id: e.st.ID, runID: e.run.ID, name: e.st.Name, effectKey: e.st.EffectKey, claim: claim}
				w.endAttempt(plan.Events[0].ID, ss, e.st.LeaseOwner, e.st.Attempt, p.Now, store.OutcomeUnknown, plan.Error, nil)
			case claim.legacy():
				if _, err := w.exec(stmtAttemptReap, now, plan.Error, e.st.ID, e.st.Attempt); err != nil {
					return err
				}
			}
			if ss := w.steps[e.st.ID]; ss != nil {
				ss.owner, ss.claim = "", claimFacts{eventID: -1}
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
	// A heartbeat moves leases only: the writer's cache holds none.
	err := s.writeAs(ctx, "step heartbeat", cacheKeep, func(w *writeTx) error {
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
	// A checkpoint writes progress only: the writer's cache holds none.
	return s.writeAs(ctx, "step checkpoint", cacheKeep, func(w *writeTx) error {
		n, err := w.execN(stmtStepCheckpoint, []byte(p.Progress), ts(p.Now), p.StepID, p.Owner, p.Attempt)
		if err == nil && n == 0 {
			err = p.LeaseLost()
		}
		return err
	})
}
