package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

// claimCleared ends the claim facts of a step whose attempt ended.
const claimCleared = ` claim_event_id = NULL, claimed_at = NULL, claim_lease_until = NULL, claim_prev_outcome = '',
	claim_run_event_id = NULL, claim_run_change = ''`

const stepColumns = `s.id, s.run_id, s.workflow, s.name, s.needs, s.waiting, s.state, s.effect_key, s.fingerprint, s.attempt,
	s.next_at, s.lease_owner, s.lease_expires_at, s.last_outcome, s.output, s.last_error, s.reason, s.created_at, s.updated_at, s.attempt_base,
	s.progress`

// stepDest returns the scan destinations of stepColumns into st and a function that
// finishes the conversion after the scan.
func stepDest(st *store.Step) ([]any, func()) {
	var state, outcome string
	var output, progress []byte
	var next, created, updated time.Time
	var lease pgtype.Timestamptz
	return []any{&st.ID, &st.RunID, &st.Workflow, &st.Name, &st.Needs, &st.Waiting, &state, &st.EffectKey, &st.Fingerprint, &st.Attempt,
			&next, &st.LeaseOwner, &lease, &outcome, &output, &st.LastError, &st.Reason, &created, &updated, &st.AttemptBase, &progress}, func() {
			st.State, st.LastOutcome = store.State(state), store.Outcome(outcome)
			if st.Needs == nil {
				st.Needs = []string{}
			}
			if output != nil {
				st.Output = json.RawMessage(output)
			}
			if progress != nil {
				st.Progress = json.RawMessage(progress)
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

// scanStepRun scans a row of stepColumns followed by runColumns, then into extra.
func scanStepRun(row pgx.Row, extra ...any) (*store.Step, *store.Run, error) {
	var st store.Step
	var r store.Run
	sdest, sdone := stepDest(&st)
	rdest, rdone := runDest(&r)
	if err := row.Scan(append(append(sdest, rdest...), extra...)...); err != nil {
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

// releaseDependents lets the pending steps of run runID that need name run once their
// other needs are met, and returns how many became due. (The batches of the write path
// decide releases, cancellations and skips in memory, see runSet.)
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
// states causes to state, appending an event for each, in ID order.
func propagate(ctx context.Context, t *txn, run *store.Run, at time.Time, causes []string, state store.State, reason store.Reason, event store.EventType) error {
	for {
		rows, err := t.Query(ctx, `WITH moved AS (
				UPDATE steps s SET state = $1, reason = $2, updated_at = $3
				WHERE s.run_id = $4 AND s.state = 'pending' AND EXISTS (
					SELECT 1 FROM steps d WHERE d.run_id = s.run_id AND d.name = ANY (s.needs)
					  AND d.state = ANY ($5))
				RETURNING s.id, s.name, s.attempt)
			SELECT id, name, attempt FROM moved ORDER BY id`, string(state), reason, at, run.ID, causes)
		if err != nil {
			return err
		}
		var moved int
		var st store.Step
		_, err = pgx.ForEachRow(rows, []any{&st.ID, &st.Name, &st.Attempt}, func() error {
			moved++
			ev := st // a copy; only ID, Name and Attempt are set, as the events always had
			t.event(store.StepEvent(event, at, run, &ev, store.ActorEngine, reason, nil))
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
	err := s.keyedTx(ctx, "step heartbeat", func(t *txn) error {
		clear(held)
		rows, err := t.Query(ctx, `UPDATE steps SET lease_expires_at = $1, updated_at = $2
			WHERE lease_owner = $3 AND state IN ('processing', 'cancelled') AND id = ANY($4) RETURNING id`,
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

// StepCheckpoint implements store.StepCheckpointer.
func (s *Store) StepCheckpoint(ctx context.Context, p store.StepCheckpointParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return s.keyedTx(ctx, "step checkpoint", func(t *txn) error {
		tag, err := t.Exec(ctx, `UPDATE steps SET progress = $1, updated_at = $2
			WHERE id = $3 AND lease_owner = $4 AND attempt = $5 AND state = 'processing'`, []byte(p.Progress), p.Now, p.StepID, p.Owner, p.Attempt)
		if err == nil && tag.RowsAffected() == 0 {
			err = p.LeaseLost()
		}
		return err
	})
}
