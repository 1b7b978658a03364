package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/store"
)

// statsQuery counts everything StatsGet reports in one statement, hence from one snapshot:
// rows of (kind, workflow, step, state, reason, count). The runs are counted by the
// triggers of migration 0016 (run_counts); the steps by state, which means reading every
// step, only when stepsQuery is added (StatsGetParams.WithoutSteps unset).
const statsQuery = `SELECT 'run', workflow, '', state, '', n FROM run_counts WHERE n > 0
	UNION ALL
	SELECT 'review', workflow, '', '', reason, count(*) FROM steps WHERE state = 'needs_review' GROUP BY workflow, reason
	UNION ALL
	SELECT 'due', workflow, '', '', '', count(*) FROM steps
		WHERE state IN ('pending', 'retrying') AND waiting = 0 AND next_at <= ? GROUP BY workflow`

const stepsQuery = `
	UNION ALL
	SELECT 'step', workflow, name, state, '', count(*) FROM steps GROUP BY workflow, name, state`

// StatsGet implements store.StatsStore.
func (s *Store) StatsGet(ctx context.Context, p store.StatsGetParams) (*store.Stats, error) {
	q := statsQuery
	if !p.WithoutSteps {
		q += stepsQuery
	}
	rows, err := s.r.QueryContext(ctx, q, ts(p.Now))
	if err != nil {
		return nil, fmt.Errorf("sqlite: stats get: %w", err)
	}
	defer rows.Close()
	out := &store.Stats{}
	for rows.Next() {
		var kind, workflow, step, state, reason string
		var n int64
		if err := rows.Scan(&kind, &workflow, &step, &state, &reason, &n); err != nil {
			return nil, fmt.Errorf("sqlite: stats get: %w", err)
		}
		switch kind {
		case "run":
			out.Runs = append(out.Runs, store.RunCount{Workflow: workflow, State: store.State(state), Count: n})
		case "step":
			out.Steps = append(out.Steps, store.StepCount{Workflow: workflow, Step: step, State: store.State(state), Count: n})
		case "review":
			out.Review = append(out.Review, store.ReviewCount{Workflow: workflow, Reason: store.Reason(reason), Count: n})
		case "due":
			out.Due = append(out.Due, store.DueCount{Workflow: workflow, Count: n})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: stats get: %w", err)
	}
	return out, nil
}

// activitySQL counts the events of store.ActivityTypes from a time on, per slice, in one
// statement (one snapshot): the derived run.created events from the runs that hold them,
// the derived step.completed events from the attempts, and the stored events of every
// type. Each arm finds its rows as EventList does, as the range of IDs that the audit
// spans from that time on cover (the partial index on created_event_id, the primary keys
// of attempts and events), then the exact times within it. Arguments: since, slice
// length, since, since, three times, then the types.
var activitySQL = `SELECT 'run.created', (r.created_at - ?) / ?, count(*) FROM runs r
		WHERE r.created_event_id >= (SELECT coalesce(min(first_id), 9223372036854775807) FROM audit_spans INDEXED BY audit_spans_max_at WHERE max_at >= ?)
		AND r.created_at >= ? GROUP BY 2
	UNION ALL
	SELECT 'step.completed', (a.ended_at - ?) / ?, count(*) FROM attempts a
		WHERE a.id >= (SELECT coalesce(min(first_id), 9223372036854775807) FROM audit_spans INDEXED BY audit_spans_max_at WHERE max_at >= ?)
		AND a.end_derived = 1 AND a.ended_at >= ? GROUP BY 2
	UNION ALL
	SELECT e.type, (e.at - ?) / ?, count(*) FROM events e
		WHERE e.id >= (SELECT coalesce(min(first_id), 9223372036854775807) FROM audit_spans INDEXED BY audit_spans_max_at WHERE max_at >= ?)
		AND e.at >= ? AND e.type IN (` + placeholders(len(store.ActivityTypes)) + `) GROUP BY 1, 2`

// StatsActivity implements store.StatsStore.
func (s *Store) StatsActivity(ctx context.Context, p store.StatsActivityParams) (*store.Activity, error) {
	if p.Bucket <= 0 {
		return nil, fmt.Errorf("sqlite: stats activity: the slice length must be positive")
	}
	since, slice := ts(p.Since), p.Bucket.Microseconds()
	args := []any{since, slice, since, since, since, slice, since, since, since, slice, since, since}
	for _, t := range store.ActivityTypes {
		args = append(args, string(t))
	}
	out := &store.Activity{}
	err := func() error {
		tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctx, activitySQL, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var typ string
			var i int
			var n int64
			if err := rows.Scan(&typ, &i, &n); err != nil {
				return err
			}
			out.AddActivity(i, store.EventType(typ), n)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if p.Failures <= 0 {
			return nil
		}
		// The failures are stored events: only the stored arm of EventList has them.
		arms, armArgs := eventArmsSQL(store.EventListParams{Since: p.Since}, []store.EventType{store.EventStepNeedsReview, store.EventStepFailed}, 0)
		var fargs []any
		for _, a := range armArgs {
			fargs = append(fargs, a...)
		}
		frows, err := tx.QueryContext(ctx, strings.Join(arms, "\nUNION ALL\n")+"\nORDER BY 1 DESC LIMIT ?", append(fargs, p.Failures)...)
		if err != nil {
			return err
		}
		defer frows.Close()
		for frows.Next() {
			e, err := scanListedEvent(frows)
			if err != nil {
				return err
			}
			out.Failures = append(out.Failures, e)
		}
		return frows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("sqlite: stats activity: %w", err)
	}
	return out, nil
}
