package sqlite

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

// statsQuery counts everything StatsGet reports in one statement, hence from one snapshot:
// rows of (kind, workflow, step, state, reason, count).
const statsQuery = `SELECT 'run', workflow, '', state, '', count(*) FROM runs GROUP BY workflow, state
	UNION ALL
	SELECT 'step', workflow, name, state, '', count(*) FROM steps GROUP BY workflow, name, state
	UNION ALL
	SELECT 'review', workflow, '', '', reason, count(*) FROM steps WHERE state = 'needs_review' GROUP BY workflow, reason
	UNION ALL
	SELECT 'due', workflow, '', '', '', count(*) FROM steps
		WHERE state IN ('pending', 'retrying') AND waiting = 0 AND next_at <= ? GROUP BY workflow`

// StatsGet implements store.StatsStore.
func (s *Store) StatsGet(ctx context.Context, p store.StatsGetParams) (*store.Stats, error) {
	rows, err := s.r.QueryContext(ctx, statsQuery, ts(p.Now))
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
