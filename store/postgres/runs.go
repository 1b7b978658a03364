package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// RunInsert implements store.Store: RunInsertMany of one param.
func (s *Store) RunInsert(ctx context.Context, p store.RunInsertParams) (*store.Run, bool, error) {
	res, err := s.RunInsertMany(ctx, []store.RunInsertParams{p})
	if err != nil {
		return nil, false, err
	}
	return res[0].Run, res[0].Created, res[0].Err
}

// RunInsertMany implements store.Store. The batch is one transaction of a few round trips
// whatever its size: one statement that reads the runs that exist already and inserts the
// others (INSERT … ON CONFLICT DO NOTHING), one SELECT of those a concurrent transaction
// inserted meanwhile (rare), one INSERT of every new run's steps sent together with the
// audit events.
func (s *Store) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]store.RunInsertResult, error) {
	results := make([]store.RunInsertResult, len(ps))
	valid := 0
	for i := range ps {
		if err := validRunInsert(&ps[i]); err != nil {
			results[i].Err = fmt.Errorf("postgres: %w", err)
			continue
		}
		valid++
	}
	if valid == 0 {
		return results, nil
	}
	err := s.keyedTx(ctx, "run insert", func(t *txn) error {
		return runInsertMany(ctx, t, ps, results)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// validRunInsert is RunInsertParams.Validate plus what PostgreSQL cannot store in a text
// column (NUL bytes, invalid UTF-8), so that such a param fails alone rather than the batch.
func validRunInsert(p *store.RunInsertParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	texts := []string{p.Workflow, p.RunKey, p.Entity, p.InputHash}
	for _, st := range p.Steps {
		texts = append(texts, st.Name)
	}
	for _, s := range texts {
		if clean(s) != s {
			return fmt.Errorf("run insert: %q contains a NUL byte or invalid UTF-8, which PostgreSQL cannot store", s)
		}
	}
	return nil
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
	if err := validRunInsert(&p); err != nil {
		return nil, false, fmt.Errorf("postgres: %w", err)
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
	t := &txn{conn: sp, s: s, notifyInTx: true}
	res := make([]store.RunInsertResult, 1)
	err := runInsertMany(ctx, t, []store.RunInsertParams{p}, res)
	if err == nil {
		err = t.flush(ctx)
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := sp.Exec(ctx, `SELECT set_config('search_path', $1, true)`, prev); err != nil {
		return nil, false, err
	}
	return res[0].Run, res[0].Created, res[0].Err
}

// runKey names a run by (workflow, run key).
type runKey struct{ workflow, key string }

// runInsertMany inserts the valid params of ps (those whose results[i].Err is nil) and
// fills their results. A key repeated in the batch is inserted once, for its first param
// that is not a Repeat; Repeat params are only looked up. The keys are inserted in sorted
// order, so that two batches inserting the same keys wait for each other in one order and
// never in a cycle.
func runInsertMany(ctx context.Context, t *txn, ps []store.RunInsertParams, results []store.RunInsertResult) error {
	first := map[runKey]int{} // key → index of its first valid param that is not a Repeat
	var order []int           // those first params
	for i := range ps {
		if results[i].Err != nil {
			continue
		}
		results[i].Run, results[i].Created = nil, false
		k := runKey{ps[i].Workflow, ps[i].RunKey}
		if _, ok := first[k]; !ok && !ps[i].Repeat {
			first[k] = i
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(ps[a].Workflow, ps[b].Workflow), strings.Compare(ps[a].RunKey, ps[b].RunKey))
	})
	// Every valid param that is not a Repeat appends one event, in the params' order: a
	// run.created derived from the run it inserts, or a stored run.deduplicated. Their IDs
	// are drawn by the insert.
	slots := make(map[int]*txEvent, len(ps))
	for _, i := range paramsWhere(ps, results, false) {
		slots[i] = t.slot()
	}
	runs, err := insertRuns(ctx, t, ps, order, slots)
	if err != nil {
		return err
	}
	if err := readRepeats(ctx, t, ps, results, runs); err != nil {
		return err
	}
	isNew := make(map[int64]bool, len(runs))
	for _, r := range runs {
		if r.created {
			isNew[r.ID] = true
		}
	}

	// The steps of the new runs, in the params' order; the repeats' events follow the
	// others'.
	var sRun []int64
	var sWorkflow, sName, sNeeds []string
	var sWaiting []int32
	var sNow []time.Time
	for _, i := range slices.Concat(paramsWhere(ps, results, false), paramsWhere(ps, results, true)) {
		p := &ps[i]
		k := runKey{p.Workflow, p.RunKey}
		run := runs[k].Run
		results[i].Run = run
		results[i].Created = isNew[run.ID] && !p.Repeat && first[k] == i
		if !results[i].Created {
			if slot := slots[i]; slot != nil {
				slot.e = store.RunInsertEvent(p, run, false)
			} else {
				t.event(store.RunInsertEvent(p, run, false))
			}
			continue
		}
		for _, st := range p.Steps {
			needs, err := json.Marshal(nonNil(st.Needs))
			if err != nil {
				return err
			}
			sRun, sWorkflow, sName = append(sRun, run.ID), append(sWorkflow, run.Workflow), append(sName, st.Name)
			sNeeds, sWaiting, sNow = append(sNeeds, string(needs)), append(sWaiting, int32(len(st.Needs))), append(sNow, p.Now)
		}
		slots[i].at, slots[i].derived = p.Now, true
		t.notify = true
	}
	if len(sRun) > 0 {
		t.queue(`INSERT INTO steps (run_id, workflow, name, needs, waiting, state, next_at, created_at, updated_at)
			SELECT u.run_id, u.workflow, u.name, ARRAY(SELECT jsonb_array_elements_text(u.needs::jsonb)), u.waiting, 'pending', u.now, u.now, u.now
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int4[], $6::timestamptz[]) WITH ORDINALITY
				AS u(run_id, workflow, name, needs, waiting, now, ord)
			ORDER BY u.ord`, sRun, sWorkflow, sName, sNeeds, sWaiting, sNow)
	}
	return nil
}

// paramsWhere lists, in order, the indexes of the params of ps without an error whose
// Repeat is repeat.
func paramsWhere(ps []store.RunInsertParams, results []store.RunInsertResult, repeat bool) []int {
	var out []int
	for i := range ps {
		if results[i].Err == nil && ps[i].Repeat == repeat {
			out = append(out, i)
		}
	}
	return out
}

// storedRun is a run a batch of starts inserted or found, and whether it inserted it.
type storedRun struct {
	*store.Run
	created bool
}

// insertRuns inserts the runs of the params order lists, in that order, or reads those
// that exist.
func insertRuns(ctx context.Context, t *txn, ps []store.RunInsertParams, order []int, slots map[int]*txEvent) (map[runKey]storedRun, error) {
	n := len(order)
	runs := make(map[runKey]storedRun, n)
	if n == 0 {
		return runs, nil
	}
	workflows, keys, entities, hashes, actors := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	inputs, nows := make([][]byte, n), make([]time.Time, n)
	stepCounts, eventOrds := make([]int32, n), make([]int32, n)
	for j, i := range order {
		p := &ps[i]
		workflows[j], keys[j], entities[j], hashes[j], inputs[j], nows[j] = p.Workflow, p.RunKey, p.Entity, p.InputHash, []byte(p.Input), p.Now
		actors[j], stepCounts[j], eventOrds[j] = clean(p.Actor), int32(len(p.Steps)), int32(t.ordinal(slots[i]))
		if inputs[j] == nil {
			inputs[j] = []byte{}
		}
	}
	// The runs that exist already are read, not inserted: an INSERT … ON CONFLICT of a key
	// whose run another transaction is updating (a claim or a record changing its state)
	// waits for that transaction to end, and with it every start of the batch. A key
	// inserted by a transaction still in progress is not seen here: the INSERT waits for it.
	//
	// The statement draws the IDs of the transaction's events so far (the start events,
	// one per param): a new run keeps its run.created's, and the last row returns them all.
	b := &pgx.Batch{}
	t.queueMark(b)
	b.Queue(`WITH `+fmt.Sprintf(drawSQL, "$10")+`,
		u AS MATERIALIZED (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::text[], $8::int4[], $9::int4[])
				WITH ORDINALITY AS u(workflow, run_key, entity, input, input_hash, now, actor, steps, event_ord, ord)),
		old AS MATERIALIZED (
			SELECT `+runColumns+` FROM runs r JOIN u ON r.workflow = u.workflow AND r.run_key = u.run_key),
		ins AS (
			INSERT INTO runs AS r (workflow, run_key, entity, input, input_hash, state, created_at, updated_at, created_by, created_steps, created_event_id)
			SELECT u.workflow, u.run_key, u.entity, u.input, u.input_hash, 'pending', u.now, u.now, u.actor, u.steps, i.id
			FROM u JOIN ids i ON i.ord = u.event_ord
			WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.workflow = u.workflow AND old.run_key = u.run_key)
			ORDER BY u.ord
			ON CONFLICT (workflow, run_key) DO NOTHING
			RETURNING `+runColumns+`)
		SELECT true, *, NULL::bigint[] FROM ins UNION ALL SELECT false, *, NULL FROM old
		UNION ALL SELECT NULL, 0, '', '', '', ''::bytea, '', '', 'epoch', 'epoch', (SELECT array_agg(id ORDER BY ord) FROM ids)`,
		workflows, keys, entities, inputs, hashes, nows, actors, stepCounts, eventOrds, t.undrawn())
	var created, existed []*store.Run
	var ids []int64
	err := sendQuery(ctx, t, b, func(rows pgx.Rows) error {
		_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
			var r store.Run
			var isNew *bool
			var drawn []int64
			dest, done := runDest(&r)
			if err := row.Scan(append(append([]any{&isNew}, dest...), &drawn)...); err != nil {
				return struct{}{}, err
			}
			switch {
			case isNew == nil:
				ids = drawn
			case *isNew:
				done()
				created = append(created, &r)
			default:
				done()
				existed = append(existed, &r)
			}
			return struct{}{}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := t.assign(ids); err != nil {
		return nil, err
	}
	for _, r := range created {
		runs[runKey{r.Workflow, r.RunKey}] = storedRun{r, true}
	}
	for _, r := range existed {
		runs[runKey{r.Workflow, r.RunKey}] = storedRun{Run: r}
	}
	if len(created)+len(existed) < n {
		// Other transactions hold or held these keys: ON CONFLICT waited for them to
		// commit, and this statement's snapshot, taken now, sees their rows.
		var ws, ks []string
		for j := range order {
			if runs[runKey{workflows[j], keys[j]}].Run == nil {
				ws, ks = append(ws, workflows[j]), append(ks, keys[j])
			}
		}
		existing, err := runsByKey(ctx, t, ws, ks)
		if err != nil {
			return nil, err
		}
		if len(existing) != len(ws) {
			return nil, errConflict // a run that conflicted was deleted since (retention): again
		}
		for _, r := range existing {
			runs[runKey{r.Workflow, r.RunKey}] = storedRun{Run: r}
		}
	}
	return runs, nil
}

// readRepeats reads the runs of the Repeat params whose keys the batch did not insert or
// find, into runs; a Repeat param whose run is gone gets ErrNotFound.
func readRepeats(ctx context.Context, t *txn, ps []store.RunInsertParams, results []store.RunInsertResult, runs map[runKey]storedRun) error {
	var ws, ks []string
	asked := map[runKey]bool{}
	for i := range ps {
		k := runKey{ps[i].Workflow, ps[i].RunKey}
		if results[i].Err == nil && ps[i].Repeat && runs[k].Run == nil && !asked[k] {
			asked[k] = true
			ws, ks = append(ws, k.workflow), append(ks, k.key)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	found, err := runsByKey(ctx, t, ws, ks)
	if err != nil {
		return err
	}
	for _, r := range found {
		runs[runKey{r.Workflow, r.RunKey}] = storedRun{Run: r}
	}
	for i := range ps {
		if results[i].Err == nil && ps[i].Repeat && runs[runKey{ps[i].Workflow, ps[i].RunKey}].Run == nil {
			results[i].Err = fmt.Errorf("postgres: run %q of workflow %q: %w", ps[i].RunKey, ps[i].Workflow, store.ErrNotFound)
		}
	}
	return nil
}

// runsByKey reads the runs of the (workflow, run key) pairs ws and ks.
func runsByKey(ctx context.Context, t *txn, ws, ks []string) ([]*store.Run, error) {
	rows, err := t.Query(ctx, `SELECT `+runColumns+` FROM runs r
		JOIN unnest($1::text[], $2::text[]) AS u(workflow, run_key) ON r.workflow = u.workflow AND r.run_key = u.run_key`, ws, ks)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
}

// RunGetByKey implements store.Store: one lookup in the unique (workflow, run_key) index,
// on a pooled connection, outside any write transaction.
func (s *Store) RunGetByKey(ctx context.Context, workflow, runKey string) (*store.Run, error) {
	var run *store.Run
	err := s.read(ctx, "run get by key", func(q querier) error {
		var err error
		run, err = scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE workflow = $1 AND run_key = $2`, workflow, runKey))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: run %q of workflow %q: %w", runKey, workflow, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return run, nil
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
	if !p.CreatedSince.IsZero() {
		add("r.created_at >= ?", p.CreatedSince)
	}
	if !p.CreatedUntil.IsZero() {
		add("r.created_at < ?", p.CreatedUntil)
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

// refreshRunState locks a run, re-derives its state from its steps and stores it at once,
// appending a run.state_changed event when it changed (the batches of the write path use
// runSet). Every transaction that changes a run's steps has locked the run before deriving
// its state, so derivations of one run happen one at a time, each seeing the steps the
// previous one committed.
func refreshRunState(ctx context.Context, t *txn, runID int64, at time.Time, actor string) error {
	run, err := scanRun(t.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1 FOR NO KEY UPDATE`, runID))
	if err != nil {
		return err
	}
	rows, err := t.Query(ctx, `SELECT DISTINCT state, waiting = 0, reason = 'delayed' FROM steps WHERE run_id = $1`, runID)
	if err != nil {
		return err
	}
	var statuses []store.StepStatus
	var state string
	var ready, delayed bool
	_, err = pgx.ForEachRow(rows, []any{&state, &ready, &delayed}, func() error {
		w := 1
		if ready {
			w = 0
		}
		statuses = append(statuses, store.StepStatus{State: store.State(state), Waiting: w, Delayed: delayed})
		return nil
	})
	if err != nil {
		return err
	}
	if next := store.DeriveRunState(statuses); next != run.State {
		t.event(store.RunStateEvent(at, run.ID, run.Workflow, run.Entity, actor, run.State, next))
		t.queue(`UPDATE runs SET state = $1, updated_at = $2 WHERE id = $3`, string(next), at, run.ID)
	}
	return t.sendQueued(ctx)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
