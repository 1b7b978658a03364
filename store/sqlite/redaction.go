package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/store"
)

// WorkflowRedactionPut implements store.RedactionStore.
func (s *Store) WorkflowRedactionPut(ctx context.Context, list []store.WorkflowRedaction, now time.Time) error {
	if len(list) == 0 {
		return nil
	}
	return s.tx(ctx, "workflow redaction put", func(tx dbtx) error {
		for _, wr := range list {
			fields, err := json.Marshal(nonNil(wr.Fields))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO workflow_redaction (workflow, fields, updated_at) VALUES (?, ?, ?)
				ON CONFLICT (workflow) DO UPDATE SET fields = excluded.fields, updated_at = excluded.updated_at
				WHERE workflow_redaction.fields <> excluded.fields`, wr.Workflow, string(fields), ts(now)); err != nil {
				return err
			}
		}
		return nil
	})
}

// WorkflowRedactionList implements store.RedactionStore.
func (s *Store) WorkflowRedactionList(ctx context.Context) ([]store.WorkflowRedaction, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT workflow, fields, updated_at FROM workflow_redaction ORDER BY workflow`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: workflow redaction list: %w", err)
	}
	defer rows.Close()
	var out []store.WorkflowRedaction
	for rows.Next() {
		var wr store.WorkflowRedaction
		var fields string
		var at int64
		if err := rows.Scan(&wr.Workflow, &fields, &at); err != nil {
			return nil, fmt.Errorf("sqlite: workflow redaction list: %w", err)
		}
		if err := json.Unmarshal([]byte(fields), &wr.Fields); err != nil {
			return nil, fmt.Errorf("sqlite: workflow redaction list: %s: %w", wr.Workflow, err)
		}
		wr.UpdatedAt = fromTS(at)
		out = append(out, wr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: workflow redaction list: %w", err)
	}
	return out, nil
}
