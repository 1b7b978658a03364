package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// StepClaim implements store.Store. It takes a batch of candidates in a fixed number of
// round trips, whatever the batch's size:
//
//  1. the due steps, locked with FOR UPDATE SKIP LOCKED (concurrent claimers each take
//     different steps without waiting), and their runs, locked in ID order;
//  2. the steps of those runs (what decides the runs' states and the steps' dependents,
//     and the outputs of the completed ones), read once the runs are locked;
//  3. after Prepare, in Go, the ledger rows of the candidates' keys: one multi-row INSERT …
//     ON CONFLICT DO NOTHING, then one SELECT … FOR UPDATE of them in key order;
//  4. after PlanClaim, in Go, every candidate's update and the attempt rows;
//  5. the release, skip of dependents and the run states, decided in Go candidate by
//     candidate (see runSet), and the audit events, just before COMMIT.
func (s *Store) StepClaim(ctx context.Context, p store.StepClaimParams) (*store.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if len(p.Workflows) == 0 {
		return &store.ClaimResult{}, nil
	}
	if p.Limit <= 0 {
		p.Limit = 1
	}
	res := &store.ClaimResult{}
	err := s.keyedTx(ctx, "step claim", func(t *txn) error {
		*res = store.ClaimResult{}
		return claim(ctx, t, &p, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// lockingScanSQL selects the steps matching where, in order, at most $limit of them,
// skipping those another transaction holds, and locks their runs in ID order. The run rows
// come from the locking scan, so they are the newest versions.
func lockingScanSQL(where, order, limit string, extra ...string) string {
	cols := stepColumns + `, ` + runColumns
	for _, c := range extra {
		cols += `, ` + c
	}
	return `WITH cand AS MATERIALIZED (
		SELECT s.* FROM steps s WHERE ` + where + `
		ORDER BY ` + order + `
		LIMIT ` + limit + `
		FOR UPDATE OF s SKIP LOCKED),
	locked AS MATERIALIZED (
		SELECT r.* FROM runs r WHERE r.id IN (SELECT run_id FROM cand) ORDER BY r.id FOR NO KEY UPDATE)
	SELECT ` + cols + ` FROM cand s JOIN locked r ON r.id = s.run_id ORDER BY ` + order
}

// claimCandidatesSQL selects the due steps, oldest due first.
var claimCandidatesSQL = lockingScanSQL(
	`s.state IN ('pending', 'retrying') AND s.waiting = 0 AND s.next_at <= $1 AND s.workflow = ANY($2)`, "s.next_at, s.id", "$3", ledgerColumns)

// claimCandidatesNoWaitSQL is claimCandidatesSQL for a transaction that already holds
// run locks (WriteBatch's records took theirs): it leaves out the steps whose run another
// transaction holds instead of waiting for it, so that two such transactions never wait
// for each other. A step left out stays due for the next claim.
var claimCandidatesNoWaitSQL = strings.Replace(claimCandidatesSQL, "FOR NO KEY UPDATE)", "FOR NO KEY UPDATE SKIP LOCKED)", 1)

// customPlans makes the statements that follow in the transaction be planned for their
// parameters, and keptPlans returns to the connection's mode. A locking scan's best plan
// depends on how many steps are due and how many it takes: a generic plan, costed for
// neither, could sort every due step to lock the first few. Only the claim's and the
// reaper's scans are planned this way; every other statement keeps its plan.
const (
	customPlans = `SET LOCAL plan_cache_mode = force_custom_plan`
	keptPlans   = `SET LOCAL plan_cache_mode TO DEFAULT`
)

// lockingScan sends the transaction's queued writes, if any (so that query sees them), and
// query planned for its arguments (between customPlans and keptPlans, unless the
// connections plan that way already) in one round trip, and returns query's rows.
func lockingScan[T any](ctx context.Context, t *txn, scan func(pgx.CollectableRow) (T, error), query string, args ...any) ([]T, error) {
	b := &pgx.Batch{}
	if t.queued != nil {
		b, t.queued = t.queued, nil
	}
	if !t.s.customPlans {
		b.Queue(customPlans)
	}
	queued := b.Len()
	b.Queue(query, args...)
	if !t.s.customPlans {
		b.Queue(keptPlans)
	}
	br := t.SendBatch(ctx, b)
	defer br.Close()
	for range queued {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, err
	}
	if !t.s.customPlans {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	return out, br.Close()
}

func claim(ctx context.Context, t *txn, p *store.StepClaimParams, res *store.ClaimResult) error {
	return claimWith(ctx, t, claimCandidatesSQL, p, res)
}

// claimWith is claim with the candidates that query (claimCandidatesSQL or
// claimCandidatesNoWaitSQL) selects.
func claimWith(ctx context.Context, t *txn, query string, p *store.StepClaimParams, res *store.ClaimResult) error {
	keyOf := map[*store.ClaimCandidate]keyFacts{}
	cands, err := lockingScan(ctx, t, func(row pgx.CollectableRow) (*store.ClaimCandidate, error) {
		var ks keyScan
		st, r, err := scanStepRun(row, ks.dest()...)
		c := &store.ClaimCandidate{Run: r, Step: st}
		keyOf[c] = ks.facts()
		return c, err
	}, query, p.Now, p.Workflows, p.Limit)
	if err != nil || len(cands) == 0 {
		return err
	}
	var rs runSet
	for _, c := range cands {
		rs.add(c.Run)
	}
	if err := loadSteps(ctx, t, &rs); err != nil {
		return err
	}
	outputs := map[int64]map[string]json.RawMessage{}
	for _, c := range cands {
		if outputs[c.Run.ID] == nil {
			outputs[c.Run.ID] = rs.outputs(c.Run.ID)
		}
		c.Outputs = maps.Clone(outputs[c.Run.ID])
	}

	// Prepare each candidate; the first one (in claim order) with a key takes its row.
	p = storablePrepare(p)
	plans := make([]*store.ClaimPlan, len(cands))
	specs := make([]store.EffectSpec, len(cands))
	var takers []int
	taking := map[string]bool{}
	oldKeys := make([]string, len(cands))
	var retire []int64
	for i, c := range cands {
		held := c.Step.EffectKey
		if c.Step.Attempt > 0 {
			oldKeys[i] = c.Step.EffectKey // the key its attempts were made under
		}
		plans[i], specs[i] = store.PlanPrepare(p, c)
		if plans[i] != nil {
			continue
		}
		if k := keyOf[c]; k.holds() && held != specs[i].Key {
			// The step holds another key than the one it acts under now: effects keeps
			// that one, as it stands.
			retire = append(retire, c.Step.ID)
			keyOf[c] = keyFacts{slot: c.Step.ID}
		}
		if !taking[specs[i].Key] {
			taking[specs[i].Key] = true
			takers = append(takers, i)
		}
	}
	effs, moveIn, err := takeEffects(ctx, t, cands, specs, takers)
	if err != nil {
		return err
	}
	for i, c := range cands {
		if plans[i] == nil {
			plans[i] = store.PlanClaim(p, c, specs[i], effs[specs[i].Key])
		}
	}
	// A step whose key changes keeps the key its attempts were made under, for the audit
	// trail of that key.
	var usedKeys []string
	var usedSteps []int64
	for i, c := range cands {
		if oldKeys[i] != "" && oldKeys[i] != c.Step.EffectKey {
			usedKeys, usedSteps = append(usedKeys, oldKeys[i]), append(usedSteps, c.Step.ID)
		}
	}
	if len(usedKeys) > 0 {
		t.queue(`INSERT INTO step_keys_used (effect_key, step_id) SELECT * FROM unnest($1::text[], $2::bigint[]) ON CONFLICT DO NOTHING`, usedKeys, usedSteps)
	}
	b := &pgx.Batch{}
	if len(retire) > 0 {
		b.Queue(retireSQL, retire)
	}
	for _, i := range moveIn {
		b.Queue(`DELETE FROM effects WHERE effect_key = $1 AND step_id = $2 AND state = 'in_flight'`, specs[i].Key, cands[i].Step.ID)
	}
	return applyClaims(ctx, t, b, p, cands, plans, effs, &rs, res)
}

// storablePrepare returns p with a Prepare that refuses, as an invalid key, an effect key
// or fingerprint PostgreSQL cannot store (a NUL byte, invalid UTF-8): the step is parked
// instead of failing every claim that meets it.
func storablePrepare(p *store.StepClaimParams) *store.StepClaimParams {
	prepare := p.Prepare
	q := *p
	q.Prepare = func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		spec, err := prepare(c)
		if err == nil && spec.Skip == "" && (clean(spec.Key) != spec.Key || clean(spec.Fingerprint) != spec.Fingerprint) {
			err = &store.PrepareError{Reason: store.ReasonInvalidKey,
				Err: fmt.Errorf("the effect key %q or its fingerprint contains a NUL byte or invalid UTF-8", spec.Key)}
		}
		return spec, err
	}
	return &q
}

// loadSteps reads the steps of the runs in rs, which the transaction locked.
func loadSteps(ctx context.Context, t *txn, rs *runSet) error {
	rows, err := t.Query(ctx, stepStatusSQL, rs.ids())
	if err != nil {
		return err
	}
	return rs.load(rows)
}

// takeEffects returns the ledger rows of the keys the takers prepared, by key: the holder's
// (a step, or a row of effects) or, for a free key, the row the taker's take will write
// into its step. The keys are locked first (see keyLocksSQL), so that a free key stays
// free until this transaction ends. moveIn lists the takers whose own key is in effects
// in flight (written before migration 0014, or retired): it moves into their row.
func takeEffects(ctx context.Context, t *txn, cands []*store.ClaimCandidate, specs []store.EffectSpec, takers []int) (map[string]*store.Effect, []int, error) {
	effs := make(map[string]*store.Effect, len(takers))
	if len(takers) == 0 {
		return effs, nil, nil
	}
	keys := make([]string, len(takers))
	for j, i := range takers {
		keys[j] = specs[i].Key
	}
	holders, err := keyHolders(ctx, t, keys)
	if err != nil {
		return nil, nil, err
	}
	var moveIn []int
	for _, i := range takers {
		c, spec := cands[i], specs[i]
		h := holders[spec.Key]
		eff := h.Effect
		switch {
		case eff == nil:
			eff = &store.Effect{Key: spec.Key, State: store.EffectInFlight, Fingerprint: spec.Fingerprint, RunID: c.Run.ID, StepID: c.Step.ID,
				Workflow: c.Run.Workflow, StepName: c.Step.Name}
		case eff.StepID == c.Step.ID && eff.State == store.EffectInFlight && !h.inStep:
			moveIn = append(moveIn, i)
		}
		effs[spec.Key] = eff
	}
	return effs, moveIn, nil
}

// stepWrites are the updates of a claim's candidates, sent as one statement.
type stepWrites struct {
	ids                             []int64
	prevAttempt, attempt            []int32
	state, key, fingerprint, reason []string
	owner                           []string
	lastError                       []*string
	nextAt, leaseExpires            []*time.Time
	setOutput                       []bool
	output                          [][]byte
	// The claim of a take: its step.claimed event and the run.state_changed after it
	// (nil: none), the outcome of the attempt before, and the change.
	claimEv, runEv []*txEvent
	prevOutcome    []string
	runChange      []string
}

// add adds the update of candidate c, whose step is as plan left it: reason is the step's
// new reason; lastError, nextAt and output (with setOutput) are set when not nil.
func (w *stepWrites) add(c *store.ClaimCandidate, reason store.Reason, prevAttempt int, lastError *string, nextAt *time.Time, output []byte, setOutput bool) {
	st := c.Step
	var lease *time.Time
	if st.State == store.StateProcessing {
		lease = &st.LeaseExpiresAt
	}
	w.ids = append(w.ids, st.ID)
	w.prevAttempt, w.attempt = append(w.prevAttempt, int32(prevAttempt)), append(w.attempt, int32(st.Attempt))
	w.state, w.key, w.fingerprint = append(w.state, string(st.State)), append(w.key, st.EffectKey), append(w.fingerprint, st.Fingerprint)
	w.reason, w.owner = append(w.reason, string(clean(reason))), append(w.owner, st.LeaseOwner)
	w.lastError, w.nextAt, w.leaseExpires = append(w.lastError, lastError), append(w.nextAt, nextAt), append(w.leaseExpires, lease)
	w.setOutput, w.output = append(w.setOutput, setOutput), append(w.output, output)
	w.claimEv, w.runEv, w.prevOutcome, w.runChange = append(w.claimEv, nil), append(w.runEv, nil), append(w.prevOutcome, ""), append(w.runChange, "")
}

// applyClaims writes what the plans decided. Candidate by candidate, in claim order, it
// appends the candidate's events, applies its change and its propagation (release or skip
// of the steps that need it) to rs and re-derives its run's state; a take's step.claimed,
// and the run.state_changed that follows it, are derived from the step row. Then one round
// trip writes the candidates' rows, drawing the IDs of every event of the transaction so
// far, and the ledger's fingerprints. The candidates are locked, so every update applies;
// one that does not rolls the transaction back (errConflict). The dependents and the run
// states are written by the flush that ends the transaction.
func applyClaims(ctx context.Context, t *txn, b *pgx.Batch, p *store.StepClaimParams, cands []*store.ClaimCandidate, plans []*store.ClaimPlan,
	effs map[string]*store.Effect, rs *runSet, res *store.ClaimResult) error {
	var w stepWrites
	for i, c := range cands {
		plan, st := plans[i], c.Step
		switch plan.Action {
		case store.ClaimPark:
			st.State = store.StateNeedsReview
			msg := clean(plan.Error)
			w.add(c, plan.Reason, st.Attempt, &msg, nil, nil, false)
		case store.ClaimSkip:
			st.State = store.StateSkipped
			w.add(c, plan.Reason, st.Attempt, nil, nil, nil, false)
		case store.ClaimReuse:
			w.add(c, store.ReasonEffectReused, st.Attempt, nil, nil, []byte(effs[plan.Spec.Key].Result), true)
		case store.ClaimWait:
			w.add(c, plan.Reason, st.Attempt, nil, &plan.NextAt, nil, false)
		case store.ClaimTake:
			// The step row is the ledger row: the take writes the fingerprint.
			w.add(c, "", st.Attempt-1, nil, nil, nil, false)
		}
		j := len(w.ids) - 1
		if plan.Action == store.ClaimTake {
			w.claimEv[j], w.prevOutcome[j] = t.derive(p.Now), string(st.LastOutcome)
		} else {
			for _, e := range plan.Events {
				t.event(e)
			}
		}
		switch plan.Action {
		case store.ClaimPark:
			res.Parked++
			rs.set(c.Run.ID, c.Step.ID, store.StateNeedsReview)
		case store.ClaimSkip:
			res.Skipped++
			rs.set(c.Run.ID, c.Step.ID, store.StateSkipped)
			rs.skipDependents(t, c.Run.ID, p.Now)
		case store.ClaimReuse:
			res.Reused++
			res.ReusedSteps = append(res.ReusedSteps, &store.ClaimedStep{Run: c.Run, Step: c.Step, Outputs: c.Outputs})
			rs.set(c.Run.ID, c.Step.ID, store.StateCompleted)
			rs.release(c.Run.ID, c.Step.Name, p.Now)
		case store.ClaimWait:
			res.Waiting++
			if r := rs.byID[c.Run.ID]; r != nil {
				for _, st := range r.steps {
					if st.id == c.Step.ID {
						st.delayed = plan.Reason == store.ReasonDelayed
					}
				}
			}
		case store.ClaimTake:
			res.Claimed = append(res.Claimed, &store.ClaimedStep{Run: c.Run, Step: c.Step, Outputs: c.Outputs, PreviousOutcome: c.Step.LastOutcome})
			rs.set(c.Run.ID, c.Step.ID, store.StateProcessing)
			if r, next, changed := rs.change(c.Run.ID); changed {
				// Right after the take: derived from the step row too.
				w.runEv[j] = t.derive(p.Now)
				w.runChange[j] = store.RunChange(r.run.State, next)
				rs.apply(r, next, p.Now)
			}
		}
		rs.refresh(t, c.Run.ID, p.Now, store.ActorEngine)
	}
	n := len(w.ids)
	claimOrd, runOrd := make([]*int32, n), make([]*int32, n)
	for j := range n {
		if w.claimEv[j] != nil {
			o := int32(t.ordinal(w.claimEv[j]))
			claimOrd[j] = &o
		}
		if w.runEv[j] != nil {
			o := int32(t.ordinal(w.runEv[j]))
			runOrd[j] = &o
		}
	}

	t.queueMark(b)
	// Every candidate is locked by this transaction; the compare-and-set on its state and
	// attempt is a guard. A take keeps its claim in the step row.
	b.Queue(`WITH `+fmt.Sprintf(drawSQL, "$19")+`,
		u AS (
			SELECT * FROM unnest($1::bigint[], $2::int4[], $3::int4[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
				$9::text[], $10::timestamptz[], $11::timestamptz[], $12::bool[], $13::bytea[], $15::int4[], $16::int4[], $17::text[], $18::text[])
				WITH ORDINALITY AS u(id, prev_attempt, attempt, state, effect_key, fingerprint, reason, lease_owner, last_error, next_at,
					lease_expires_at, set_output, output, claim_ord, run_ord, prev_outcome, run_change, ord)),
		upd AS (
			UPDATE steps s SET state = u.state, attempt = u.attempt, effect_key = u.effect_key, fingerprint = u.fingerprint, reason = u.reason,
				lease_owner = u.lease_owner, lease_expires_at = u.lease_expires_at, last_error = coalesce(u.last_error, s.last_error),
				next_at = coalesce(u.next_at, s.next_at), output = CASE WHEN u.set_output THEN u.output ELSE s.output END, updated_at = $14,
				claim_event_id = ci.id, claimed_at = CASE WHEN ci.id IS NOT NULL THEN $14::timestamptz END,
				claim_lease_until = CASE WHEN ci.id IS NOT NULL THEN u.lease_expires_at END, claim_prev_outcome = u.prev_outcome,
				claim_run_event_id = ri.id, claim_run_change = u.run_change,
				key_slot = CASE WHEN ci.id IS NOT NULL THEN 0 WHEN s.effect_key = u.effect_key THEN s.key_slot ELSE s.id END,
				key_state = CASE WHEN ci.id IS NOT NULL THEN 'in_flight' ELSE s.key_state END,
				key_taken_at = CASE WHEN ci.id IS NOT NULL AND NOT (coalesce(s.key_slot, -1) = 0 AND s.effect_key = u.effect_key) THEN $14::timestamptz
					ELSE s.key_taken_at END
			FROM u LEFT JOIN ids ci ON ci.ord = u.claim_ord LEFT JOIN ids ri ON ri.ord = u.run_ord
			WHERE s.id = u.id AND s.state IN ('pending', 'retrying') AND s.attempt = u.prev_attempt
			RETURNING u.ord)
		SELECT false, ord, NULL::bigint FROM upd UNION ALL SELECT true, ord, id FROM ids`,
		w.ids, w.prevAttempt, w.attempt, w.state, w.key, w.fingerprint, w.reason, w.owner, w.lastError, w.nextAt, w.leaseExpires,
		w.setOutput, w.output, p.Now, claimOrd, runOrd, w.prevOutcome, w.runChange, t.undrawn())
	applied := make([]bool, n)
	ids := make([]int64, t.undrawn())
	err := sendQuery(ctx, t, b, func(rows pgx.Rows) error {
		var isID bool
		var ord int64
		var id *int64
		_, err := pgx.ForEachRow(rows, []any{&isID, &ord, &id}, func() error {
			if isID {
				ids[ord-1] = *id
			} else {
				applied[ord-1] = true
			}
			return nil
		})
		return err
	})
	if err != nil {
		return err
	}
	for j := range n {
		if !applied[j] {
			return fmt.Errorf("step %d changed while locked: %w", w.ids[j], errConflict)
		}
	}
	if err := t.assign(ids); err != nil {
		return err
	}
	rs.queueWrites(t)
	return nil
}
