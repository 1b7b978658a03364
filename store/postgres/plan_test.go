package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
)

// The write path's statements are planned once per connection and kept (pgx prepares
// them; plan_cache_mode=auto lets PostgreSQL keep a generic plan), so each must look its
// rows up by key whatever the tables held when its plan was made. TestWritePathPlans runs
// the write path — starts new and repeated, claims that take, wait for and reuse keys,
// records of every outcome, a batch of all three, heartbeats, a reap — on a store that
// logs every statement it sends, then explains each of them in a fresh, never analyzed
// schema (a new deployment, where a kept plan would otherwise be made on empty tables)
// and in one holding 100,000 steps, analyzed: the generic plan of every statement and the
// plan the locking scans make for their parameters must reach the tables of runs, steps,
// the ledger, attempts and events through an index condition, never by reading them
// whole.
func TestWritePathPlans(t *testing.T) {
	t.Parallel()
	url := testsvc.Postgres(t)
	log := &statementLog{}
	_, schema := testsvc.PostgresSchema(t, "onceflow_plans_")
	s := openLogged(t, url, schema, log)
	writePath(t, s, time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), 8)
	stmts := log.statements()
	if len(stmts) < 15 {
		t.Fatalf("the write path sent %d statements; the workload should reach every kind of write", len(stmts))
	}

	_, empty := testsvc.PostgresSchema(t, "onceflow_plans_empty_")
	openLogged(t, url, empty, nil).Close()
	checkPlans(t, url, empty, stmts)

	_, large := testsvc.PostgresSchema(t, "onceflow_plans_large_")
	ls := openLogged(t, url, large, nil)
	grow(t, ls, 100_000)
	ls.Close()
	analyze(t, url, large)
	checkPlans(t, url, large, stmts)
}

// bigTables are the tables that grow with the work: a plan that reads one of them whole
// costs more with every run.
var bigTables = []string{"runs", "steps", "effects", "attempts", "events"}

// loggedStatement is a statement the store sent and the arguments of its first execution.
type loggedStatement struct {
	sql  string
	args []any
}

// statementLog is a pgx tracer that keeps every statement text a store sends, in the order
// first sent, with its first arguments.
type statementLog struct {
	mu    sync.Mutex
	seen  map[string]bool
	order []loggedStatement
}

func (l *statementLog) add(sql string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[sql] {
		return
	}
	l.seen[sql] = true
	l.order = append(l.order, loggedStatement{sql: sql, args: slices.Clone(args)})
}

