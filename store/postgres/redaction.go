package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// WorkflowRedactionPut implements store.RedactionStore.
func (s *Store) WorkflowRedactionPut(ctx context.Context, list []store.WorkflowRedaction, now time.Time) error {
	if len(list) == 0 {
		return nil
	}
	return s.tx(ctx, "workflow redaction put", func(t *txn) error {
		for _, wr := range list {
			fields := wr.Fields
			if fields == nil {
				fields = []string{}
			}
			b, err := json.Marshal(fields)
			if err != nil {
				return err
			}
			if _, err := t.Exec(ctx, `INSERT INTO workflow_redaction (workflow, fields, updated_at) VALUES ($1, $2, $3)
				ON CONFLICT (workflow) DO UPDATE SET fields = excluded.fields, updated_at = excluded.updated_at
				WHERE workflow_redaction.fields <> excluded.fields`, clean(wr.Workflow), string(b), now); err != nil {
				return err
			}
		}
		return nil
	})
}

// WorkflowRedactionList implements store.RedactionStore.
func (s *Store) WorkflowRedactionList(ctx context.Context) ([]store.WorkflowRedaction, error) {
	var out []store.WorkflowRedaction
	err := s.read(ctx, "workflow redaction list", func(q querier) error {
		rows, err := q.Query(ctx, `SELECT workflow, fields, updated_at FROM workflow_redaction ORDER BY workflow`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.WorkflowRedaction, error) {
			var wr store.WorkflowRedaction
			var fields []byte
			if err := row.Scan(&wr.Workflow, &fields, &wr.UpdatedAt); err != nil {
				return wr, err
			}
			wr.UpdatedAt = wr.UpdatedAt.UTC()
			return wr, json.Unmarshal(fields, &wr.Fields)
		})
		return err
	})
	return out, err
}
