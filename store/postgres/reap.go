package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// StepReapExpired implements store.Store. Expired steps are locked with FOR UPDATE SKIP
// LOCKED, so a step whose worker is recording its result right now is left to that worker,
// and their runs in ID order; the steps of those runs are then read and the expired steps
// and their attempts written in one round trip, and the runs' states, derived in Go step by
// step (see runSet), are written with the audit events just before COMMIT.
func (s *Store) StepReapExpired(ctx context.Context, p store.StepReapParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	if p.Limit <= 0 {
		p.Limit = 100
	}
	var reaped, cancelled int
	err := s.keyedTx(ctx, "step reap", func(t *txn) error {
		var err error
		reaped, err = reap(ctx, t, &p)
		return err
	})
	if err != nil {
		return 0, err
	}
	// In a transaction of its own, so that each takes its locks in its own order.
	err = s.keyedTx(ctx, "step reap cancelled", func(t *txn) error {
		var err error
		cancelled, err = reapCancelled(ctx, t, &p)
		return err
	})
	if err != nil {
		return reaped, err
	}
	return reaped + cancelled, nil
}

// reapCancelled ends the leases of steps cancelled while their attempt ran whose worker
// vanished: the attempt is closed with outcome unknown, the step stays cancelled, its key
// held. Rare, so one statement per step.
func reapCancelled(ctx context.Context, t *txn, p *store.StepReapParams) (int, error) {
	type expired struct {
		run   *store.Run
		st    *store.Step
		claim claimFacts
	}
	exp, err := lockingScan(ctx, t, func(row pgx.CollectableRow) (*expired, error) {
		var cs claimScan
		st, r, err := scanStepRun(row, cs.dest()...)
		return &expired{run: r, st: st, claim: cs.facts()}, err
	}, lockingScanSQL(`s.claim_event_id IS NOT NULL AND s.state = 'cancelled' AND s.lease_owner <> '' AND s.lease_expires_at < $1`,
		"s.lease_expires_at, s.id", "$2", claimColumns), p.Now, p.Limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range exp {
		plan, err := store.PlanReap(p.Now, e.run, e.st, p.Decide)
		if err != nil {
			return 0, err
		}
		tag, err := t.Exec(ctx, `UPDATE steps SET lease_owner = '', lease_expires_at = NULL, last_outcome = 'unknown', last_error = $1, reason = $2, updated_at = $3,`+
			claimCleared+` WHERE id = $4 AND state = 'cancelled' AND lease_owner = $5 AND attempt = $6`,
			clean(plan.Error), plan.Reason, p.Now, e.st.ID, e.st.LeaseOwner, e.st.Attempt)
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() != 1 {
			continue
		}
		if e.claim.legacy() {
			if _, err := t.Exec(ctx, `UPDATE attempts SET ended_at = $1, outcome = 'unknown', error = $2 WHERE step_id = $3 AND number = $4 AND ended_at IS NULL`,
				p.Now, clean(plan.Error), e.st.ID, e.st.Attempt); err != nil {
				return 0, err
			}
		}
		var first *txEvent
		for k, ev := range plan.Events {
			if k == 0 {
				first = t.store(ev)
			} else {
				t.event(ev)
			}
		}
		if e.claim.inFlight() {
			t.endAttempt(first, e.run.ID, e.st.ID, e.st.Name, e.st.EffectKey, e.st.LeaseOwner, e.st.Attempt, e.claim, p.Now, store.OutcomeUnknown, clean(plan.Error), nil)
		}
		n++
	}
	return n, nil
}

func reap(ctx context.Context, t *txn, p *store.StepReapParams) (int, error) {
	// The attempts in flight (steps_inflight), as few as the workers.
	expiredSQL := lockingScanSQL(`s.claim_event_id IS NOT NULL AND s.state = 'processing' AND s.lease_expires_at < $1`, "s.lease_expires_at, s.id", "$2",
		claimColumns)
	runs := map[int64]*store.Run{}
	type expired struct {
		run   *store.Run
		st    *store.Step
		plan  *store.ReapPlan
		claim claimFacts
	}
	exp, err := lockingScan(ctx, t, func(row pgx.CollectableRow) (*expired, error) {
		var cs claimScan
		st, r, err := scanStepRun(row, cs.dest()...)
		if err != nil {
			return nil, err
		}
		if runs[r.ID] == nil {
			runs[r.ID] = r
		}
		return &expired{run: runs[r.ID], st: st, claim: cs.facts()}, nil
	}, expiredSQL, p.Now, p.Limit)
	if err != nil || len(exp) == 0 {
		return 0, err
	}
	n := len(exp)
	ids, nextAts := make([]int64, n), make([]time.Time, n)
	owners, states, errs, reasons := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	attempts := make([]int32, n)
	var rs runSet
	for j, e := range exp {
		if e.plan, err = store.PlanReap(p.Now, e.run, e.st, p.Decide); err != nil {
			return 0, err
		}
		ids[j], owners[j], attempts[j], states[j], nextAts[j] = e.st.ID, e.st.LeaseOwner, int32(e.st.Attempt), string(e.plan.State), e.plan.NextAt
		errs[j], reasons[j] = clean(e.plan.Error), string(clean(e.plan.Reason))
		rs.add(e.run)
	}
	b := &pgx.Batch{}
	// The steps of the runs as they were before (the runs are locked).
	rs.queueLoad(b)
	// The attempt is closed with outcome unknown; the key stays held. The state expected is
	// a parameter, as in the record's compare-and-set (recordSteps).
	b.Queue(`WITH u AS (
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::int4[], $4::text[], $5::timestamptz[], $6::text[], $7::text[]) WITH ORDINALITY
				AS u(id, owner, attempt, state, next_at, error, reason, ord)),
		upd AS (
			UPDATE steps s SET state = u.state, next_at = u.next_at, lease_owner = '', lease_expires_at = NULL, last_outcome = 'unknown',
				last_error = u.error, reason = u.reason, updated_at = $8,`+claimCleared+`
			FROM u
			WHERE s.id = u.id AND s.state = $9 AND s.lease_owner = u.owner AND s.attempt = u.attempt
			RETURNING s.id, s.attempt, u.error, u.ord),
		att AS (
			UPDATE attempts a SET ended_at = $8, outcome = 'unknown', error = upd.error
			FROM upd WHERE a.step_id = upd.id AND a.number = upd.attempt AND a.ended_at IS NULL)
		SELECT ord FROM upd`, ids, owners, attempts, states, nextAts, errs, reasons, p.Now, string(store.StateProcessing))
	br := t.SendBatch(ctx, b)
	applied := make([]bool, n)
	err = func() error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if err := rs.load(rows); err != nil {
			return err
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		var ord int64
		_, err = pgx.ForEachRow(rows, []any{&ord}, func() error {
			applied[ord-1] = true
			return nil
		})
		return err
	}()
	if err := errors.Join(err, br.Close()); err != nil {
		return 0, err
	}
	reaped := 0
	for j, e := range exp {
		if !applied[j] {
			continue
		}
		reaped++
		var first *txEvent
		for k, ev := range e.plan.Events {
			if k == 0 {
				first = t.store(ev)
			} else {
				t.event(ev)
			}
		}
		// The attempt ends with an unknown outcome, under the ID of its lease.expired.
		if e.claim.inFlight() {
			t.endAttempt(first, e.run.ID, e.st.ID, e.st.Name, e.st.EffectKey, e.st.LeaseOwner, e.st.Attempt, e.claim, p.Now, store.OutcomeUnknown,
				clean(e.plan.Error), nil)
		}
		t.notify = t.notify || e.plan.Due
		rs.set(e.run.ID, e.st.ID, e.plan.State)
		rs.refresh(t, e.run.ID, p.Now, store.ActorReaper)
	}
	rs.queueWrites(t)
	return reaped, nil
}
