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

// RunInsert implements store.Store: RunInsertMany of one param.
func (s *Store) RunInsert(ctx context.Context, p store.RunInsertParams) (*store.Run, bool, error) {
	res, err := s.RunInsertMany(ctx, []store.RunInsertParams{p})
	if err != nil {
		return nil, false, err
	}
	if res[0].Err != nil {
		return nil, false, res[0].Err
	}
	return res[0].Run, res[0].Created, nil
}

// RunInsertMany implements store.Store: one transaction whatever the batch's size, with
// one prepared INSERT per run and multi-row inserts of the steps and the audit events.
func (s *Store) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]store.RunInsertResult, error) {
	results, valid := validateStarts(ps)
	if valid == 0 {
		return results, nil
	}
	// New runs change none the writer's cache holds.
	err := s.writeAs(ctx, "run insert", cacheKeep, func(w *writeTx) error {
		return insertAll(w, ps, results, valid)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// validateStarts checks every param: results holds the errors of the invalid ones; valid
// counts the others.
func validateStarts(ps []store.RunInsertParams) (results []store.RunInsertResult, valid int) {
	results = make([]store.RunInsertResult, len(ps))
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			results[i].Err = fmt.Errorf("sqlite: %w", err)
			continue
		}
		valid++
	}
	return results, valid
}

// insertAll inserts the runs of the valid params of ps in w (valid of them) and sets their
// results; the Repeat params are looked up after the others were inserted.
func insertAll(w *writeTx, ps []store.RunInsertParams, results []store.RunInsertResult, valid int) error {
	type runKey struct{ workflow, key string }
	seen := make(map[runKey]*store.Run, valid)
	for _, repeats := range []bool{false, true} {
		for i := range ps {
			p, r := &ps[i], &results[i]
			if r.Err != nil || p.Repeat != repeats {
				continue
			}
			r.Run, r.Created = nil, false
			k := runKey{p.Workflow, p.RunKey}
			run := seen[k]
			switch {
			case run != nil:
			case p.Repeat:
				var err error
				run, err = scanRun(w.queryRow(stmtRunByKey, p.Workflow, p.RunKey))
				if errors.Is(err, sql.ErrNoRows) {
					r.Err = fmt.Errorf("sqlite: run %s/%s: %w", p.Workflow, p.RunKey, store.ErrNotFound)
					continue
				}
				if err != nil {
					return fmt.Errorf("run %s/%s: %w", p.Workflow, p.RunKey, err)
				}
				seen[k] = run
			default:
				// A new run derives its run.created event from its row; a run that existed
				// gets a stored run.deduplicated under the same ID.
				id := w.reserve(p.Now)
				var err error
				if run, r.Created, err = insertRun(w, p, id); err != nil {
					return fmt.Errorf("run %s/%s: %w", p.Workflow, p.RunKey, err)
				}
				seen[k], r.Run = run, run
				if !r.Created {
					w.eventAs(store.RunInsertEvent(p, run, false), id)
					continue
				}
				if err := w.checkDerived(func() (*store.Event, *store.Event) {
					return store.RunInsertEvent(p, run, true), (&store.RunCreatedSource{EventID: id, RunID: run.ID, Workflow: run.Workflow,
						RunKey: run.RunKey, Entity: run.Entity, Actor: p.Actor, Steps: len(p.Steps), At: run.CreatedAt}).Event()
				}); err != nil {
					return err
				}
				continue
			}
			r.Run = run
			w.event(store.RunInsertEvent(p, run, false))
		}
	}
	return nil
}

// insertRun inserts one run, whose run.created event is eventID, and buffers its steps, or
// reads the existing run for its key.
func insertRun(w *writeTx, p *store.RunInsertParams, eventID int64) (*store.Run, bool, error) {
	now := ts(p.Now)
	res, err := w.exec(stmtRunInsert, p.Workflow, p.RunKey, p.Entity, []byte(p.Input), p.InputHash, now, now, p.Actor, len(p.Steps), eventID)
	if err != nil {
		return nil, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return nil, false, err
		}
		run, err := scanRun(w.queryRow(stmtRunByKey, p.Workflow, p.RunKey))
		return run, false, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return nil, false, err
	}
	w.count(p.Workflow, store.StatePending, 1)
	run := &store.Run{ID: id, Workflow: p.Workflow, RunKey: p.RunKey, Entity: p.Entity, Input: p.Input,
		InputHash: p.InputHash, State: store.StatePending, CreatedAt: fromTS(now), UpdatedAt: fromTS(now)}
	for _, st := range p.Steps {
		needs, err := json.Marshal(nonNil(st.Needs))
		if err != nil {
			return nil, false, err
		}
		w.insertStep(id, p.Workflow, st.Name, string(needs), len(st.Needs), now)
	}
	return run, true, nil
}

// RunGetByKey implements store.Store.
func (s *Store) RunGetByKey(ctx context.Context, workflow, runKey string) (*store.Run, error) {
	run, err := scanRun(s.runByKey.QueryRowContext(ctx, workflow, runKey))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: run %s/%s: %w", workflow, runKey, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: run get: %w", err)
	}
	return run, nil
}

// RunGetByID implements store.Store.
func (s *Store) RunGetByID(ctx context.Context, id int64) (*store.Run, error) {
	run, err := runByID(ctx, s.r, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: run get: %w", err)
	}
	return run, nil
}

// runByID reads run id with q (the read pool or a transaction); a missing run is
// store.ErrNotFound.
func runByID(ctx context.Context, q queryRower, id int64) (*store.Run, error) {
	run, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, store.ErrNotFound)
	}
	return run, err
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
	if !p.CreatedSince.IsZero() {
		add("r.created_at >= ?", ts(p.CreatedSince))
	}
	if !p.CreatedUntil.IsZero() {
		add("r.created_at < ?", ts(p.CreatedUntil))
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

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
