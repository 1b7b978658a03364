package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/store"
)

const runColumns = `r.id, r.workflow, r.run_key, r.entity, r.input, r.input_hash, r.state, r.created_at, r.updated_at`

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (*store.Run, error) {
	var r store.Run
	var input []byte
	var state string
	var created, updated int64
	if err := sc.Scan(&r.ID, &r.Workflow, &r.RunKey, &r.Entity, &input, &r.InputHash, &state, &created, &updated); err != nil {
		return nil, err
	}
	r.Input = json.RawMessage(input)
	r.State = store.State(state)
	r.CreatedAt, r.UpdatedAt = fromTS(created), fromTS(updated)
	return &r, nil
}

// RunInsert implements store.Store.
func (s *Store) RunInsert(ctx context.Context, p store.RunInsertParams) (*store.Run, bool, error) {
	var run *store.Run
	var created bool
	err := s.tx(ctx, "run insert", func(tx *sql.Tx) error {
		now := ts(p.Now)
		res, err := tx.ExecContext(ctx, `INSERT INTO runs (workflow, run_key, entity, input, input_hash, state, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (workflow, run_key) DO NOTHING`,
			p.Workflow, p.RunKey, p.Entity, []byte(p.Input), p.InputHash, now, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		created = n == 1
		run, err = scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs r WHERE workflow = ? AND run_key = ?`, p.Workflow, p.RunKey))
		if err != nil {
			return err
		}
		if !created {
			return insertEvent(ctx, tx, &store.Event{
				At: p.Now, Type: store.EventRunDeduplicated, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity,
				Actor: p.Actor, Reason: "run_key_exists",
				Detail: detail(map[string]any{"run_key": run.RunKey, "same_input": run.InputHash == p.InputHash}),
			})
		}
		for _, st := range p.Steps {
			needs, err := json.Marshal(nonNil(st.Needs))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO steps (run_id, workflow, name, needs, waiting, state, next_at, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
				run.ID, run.Workflow, st.Name, string(needs), len(st.Needs), now, now, now); err != nil {
				return fmt.Errorf("step %q: %w", st.Name, err)
			}
		}
		return insertEvent(ctx, tx, &store.Event{
			At: p.Now, Type: store.EventRunCreated, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity,
			Actor: p.Actor, Detail: detail(map[string]any{"run_key": run.RunKey, "steps": len(p.Steps)}),
		})
	})
	if err != nil {
		return nil, false, err
	}
	return run, created, nil
}

// RunGetByID implements store.Store.
func (s *Store) RunGetByID(ctx context.Context, id int64) (*store.Run, error) {
	run, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs r WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: run %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: run get: %w", err)
	}
	return run, nil
}

// RunList implements store.Store.
func (s *Store) RunList(ctx context.Context, p store.RunListParams) ([]*store.Run, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if p.Workflow != "" {
		add("r.workflow = ?", p.Workflow)
	}
	if p.State != "" {
		add("r.state = ?", string(p.State))
	}
	if p.Entity != "" {
		add("r.entity = ?", p.Entity)
	}
	if p.RunKey != "" {
		add("r.run_key = ?", p.RunKey)
	}
	if p.BeforeID > 0 {
		add("r.id < ?", p.BeforeID)
	}
	q := `SELECT ` + runColumns + ` FROM runs r`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q += ` ORDER BY r.id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run list: %w", err)
	}
	defer rows.Close()
	var out []*store.Run
	for rows.Next() {
		run, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: run list: %w", err)
		}
		out = append(out, run)
	}
	return out, rows.Err()
}

// refreshRunState re-derives a run's state from its steps and stores it, appending a
// run.state_changed event when it changed.
func refreshRunState(ctx context.Context, tx *sql.Tx, runID int64, at int64, actor string) error {
	rows, err := tx.QueryContext(ctx, `SELECT state, waiting FROM steps WHERE run_id = ?`, runID)
	if err != nil {
		return err
	}
	var steps []store.StepStatus
	for rows.Next() {
		var st string
		var w int
		if err := rows.Scan(&st, &w); err != nil {
			rows.Close()
			return err
		}
		steps = append(steps, store.StepStatus{State: store.State(st), Waiting: w})
	}
	if err := rows.Close(); err != nil {
		return err
	}
	next := store.DeriveRunState(steps)
	var prev, workflow, entity string
	if err := tx.QueryRowContext(ctx, `SELECT state, workflow, entity FROM runs WHERE id = ?`, runID).Scan(&prev, &workflow, &entity); err != nil {
		return err
	}
	if prev == string(next) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = ?, updated_at = ? WHERE id = ?`, string(next), at, runID); err != nil {
		return err
	}
	return insertEvent(ctx, tx, &store.Event{
		At: fromTS(at), Type: store.EventRunStateChanged, RunID: runID, Workflow: workflow, Entity: entity,
		Actor: actor, Detail: detail(map[string]any{"from": prev, "to": string(next)}),
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