// statements returns the statements that read or write a table, in the order first sent.
func (l *statementLog) statements() []loggedStatement {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedStatement
	for _, st := range l.order {
		q := strings.ToUpper(strings.TrimSpace(st.sql))
		if !strings.HasPrefix(q, "SELECT") && !strings.HasPrefix(q, "WITH") && !strings.HasPrefix(q, "INSERT") &&
			!strings.HasPrefix(q, "UPDATE") && !strings.HasPrefix(q, "DELETE") {
			continue
		}
		for _, tb := range bigTables {
			if strings.Contains(strings.ToLower(st.sql), " "+tb) {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(d.SQL, d.Args)
	return ctx
}
func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		l.add(q.SQL, q.Arguments)
	}
	return ctx
}
func (l *statementLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// openLogged opens a store on schema whose statements go to log (when not nil), closed
// when the test ends.
func openLogged(t *testing.T, url, schema string, log *statementLog) *Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if log != nil {
		cfg.ConnConfig.Tracer = log
	}
	s, err := openConfig(t.Context(), cfg, Options{Schema: schema})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

const planWorkflow = "plans"

// planPrepare acts under "<run key>/<step>", except the steps called "shared", which share
// one key: the first takes it, the others wait for it and then reuse it.
func planPrepare(c *store.ClaimCandidate) (store.EffectSpec, error) {
	if c.Step.Name == "shared" {
		return store.EffectSpec{Key: "shared-key", Fingerprint: "fp"}, nil
	}
	return store.EffectSpec{Key: c.Run.RunKey + "/" + c.Step.Name, Fingerprint: "fp"}, nil
}

func planStart(key string, now time.Time, steps ...store.StepInsert) store.RunInsertParams {
	return store.RunInsertParams{Workflow: planWorkflow, RunKey: key, Entity: "entity:" + key, Input: json.RawMessage(`{}`),
		InputHash: "hash-" + key, Actor: "test", Now: now, Steps: steps}
}

func planClaim(now time.Time, limit int) store.StepClaimParams {
	return store.StepClaimParams{Owner: "plan-worker", Now: now, LeaseFor: time.Minute, Limit: limit,
		Workflows: []string{planWorkflow}, Prepare: planPrepare, WaitFor: time.Second}
}

func planSuccess(c *store.ClaimedStep, now time.Time) store.StepRecordParams {
	return store.StepRecordParams{StepID: c.Step.ID, Owner: c.Step.LeaseOwner, Attempt: c.Step.Attempt, Now: now,
		Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"ok":true}`), NextState: store.StateCompleted}
}

// writePath drives every kind of write of the engine's hot path through s, with runs of
// two steps (b needs a) in batches of n, starting at now.
func writePath(t *testing.T, s *Store, now time.Time, n int) {
	t.Helper()
	ctx := t.Context()
	chain := []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}
	var starts []store.RunInsertParams
	for i := range n {
		starts = append(starts, planStart(fmt.Sprintf("r%d", i), now, chain...))
	}
	starts = append(starts, starts[0]) // repeated
	if _, err := s.RunInsertMany(ctx, starts); err != nil {
		t.Fatalf("RunInsertMany: %v", err)
	}
	if _, err := s.RunInsertMany(ctx, []store.RunInsertParams{planStart("s1", now, store.StepInsert{Name: "shared"}),
		planStart("s2", now, store.StepInsert{Name: "shared"})}); err != nil {
		t.Fatalf("RunInsertMany: %v", err)
	}
	// A batch of starts and a claim: the a steps, one shared step taking its key, the other
	// waiting for it.
	wb, err := s.WriteBatch(ctx, store.WriteBatchParams{Starts: []store.RunInsertParams{planStart("w1", now, chain...), starts[1]},
		Claim: planClaim(now, 4*n)})
	if err != nil {
		t.Fatalf("WriteBatch: %v", err)
	}
	claimed := wb.Claim.Claimed
	if len(claimed) < n || wb.Claim.Waiting == 0 {
		t.Fatalf("WriteBatch claimed %d steps, %d waiting; want at least %d and one waiting", len(claimed), wb.Claim.Waiting, n)
	}
	now = now.Add(time.Second)
	// Records of every outcome with a claim: successes release the b steps.
	var recs []store.StepRecordParams
	var heartbeat []int64
	for i, c := range claimed {
		p := planSuccess(c, now)
		switch {
		case c.Step.Name == "shared":
		case i%4 == 1:
			p.Outcome, p.Error, p.NextState, p.NextAt, p.Output = store.OutcomeRetryable, "try again", store.StateRetrying, now.Add(time.Second), nil
		case i%4 == 2:
			p.Outcome, p.Error, p.NextState, p.Reason, p.Output = store.OutcomePermanent, "refused", store.StateNeedsReview, "permanent_error", nil
		case i%4 == 3:
			heartbeat = append(heartbeat, c.Step.ID)
			continue // left to the reaper
		}
		recs = append(recs, p)
	}
	wb, err = s.WriteBatch(ctx, store.WriteBatchParams{Records: recs, Claim: planClaim(now, 4*n)})
	if err != nil {
		t.Fatalf("WriteBatch: %v", err)
	}
	if _, err := s.StepHeartbeat(ctx, store.StepHeartbeatParams{Owner: "plan-worker", Now: now, LeaseFor: time.Minute, StepIDs: heartbeat}); err != nil {
		t.Fatalf("StepHeartbeat: %v", err)
	}
	recs = recs[:0]
	for _, c := range wb.Claim.Claimed {
		recs = append(recs, planSuccess(c, now))
	}
	if _, err := s.StepRecord(ctx, recs); err != nil {
		t.Fatalf("StepRecord: %v", err)
	}
	// The retries and the waiting step, which reuses the shared key.
	now = now.Add(5 * time.Second)
	cr, err := s.StepClaim(ctx, planClaim(now, 4*n))
	if err != nil {
		t.Fatalf("StepClaim: %v", err)
	}
	if len(cr.Claimed) == 0 || wb.Claim.Reused+cr.Reused == 0 {
		t.Fatalf("StepClaim claimed %d steps and the claims reused %d; want retries claimed and the shared key reused", len(cr.Claimed), wb.Claim.Reused+cr.Reused)
	}
	// The steps left by their worker, and those just claimed, reaped.
	if _, err := s.StepReapExpired(ctx, store.StepReapParams{Now: now.Add(time.Hour), Decide: func(*store.Step) store.ReapDecision {
		return store.ReapDecision{State: store.StateRetrying, NextAt: now.Add(time.Hour), Reason: store.ReasonLeaseExpired}
	}}); err != nil {
		t.Fatalf("StepReapExpired: %v", err)
	}
	run, err := s.RunGetByKey(ctx, planWorkflow, "r0")
	if err != nil {
		t.Fatalf("RunGetByKey: %v", err)
	}
	if _, err := s.RunGetByID(ctx, run.ID); err != nil {
		t.Fatalf("RunGetByID: %v", err)
	}
}

// grow fills s with about steps steps of finished and waiting runs, through the store's
// own writes so that the rows are the ones it writes.
func grow(t *testing.T, s *Store, steps int) {
	t.Helper()
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 2000
	chain := []store.StepInsert{{Name: "a"}, {Name: "b", Needs: []string{"a"}}}
	for r := 0; r < steps/2; r += batch {
		ps := make([]store.RunInsertParams, 0, batch)
		for i := r; i < r+batch; i++ {
			ps = append(ps, planStart(fmt.Sprintf("g%d", i), now, chain...))
		}
		if _, err := s.RunInsertMany(ctx, ps); err != nil {
			t.Fatalf("RunInsertMany: %v", err)
		}
		if r%(5*batch) != 0 {
			continue
		}
		// One batch in five is executed, so that the ledger, the attempts and the events
		// grow as well.
		res, err := s.StepClaim(ctx, planClaim(now, 2*batch))
		if err != nil {
			t.Fatalf("StepClaim: %v", err)
		}
		recs := make([]store.StepRecordParams, 0, len(res.Claimed))
		for _, c := range res.Claimed {
			recs = append(recs, planSuccess(c, now))
		}
		if _, err := s.StepRecord(ctx, recs); err != nil {
			t.Fatalf("StepRecord: %v", err)
		}
	}
}

// analyze gathers the planner's statistics of every table of schema.
func analyze(t *testing.T, url, schema string) {
	t.Helper()
	conn := planConn(t, url, schema)
	if _, err := conn.Exec(t.Context(), `ANALYZE`); err != nil {
		t.Fatalf("ANALYZE: %v", err)
	}
}

// planConn opens a connection with schema alone on its search_path, closed when the test
// ends.
func planConn(t *testing.T, url, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// checkPlans explains every statement of stmts in schema: its generic plan, and for a
// locking scan the plan made for the arguments it was first sent with.
func checkPlans(t *testing.T, url, schema string, stmts []loggedStatement) {
	t.Helper()
	ctx := t.Context()
	conn := planConn(t, url, schema)
	// The write path's settings, for the session rather than a transaction.
	for _, set := range keyedSettings {
		if _, err := conn.Exec(ctx, strings.ReplaceAll(set, ", true)", ", false)")); err != nil {
			t.Fatal(err)
		}
	}
	var tables int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' AND reltuples >= 0`,
		schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	for _, st := range stmts {
		name := firstLine(st.sql)
		plan, err := genericPlan(ctx, conn, st.sql)
		if err != nil {
			t.Errorf("%s: generic plan of %s: %v", schema, name, err)
			continue
		}
		for _, bad := range fullReads(plan) {
			t.Errorf("%s (%d tables analyzed): the generic plan of\n\t%s\nreads %s\n%s", schema, tables, name, bad, plan)
		}
		if !strings.Contains(st.sql, "SKIP LOCKED") {
			continue
		}
		plan, err = customPlan(ctx, conn, st.sql, st.args)
		if err != nil {
			t.Errorf("%s: plan of %s: %v", schema, name, err)
			continue
		}
		for _, bad := range fullReads(plan) {
			t.Errorf("%s: the plan for its arguments of\n\t%s\nreads %s\n%s", schema, name, bad, plan)
		}
	}
}

// firstLine is the statement's first line, to name it.
func firstLine(sql string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(sql), "\n")
	return line
}

// genericPlan returns the generic plan of sql (EXPLAIN, FORMAT JSON): the plan a prepared
// statement keeps, whatever its parameters.
func genericPlan(ctx context.Context, conn *pgx.Conn, sql string) (string, error) {
	sd, err := conn.Prepare(ctx, "", sql)
	if err != nil {
		return "", err
	}
	var types []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(format_type(o, NULL) ORDER BY i), '{}') FROM unnest($1::oid[]) WITH ORDINALITY AS p(o, i)`,
		sd.ParamOIDs).Scan(&types); err != nil {
		return "", err
	}
	nulls := make([]string, len(types))
	for i := range nulls {
		nulls[i] = "NULL"
	}
	decl, call := "", ""
	if len(types) > 0 {
		decl, call = "("+strings.Join(types, ", ")+")", "("+strings.Join(nulls, ", ")+")"
	}
	if _, err := conn.Exec(ctx, `PREPARE plan_check`+decl+` AS `+sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, `DEALLOCATE plan_check`, pgx.QueryExecModeSimpleProtocol) //nolint:errcheck
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		return "", err
	}
	var plan string
	err = conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE plan_check`+call, pgx.QueryExecModeSimpleProtocol).Scan(&plan)
	return plan, err
}

