package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// statsQuery counts everything StatsGet reports in one statement, hence from one snapshot:
// rows of (kind, workflow, step, state, reason, count).
const statsQuery = `SELECT 'run', workflow, '', state, '', count(*) FROM runs GROUP BY workflow, state
	UNION ALL
	SELECT 'review', workflow, '', '', reason, count(*) FROM steps WHERE state = 'needs_review' GROUP BY workflow, reason
	UNION ALL
	SELECT 'due', workflow, '', '', '', count(*) FROM steps
		WHERE state IN ('pending', 'retrying') AND waiting = 0 AND next_at <= $1 GROUP BY workflow`

// stepsQuery adds the steps by state to statsQuery (StatsGetParams.WithoutSteps unset).
const stepsQuery = `
	UNION ALL
	SELECT 'step', workflow, name, state, '', count(*) FROM steps GROUP BY workflow, name, state`

// StatsGet implements store.StatsStore.
func (s *Store) StatsGet(ctx context.Context, p store.StatsGetParams) (*store.Stats, error) {
	var out *store.Stats
	err := s.read(ctx, "stats get", func(q querier) error {
		out = &store.Stats{}
		sql := statsQuery
		if !p.WithoutSteps {
			sql += stepsQuery
		}
		rows, err := q.Query(ctx, sql, p.Now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind, workflow, step, state, reason string
			var n int64
			if err := rows.Scan(&kind, &workflow, &step, &state, &reason, &n); err != nil {
				return err
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
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// activitySQL counts the events of store.ActivityTypes from $1 on, per slice of $2
// seconds, in one statement (one snapshot): the derived run.created events from the runs
// that hold them, the derived step.completed events from the attempts, and the stored
// events of the types $3. Each derived arm finds its rows as EventList does, as the range
// of IDs that the audit spans from $1 on cover (the partial index on created_event_id, the
// attempts' primary key), then the exact times within it; the stored events through
// their index on time.
const activitySQL = `WITH lo AS (SELECT coalesce(min(first_id), 9223372036854775807) AS id FROM audit_spans WHERE max_at >= $1)
	SELECT 'run.created', floor(extract(epoch FROM r.created_at - $1) / $2)::int, count(*) FROM runs r, lo
		WHERE r.created_event_id >= lo.id AND r.created_at >= $1 GROUP BY 2
	UNION ALL
	SELECT 'step.completed', floor(extract(epoch FROM a.ended_at - $1) / $2)::int, count(*) FROM attempts a, lo
		WHERE a.id >= lo.id AND a.end_derived AND a.ended_at >= $1 GROUP BY 2
	UNION ALL
	SELECT e.type, floor(extract(epoch FROM e.at - $1) / $2)::int, count(*) FROM events e
		WHERE e.at >= $1 AND e.type = ANY($3) GROUP BY 1, 2`

// failuresSQL reads the latest $3 stored events of the types $2 from $1 on, newest first,
// as the stored arm of EventList selects them.
var failuresSQL = `SELECT ` + eventArms[0].sel + ` FROM events e
	WHERE e.id >= (SELECT coalesce(min(first_id), 9223372036854775807) FROM audit_spans WHERE max_at >= $1)
	AND e.at >= $1 AND e.type = ANY($2) ORDER BY e.id DESC LIMIT $3`

// StatsActivity implements store.StatsStore.
func (s *Store) StatsActivity(ctx context.Context, p store.StatsActivityParams) (*store.Activity, error) {
	if p.Bucket <= 0 {
		return nil, fmt.Errorf("postgres: stats activity: the slice length must be positive")
	}
	var out *store.Activity
	err := s.read(ctx, "stats activity", func(q querier) error {
		out = &store.Activity{}
		types := make([]string, len(store.ActivityTypes))
		for i, t := range store.ActivityTypes {
			types[i] = string(t)
		}
		rows, err := q.Query(ctx, activitySQL, p.Since, p.Bucket.Seconds(), types)
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
		frows, err := q.Query(ctx, failuresSQL, p.Since, []string{string(store.EventStepNeedsReview), string(store.EventStepFailed)}, p.Failures)
		if err != nil {
			return err
		}
		out.Failures, err = pgx.CollectRows(frows, func(row pgx.CollectableRow) (*store.Event, error) { return scanListedEvent(row) })
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
