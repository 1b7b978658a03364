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
// multi-row inserts of the runs, their steps and the audit events.
func (s *Store) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]store.RunInsertResult, error) {
	results, valid := validateStarts(ps)
	if valid == 0 {
		return results, nil
	}
	err := s.write(ctx, "run insert", func(w *writeTx) error {
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
// results: multi-row statements insert the runs whose keys are new, one statement reads
// the runs of the known keys, and a key repeated in ps is the first one's run (not
// created). The events are appended in the order of ps.
func insertAll(w *writeTx, ps []store.RunInsertParams, results []store.RunInsertResult, valid int) error {
	type runKey struct{ workflow, key string }
	first := make(map[runKey]int, valid) // the param that inserts each key
	var order []int
	args := make([]any, 0, valid*runInsertArgs)
	for i := range ps {
		p, r := &ps[i], &results[i]
		if r.Err != nil {
			continue
		}
		r.Run, r.Created = nil, false
		k := runKey{p.Workflow, p.RunKey}
		if _, ok := first[k]; ok {
			continue
		}
		first[k] = i
		order = append(order, i)
		now := ts(p.Now)
		args = append(args, p.Workflow, p.RunKey, p.Entity, []byte(p.Input), p.InputHash, now, now)
	}
	// The new runs: many rows at a time while they fill a statement, the rest one by one.
	runs := make(map[runKey]*store.Run, len(order))
	created := func(i int, id int64) {
		p := &ps[i]
		now := fromTS(ts(p.Now))
		runs[runKey{p.Workflow, p.RunKey}] = &store.Run{ID: id, Workflow: p.Workflow, RunKey: p.RunKey, Entity: p.Entity, Input: p.Input,
			InputHash: p.InputHash, State: store.StatePending, CreatedAt: now, UpdatedAt: now}
		results[i].Created = true
	}
	rest, err := w.bulkQuery(stmtRunsInsertWide, wideSizes[:], runInsertArgs, args, func(rows *sql.Rows) error {
		var id int64
		var k runKey
		if err := rows.Scan(&id, &k.workflow, &k.key); err != nil {
			return err
		}
		i, ok := first[k]
		if !ok {
			return fmt.Errorf("run %s/%s: inserted for no start", k.workflow, k.key)
		}
		created(i, id)
		return nil
	})
	if err != nil {
		return err
	}
	for j, i := range order[len(order)-len(rest)/runInsertArgs:] {
		res, err := w.exec(stmtRunInsert, rest[j*runInsertArgs:(j+1)*runInsertArgs]...)
		if err != nil {
			return fmt.Errorf("run %s/%s: %w", ps[i].Workflow, ps[i].RunKey, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			continue // known: read below
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		created(i, id)
	}
	// The runs of the known keys, read in one statement.
	var known [][2]string
	for _, i := range order {
		if k := (runKey{ps[i].Workflow, ps[i].RunKey}); runs[k] == nil {
			known = append(known, [2]string{k.workflow, k.key})
		}
	}
	if len(known) > 0 {
		list, err := json.Marshal(known)
		if err != nil {
			return err
		}
		err = w.scanAll(stmtRunsByKeys, []any{string(list)}, func(rows *sql.Rows) error {
			run, err := scanRun(rows)
			if err != nil {
				return err
			}
			if k := (runKey{run.Workflow, run.RunKey}); runs[k] == nil {
				runs[k] = run
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, i := range order {
		p := &ps[i]
		k := runKey{p.Workflow, p.RunKey}
		var err error
		switch run := runs[k]; {
		case results[i].Created:
			err = insertSteps(w, p, run.ID)
		case run == nil: // a key JSON cannot carry as it is (invalid UTF-8) is read alone
			runs[k], err = scanRun(w.queryRow(stmtRunByKey, p.Workflow, p.RunKey))
		}
		if err != nil {
			return fmt.Errorf("run %s/%s: %w", p.Workflow, p.RunKey, err)
		}
	}
	for i := range ps {
		p, r := &ps[i], &results[i]
		if r.Err != nil {
			continue
		}
		r.Run = runs[runKey{p.Workflow, p.RunKey}]
		w.event(store.RunInsertEvent(p, r.Run, r.Created))
	}
	return nil
}

// insertSteps buffers the steps of a new run.
func insertSteps(w *writeTx, p *store.RunInsertParams, runID int64) error {
	now := ts(p.Now)
	for _, st := range p.Steps {
		needs, err := json.Marshal(nonNil(st.Needs))
		if err != nil {
			return err
		}
		w.insertStep(runID, p.Workflow, st.Name, string(needs), len(st.Needs), now)
	}
	return nil
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