// customPlan returns the plan of sql made for args.
func customPlan(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, error) {
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_custom_plan`); err != nil {
		return "", err
	}
	var plan string
	err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+sql, append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&plan)
	return plan, err
}

// fullReads lists the nodes of plan (EXPLAIN's JSON) that read one of bigTables whole — a
// sequential scan, or an index scan without an index condition — and says so when the plan
// is compiled with JIT (costs that high mean a scan priced out is still there).
func fullReads(plan string) []string {
	var doc []struct {
		Plan planNode        `json:"Plan"`
		JIT  json.RawMessage `json:"JIT"`
	}
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return []string{fmt.Sprintf("an unreadable plan (%v)", err)}
	}
	var out []string
	if doc[0].JIT != nil {
		out = append(out, "nothing whole, but is compiled with JIT on every execution")
	}
	var walk func(n *planNode)
	walk = func(n *planNode) {
		if slices.Contains(bigTables, n.Relation) {
			switch n.Type {
			case "Seq Scan":
				out = append(out, "table "+n.Relation+" whole (Seq Scan)")
			case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
				if n.IndexCond == "" {
					out = append(out, fmt.Sprintf("table %s whole (%s on %s without an index condition)", n.Relation, n.Type, n.Index))
				}
			}
		}
		if n.Type == "Bitmap Index Scan" && n.IndexCond == "" {
			out = append(out, "index "+n.Index+" whole (Bitmap Index Scan without an index condition)")
		}
		for i := range n.Plans {
			walk(&n.Plans[i])
		}
	}
	walk(&doc[0].Plan)
	return out
}

// planNode is a node of EXPLAIN's JSON output.
type planNode struct {
	Type      string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}
