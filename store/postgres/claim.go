package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
func lockingScanSQL(where, order, limit string) string {
	return `WITH cand AS MATERIALIZED (
		SELECT s.* FROM steps s WHERE ` + where + `
		ORDER BY ` + order + `
		LIMIT ` + limit + `
		FOR UPDATE OF s SKIP LOCKED),
	locked AS MATERIALIZED (
		SELECT r.* FROM runs r WHERE r.id IN (SELECT run_id FROM cand) ORDER BY r.id FOR NO KEY UPDATE)
	SELECT ` + stepColumns + `, ` + runColumns + ` FROM cand s JOIN locked r ON r.id = s.run_id ORDER BY ` + order
}

// claimCandidatesSQL selects the due steps, oldest due first.
var claimCandidatesSQL = lockingScanSQL(
	`s.state IN ('pending', 'retrying') AND s.waiting = 0 AND s.next_at <= $1 AND s.workflow = ANY($2)`, "s.next_at, s.id", "$3")

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
	cands, err := lockingScan(ctx, t, func(row pgx.CollectableRow) (*store.ClaimCandidate, error) {
		st, r, err := scanStepRun(row)
		return &store.ClaimCandidate{Run: r, Step: st}, err
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
	for i, c := range cands {
		plans[i], specs[i] = store.PlanPrepare(p, c)
		if plans[i] == nil && !taking[specs[i].Key] {
			taking[specs[i].Key] = true
			takers = append(takers, i)
		}
	}
	effs, err := takeEffects(ctx, t, cands, specs, takers, p.Now)
	if err != nil {
		return err
	}
	for i, c := range cands {
		if plans[i] == nil {
			plans[i] = store.PlanClaim(p, c, specs[i], effs[specs[i].Key])
		}
	}
	return applyClaims(ctx, t, p, cands, plans, effs, &rs, res)
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

// takeEffects makes sure every key the takers prepared has a ledger row, held by the
// taker unless another step holds or completed it, and returns the rows by key, locked
// until the transaction ends. The rows are inserted and locked in key order, so that
// claimers taking several keys never wait for each other in a cycle. When another
// transaction inserts the same key at the same time, the INSERT waits for it to end; the
// SELECT that follows takes a new snapshot (read committed), so it sees that row. A row the
// INSERT conflicted with may be deleted before the SELECT (its step gave up): its key is
// taken again.
func takeEffects(ctx context.Context, t *txn, cands []*store.ClaimCandidate, specs []store.EffectSpec, takers []int, now time.Time) (map[string]*store.Effect, error) {
	effs := make(map[string]*store.Effect, len(takers))
	if len(takers) == 0 {
		return effs, nil
	}
	takers = slices.Clone(takers)
	slices.SortFunc(takers, func(a, b int) int { return strings.Compare(specs[a].Key, specs[b].Key) })
	for try := 1; ; try++ {
		n := len(takers)
		keys, fps, workflows, names := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		runIDs, stepIDs := make([]int64, n), make([]int64, n)
		for j, i := range takers {
			c := cands[i]
			keys[j], fps[j], workflows[j], names[j] = specs[i].Key, specs[i].Fingerprint, c.Run.Workflow, c.Step.Name
			runIDs[j], stepIDs[j] = c.Run.ID, c.Step.ID
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO effects (effect_key, state, fingerprint, run_id, step_id, workflow, step_name, created_at)
			SELECT u.effect_key, 'in_flight', u.fingerprint, u.run_id, u.step_id, u.workflow, u.step_name, $7
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[]) WITH ORDINALITY
				AS u(effect_key, fingerprint, run_id, step_id, workflow, step_name, ord)
			ORDER BY u.ord
			ON CONFLICT (effect_key) DO NOTHING`, keys, fps, runIDs, stepIDs, workflows, names, now)
		b.Queue(`SELECT `+effectColumns+` FROM effects WHERE effect_key = ANY($1) ORDER BY effect_key FOR UPDATE`, keys)
		br := t.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				_, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
					e, err := scanEffect(row)
					if err == nil {
						effs[e.Key] = e
					}
					return struct{}{}, err
				})
			}
		}
		if err := errors.Join(err, br.Close()); err != nil {
			return nil, err
		}
		takers = slices.DeleteFunc(takers, func(i int) bool { return effs[specs[i].Key] != nil })
		if len(takers) == 0 {
			return effs, nil
		}
		if try == 5 {
			return nil, errConflict
		}
	}
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
	plans                           []*store.ClaimPlan
	candidates                      []*store.ClaimCandidate
}

// add adds the update of candidate c, whose step is as plan left it: reason is the step's
// new reason; lastError, nextAt and output (with setOutput) are set when not nil.
func (w *stepWrites) add(c *store.ClaimCandidate, plan *store.ClaimPlan, reason string, prevAttempt int, lastError *string, nextAt *time.Time, output []byte, setOutput bool) {
	st := c.Step
	var lease *time.Time
	if st.State == store.StateProcessing {
		lease = &st.LeaseExpiresAt
	}
	w.ids = append(w.ids, st.ID)
	w.prevAttempt, w.attempt = append(w.prevAttempt, int32(prevAttempt)), append(w.attempt, int32(st.Attempt))
	w.state, w.key, w.fingerprint = append(w.state, string(st.State)), append(w.key, st.EffectKey), append(w.fingerprint, st.Fingerprint)
	w.reason, w.owner = append(w.reason, clean(reason)), append(w.owner, st.LeaseOwner)
	w.lastError, w.nextAt, w.leaseExpires = append(w.lastError, lastError), append(w.nextAt, nextAt), append(w.leaseExpires, lease)
	w.setOutput, w.output = append(w.setOutput, setOutput), append(w.output, output)
	w.plans, w.candidates = append(w.plans, plan), append(w.candidates, c)
}

// applyClaims writes what the plans decided, in one round trip for the candidates' rows,
// their attempts and the ledger's fingerprints. Then, candidate by candidate, it appends the
// candidate's events, applies its change and its propagation (release or skip of the steps
// that need it) to rs and re-derives its run's state; the dependents and the run states are
// written by the flush that ends the transaction.
func applyClaims(ctx context.Context, t *txn, p *store.StepClaimParams, cands []*store.ClaimCandidate, plans []*store.ClaimPlan,
	effs map[string]*store.Effect, rs *runSet, res *store.ClaimResult) error {
	var w stepWrites
	var fpKeys, fps []string
	for i, c := range cands {
		plan, st := plans[i], c.Step
		switch plan.Action {
		case store.ClaimPark:
			st.State = store.StateNeedsReview
			msg := clean(plan.Error)
			w.add(c, plan, plan.Reason, st.Attempt, &msg, nil, nil, false)
		case store.ClaimSkip:
			st.State = store.StateSkipped
			w.add(c, plan, plan.Reason, st.Attempt, nil, nil, nil, false)
		case store.ClaimReuse:
			w.add(c, plan, "effect_reused", st.Attempt, nil, nil, []byte(effs[plan.Spec.Key].Result), true)
		case store.ClaimWait:
			w.add(c, plan, plan.Reason, st.Attempt, nil, &plan.NextAt, nil, false)
		case store.ClaimTake:
			w.add(c, plan, "", st.Attempt-1, nil, nil, nil, false)
			if plan.UpdateFingerprint {
				fpKeys, fps = append(fpKeys, plan.Spec.Key), append(fps, plan.Spec.Fingerprint)
			}
		}
	}

	b := &pgx.Batch{}
	if len(fpKeys) > 0 {
		b.Queue(`UPDATE effects e SET fingerprint = u.fingerprint FROM unnest($1::text[], $2::text[]) AS u(effect_key, fingerprint)
			WHERE e.effect_key = u.effect_key`, fpKeys, fps)
	}
	// Every candidate is locked by this transaction; the compare-and-set on its state and
	// attempt is a guard. An attempt row starts for each step now processing.
	b.Queue(`WITH u AS (
			SELECT * FROM unnest($1::bigint[], $2::int4[], $3::int4[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
				$9::text[], $10::timestamptz[], $11::timestamptz[], $12::bool[], $13::bytea[]) WITH ORDINALITY
				AS u(id, prev_attempt, attempt, state, effect_key, fingerprint, reason, lease_owner, last_error, next_at, lease_expires_at, set_output, output, ord)),
		upd AS (
			UPDATE steps s SET state = u.state, attempt = u.attempt, effect_key = u.effect_key, fingerprint = u.fingerprint, reason = u.reason,
				lease_owner = u.lease_owner, lease_expires_at = u.lease_expires_at, last_error = coalesce(u.last_error, s.last_error),
				next_at = coalesce(u.next_at, s.next_at), output = CASE WHEN u.set_output THEN u.output ELSE s.output END, updated_at = $14
			FROM u
			WHERE s.id = u.id AND s.state IN ('pending', 'retrying') AND s.attempt = u.prev_attempt
			RETURNING s.id, s.run_id, s.name, s.attempt, s.effect_key, s.state, u.ord),
		att AS (
			INSERT INTO attempts (run_id, step_id, step_name, number, effect_key, worker, started_at)
			SELECT run_id, id, name, attempt, effect_key, $15, $14 FROM upd WHERE state = 'processing' ORDER BY ord)
		SELECT ord FROM upd`,
		w.ids, w.prevAttempt, w.attempt, w.state, w.key, w.fingerprint, w.reason, w.owner, w.lastError, w.nextAt, w.leaseExpires,
		w.setOutput, w.output, p.Now, p.Owner)
	br := t.SendBatch(ctx, b)
	applied, err := readClaimWrites(br, len(fpKeys) > 0, len(w.ids))
	if err := errors.Join(err, br.Close()); err != nil {
		return err
	}

	for i, plan := range w.plans {
		c := w.candidates[i]
		if !applied[i] {
			if plan.Action != store.ClaimTake {
				return fmt.Errorf("step %d changed while locked", w.ids[i])
			}
			// Taken meanwhile: nothing changed.
			rs.refresh(t, c.Run.ID, p.Now, store.ActorEngine)
			continue
		}
		for _, e := range plan.Events {
			t.event(e)
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
		}
		rs.refresh(t, c.Run.ID, p.Now, store.ActorEngine)
	}
	rs.queueWrites(t)
	return nil
}

// readClaimWrites reads the results of the batch applyClaims sent: which candidates'
// updates applied.
func readClaimWrites(br pgx.BatchResults, fingerprints bool, n int) (applied []bool, err error) {
	if fingerprints {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	applied = make([]bool, n)
	var ord int64
	if _, err := pgx.ForEachRow(rows, []any{&ord}, func() error {
		applied[ord-1] = true
		return nil
	}); err != nil {
		return nil, err
	}
	return applied, nil
}
