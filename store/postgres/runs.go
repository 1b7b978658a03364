package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

const runColumns = `r.id, r.workflow, r.run_key, r.entity, r.input, r.input_hash, r.state, r.created_at, r.updated_at`

// runDest returns the scan destinations of runColumns into r and a function that finishes
// the conversion after the scan.
func runDest(r *store.Run) ([]any, func()) {
	var input []byte
	var state string
	var created, updated time.Time
	return []any{&r.ID, &r.Workflow, &r.RunKey, &r.Entity, &input, &r.InputHash, &state, &created, &updated}, func() {
		r.Input, r.State = json.RawMessage(input), store.State(state)
		r.CreatedAt, r.UpdatedAt = created.UTC(), updated.UTC()
	}
}

func scanRun(row pgx.Row) (*store.Run, error) {
	var r store.Run
	dest, done := runDest(&r)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	done()
	return &r, nil
}

// RunInsert implements store.Store.
func (s *Store) RunInsert(ctx context.Context, p store.RunInsertParams) (*store.Run, bool, error) {
	var run *store.Run
	var created bool
	err := s.tx(ctx, "run insert", func(t *txn) error {
		var err error
		run, created, err = runInsert(ctx, t, p)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return run, created, nil
}

// RunInsertTx implements store.TxRunInserter: tx must be a pgx.Tx on this store's database.
// The run is inserted under a savepoint, in this store's schema whatever the connection's
// search_path; an error rolls back to the savepoint and leaves tx usable. Workers are
// notified when tx commits.
func (s *Store) RunInsertTx(ctx context.Context, tx any, p store.RunInsertParams) (*store.Run, bool, error) {
	outer, ok := tx.(pgx.Tx)
	if !ok {
		return nil, false, fmt.Errorf("postgres: run insert in the caller's transaction: got a %T, want a pgx.Tx (from pgx or pgxpool Begin)", tx)
	}
	sp, err := outer.Begin(ctx) // a savepoint
	if err != nil {
		return nil, false, fmt.Errorf("postgres: run insert in the caller's transaction: savepoint: %w", err)
	}
	run, created, err := s.runInsertTx(ctx, sp, p)
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, false, fmt.Errorf("postgres: run insert in the caller's transaction: %w", err)
	}
	if err := sp.Commit(ctx); err != nil { // releases the savepoint
		return nil, false, fmt.Errorf("postgres: run insert in the caller's transaction: release savepoint: %w", err)
	}
	return run, created, nil
}

func (s *Store) runInsertTx(ctx context.Context, sp pgx.Tx, p store.RunInsertParams) (*store.Run, bool, error) {
	// The caller's connection may search other schemas: point it at ours for the duration.
	var prev string
	if err := sp.QueryRow(ctx, `SELECT current_setting('search_path')`).Scan(&prev); err != nil {
		return nil, false, err
	}
	if _, err := sp.Exec(ctx, `SELECT set_config('search_path', $1, true)`, pgx.Identifier{s.schema}.Sanitize()); err != nil {
		return nil, false, err
	}
	t := &txn{Tx: sp, s: s}
	run, created, err := runInsert(ctx, t, p)
	if err == nil {
		err = t.flush(ctx)
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := sp.Exec(ctx, `SELECT set_config('search_path', $1, true)`, prev); err != nil {
		return nil, false, err
	}
	return run, created, nil
}

func runInsert(ctx context.Context, t *txn, p store.RunInsertParams) (*store.Run, bool, error) {
	run, err := scanRun(t.QueryRow(ctx, `INSERT INTO runs AS r (workflow, run_key, entity, input, input_hash, state, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6) ON CONFLICT (workflow, run_key) DO NOTHING
		RETURNING `+runColumns,
		p.Workflow, p.RunKey, p.Entity, []byte(p.Input), p.InputHash, p.Now))
	created := err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		// Another transaction holds or held the key: ON CONFLICT waited for it to commit,
		// and this statement's snapshot, taken now, sees its row.
		run, err = scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE workflow = $1 AND run_key = $2`, p.Workflow, p.RunKey))
	}
	if err != nil {
		return nil, false, err
	}
	if !created {
		t.event(&store.Event{
			At: p.Now, Type: store.EventRunDeduplicated, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity,
			Actor: p.Actor, Reason: "run_key_exists",
			Detail: detail(map[string]any{"run_key": run.RunKey, "same_input": run.InputHash == p.InputHash}),
		})
		return run, false, nil
	}
	b := &pgx.Batch{}
	for _, st := range p.Steps {
		b.Queue(`INSERT INTO steps (run_id, workflow, name, needs, waiting, state, next_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6, $6)`,
			run.ID, run.Workflow, st.Name, nonNil(st.Needs), len(st.Needs), p.Now)
	}
	if err := t.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, fmt.Errorf("steps: %w", err)
	}
	t.event(&store.Event{
		At: p.Now, Type: store.EventRunCreated, RunID: run.ID, Workflow: run.Workflow, Entity: run.Entity,
		Actor: p.Actor, Detail: detail(map[string]any{"run_key": run.RunKey, "steps": len(p.Steps)}),
	})
	t.notify = true
	return run, true, nil
}

// RunGetByID implements store.Store.
func (s *Store) RunGetByID(ctx context.Context, id int64) (*store.Run, error) {
	var run *store.Run
	err := s.read(ctx, "run get", func(q querier) error {
		var err error
		run, err = scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: run %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return run, nil
}

// RunList implements store.Store.
func (s *Store) RunList(ctx context.Context, p store.RunListParams) ([]*store.Run, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
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
	args = append(args, limit)
	q += ` ORDER BY r.id DESC LIMIT $` + strconv.Itoa(len(args))
	var out []*store.Run
	err := s.read(ctx, "run list", func(qr querier) error {
		rows, err := qr.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
		return err
	})
	return out, err
}

// lockRun locks a run's row until the transaction ends and returns its state, workflow
// and entity. Every transaction that changes a run's steps locks the run before deriving its
// state, so derivations of one run happen one at a time, each seeing the steps the previous
// one committed.
func lockRun(ctx context.Context, t *txn, runID int64) (state, workflow, entity string, err error) {
	err = t.QueryRow(ctx, `SELECT state, workflow, entity FROM runs WHERE id = $1 FOR NO KEY UPDATE`, runID).Scan(&state, &workflow, &entity)
	return state, workflow, entity, err
}

// refreshRunState re-derives a run's state from its steps and stores it, appending a
// run.state_changed event when it changed.
func refreshRunState(ctx context.Context, t *txn, runID int64, at time.Time, actor string) error {
	prev, workflow, entity, err := lockRun(ctx, t, runID)
	if err != nil {
		return err
	}
	rows, err := t.Query(ctx, `SELECT state, waiting FROM steps WHERE run_id = $1`, runID)
	if err != nil {
		return err
	}
	steps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.StepStatus, error) {
		var st string
		var w int
		err := row.Scan(&st, &w)
		return store.StepStatus{State: store.State(st), Waiting: w}, err
	})
	if err != nil {
		return err
	}
	next := store.DeriveRunState(steps)
	if prev == string(next) {
		return nil
	}
	if _, err := t.Exec(ctx, `UPDATE runs SET state = $1, updated_at = $2 WHERE id = $3`, string(next), at, runID); err != nil {
		return err
	}
	t.event(&store.Event{
		At: at, Type: store.EventRunStateChanged, RunID: runID, Workflow: workflow, Entity: entity,
		Actor: actor, Detail: detail(map[string]any{"from": prev, "to": string(next)}),
	})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
