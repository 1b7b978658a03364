package postgres

import (
	"context"
	"encoding/json"
	"errors"
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

// dependents changes the steps that need the step a review action changed: releases
// (decrement their waiting count) and, transitively, cancellations and skips, with SQL (the
// batches of the write path decide them in memory, see runSet). Each run's changes use the
// time of the change that caused them.
type dependents struct {
	releaseRun  []int64
	releaseName []string
	releaseAt   []time.Time
	cancel      []*runAt
	skip        []*runAt
}

// runAt is a run with the time of the change made to it.
type runAt struct {
	run *store.Run
	at  time.Time
}

// queueRelease adds to b, if there is any, the release of the dependents, a query that
// returns how many became due, and reports whether it did. A dependent that needs several
// released steps is released once for each.
func (d *dependents) queueRelease(b *pgx.Batch) bool {
	if len(d.releaseRun) == 0 {
		return false
	}
	b.Queue(`WITH u AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[]) AS u(run_id, name, at)),
		c AS (SELECT d.id, count(*) AS n, max(u.at) AS at FROM steps d JOIN u ON d.run_id = u.run_id AND u.name = ANY (d.needs)
			WHERE d.state = 'pending' AND d.waiting > 0 GROUP BY d.id),
		released AS (UPDATE steps s SET waiting = greatest(s.waiting - c.n, 0), next_at = greatest(s.next_at, c.at), updated_at = c.at
			FROM c WHERE s.id = c.id AND s.state = 'pending' AND s.waiting > 0
			RETURNING s.waiting)
		SELECT count(*) FROM released WHERE waiting = 0`, d.releaseRun, d.releaseName, d.releaseAt)
	return true
}

// propagate cancels and skips, transitively, what the dependents say, appending an event
// for each step it moves.
func (d *dependents) propagate(ctx context.Context, t *txn) error {
	if len(d.cancel) > 0 {
		if err := propagate(ctx, t, d.cancel, []string{string(store.StateFailed), string(store.StateCancelled)},
			store.StateCancelled, store.ReasonDependencyFailed, store.EventStepCancelled); err != nil {
			return err
		}
	}
	if len(d.skip) > 0 {
		return propagate(ctx, t, d.skip, []string{string(store.StateSkipped)},
			store.StateSkipped, store.ReasonDependencySkipped, store.EventStepSkipped)
	}
	return nil
}

// releaseDependents lets the pending steps that need name run once their other needs are
// met, and returns how many became due.
func releaseDependents(ctx context.Context, t *txn, runID int64, name string, now time.Time) (int, error) {
	d := dependents{releaseRun: []int64{runID}, releaseName: []string{name}, releaseAt: []time.Time{now}}
	b := &pgx.Batch{}
	d.queueRelease(b)
	br := t.SendBatch(ctx, b)
	var due int
	err := br.QueryRow().Scan(&due)
	return due, errors.Join(err, br.Close())
}

// cancelDependents cancels, transitively, the pending steps that need a failed or
// cancelled step.
func cancelDependents(ctx context.Context, t *txn, run *store.Run, at time.Time) error {
	return (&dependents{cancel: []*runAt{{run, at}}}).propagate(ctx, t)
}

// skipDependents skips, transitively, the pending steps that need a skipped step.
func skipDependents(ctx context.Context, t *txn, run *store.Run, at time.Time) error {
	return (&dependents{skip: []*runAt{{run, at}}}).propagate(ctx, t)
}

// propagate moves, transitively, the pending steps of the runs that need a step in one of
// the states causes to state, appending an event for each, in each run's order.
func propagate(ctx context.Context, t *txn, runs []*runAt, causes []string, state store.State, reason, event string) error {
	byID := make(map[int64]*runAt, len(runs))
	var ids []int64
	for _, r := range runs {
		if _, ok := byID[r.run.ID]; !ok {
			ids = append(ids, r.run.ID)
		}
		byID[r.run.ID] = r // the latest change of a run gives the time
	}
	ats := make([]time.Time, len(ids))
	for i, id := range ids {
		ats[i] = byID[id].at
	}
	for {
		rows, err := t.Query(ctx, `WITH u AS (SELECT * FROM unnest($4::bigint[], $5::timestamptz[]) AS u(run_id, at)),
			moved AS (
				UPDATE steps s SET state = $1, reason = $2, updated_at = u.at
				FROM u
				WHERE s.run_id = u.run_id AND s.state = 'pending' AND EXISTS (
					SELECT 1 FROM steps d WHERE d.run_id = s.run_id AND d.name = ANY (s.needs)
					  AND d.state = ANY ($3))
				RETURNING s.id, s.run_id, s.name, s.attempt)
			SELECT id, run_id, name, attempt FROM moved ORDER BY run_id, id`, string(state), reason, causes, ids, ats)
		if err != nil {
			return err
		}
		var moved int
		var st store.Step
		_, err = pgx.ForEachRow(rows, []any{&st.ID, &st.RunID, &st.Name, &st.Attempt}, func() error {
			moved++
			r := byID[st.RunID]
			ev := st // a copy; only ID, Name and Attempt are set, as the events always had
			t.event(store.StepEvent(event, r.at, r.run, &ev, store.ActorEngine, reason, nil))
			return nil
		})
		if err != nil || moved == 0 {
			return err
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
	return p.Lost(held), nil
}
