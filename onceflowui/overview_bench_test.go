package onceflowui_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store/sqlite"
)

// buildRuns writes n runs of workflow "deliver" into a new SQLite database at path with
// bulk INSERTs, not through the engine: created 360 ms apart up to now (so the last hour
// holds 10,000 of a million), each with one step and one ended attempt, whose run.created
// and step.completed events are derived from those rows as the engine writes them; every
// thousandth step is parked for review instead, with its stored step.needs_review event.
func buildRuns(tb testing.TB, path string, n int, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	end := now.UnixMicro()
	const gap = 360_000 // µs between two runs
	stmts := []string{
		`PRAGMA journal_mode = OFF`, `PRAGMA synchronous = OFF`, `BEGIN`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
		INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at, created_by, created_steps, created_event_id)
		SELECT i, 'deliver', 'key-' || i, 'order:' || i, '{"n":' || i || '}', 'h' || i,
			CASE WHEN i % 1000 = 0 THEN 'needs_review' ELSE 'completed' END,
			?2 - (?1 - i) * ?3, ?2 - (?1 - i) * ?3 + 2000, 'api', 1, 3 * i - 2 FROM n`,
		// The store's writer keeps run_counts as it inserts runs; rows written around it
		// are counted here.
		`INSERT INTO run_counts (workflow, state, n) SELECT workflow, state, count(*) FROM runs GROUP BY workflow, state
		ON CONFLICT (workflow, state) DO UPDATE SET n = n + excluded.n`,
		`INSERT INTO steps (id, run_id, workflow, name, state, effect_key, attempt, next_at, reason, created_at, updated_at, last_outcome)
		SELECT id, id, 'deliver', 'send', CASE WHEN id % 1000 = 0 THEN 'needs_review' ELSE 'completed' END, 'send:' || id, 1, created_at,
			CASE WHEN id % 1000 = 0 THEN 'permanent_error' ELSE '' END, created_at, created_at + 2000,
			CASE WHEN id % 1000 = 0 THEN 'permanent' ELSE 'success' END FROM runs`,
		`INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, claim_event_id, lease_until, end_derived)
		SELECT 3 * id, id, id, 'send', 1, 'send:' || id, 'w1', created_at + 1000, created_at + 2000,
			CASE WHEN id % 1000 = 0 THEN 'permanent' ELSE 'success' END, 3 * id - 1, created_at + 31000000,
			CASE WHEN id % 1000 = 0 THEN 0 ELSE 1 END FROM runs`,
		`INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail)
		SELECT 3 * id, created_at + 2000, 'step.needs_review', id, id, 'deliver', entity, 'send', 'send:' || id, 1, 'w1', 'permanent_error', '{}'
		FROM runs WHERE id % 1000 = 0`,
		`WITH RECURSIVE k(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM k WHERE j < (?1 - 1) / 1000)
		INSERT INTO audit_spans (first_id, last_id, min_at, max_at)
		SELECT 3 * (j * 1000) + 1, 3 * min((j + 1) * 1000, ?1), ?2 - (?1 - (j * 1000 + 1)) * ?3, ?2 - (?1 - min((j + 1) * 1000, ?1)) * ?3 + 2000 FROM k`,
		`COMMIT`, `ANALYZE`,
	}
	for _, q := range stmts {
		var args []any
		if strings.Contains(q, "?1") {
			args = []any{n, end, gap}
		}
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			tb.Fatalf("%.60s…: %v", q, err)
		}
	}
}

// BenchmarkOverview times the overview page on a SQLite database of
// $ONCEFLOW_BENCH_RUNS runs (default 1,000,000), built with bulk INSERTs: the counts of
// runs by state, the review queue, the last hour's activity and the recent failures.
//
//	go test ./onceflowui -run '^$' -bench Overview -benchtime 20x
func BenchmarkOverview(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("ONCEFLOW_BENCH_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("ONCEFLOW_BENCH_RUNS=%q is not a positive number", v)
		}
	}
	ctx := context.Background()
	now := time.Now()
	path := filepath.Join(b.TempDir(), "overview.db")
	start := time.Now()
	buildRuns(b, path, n, now)
	b.Logf("built %d runs in %s", n, time.Since(start).Round(time.Millisecond))
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	tokens, err := onceflowhttp.ParseTokens("viewer:read:" + readSecret)
	if err != nil {
		b.Fatal(err)
	}
	console, err := onceflowui.New(onceflowui.Config{Client: client, Tokens: tokens})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(console)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string) {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, page := get("/ui/login")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.Fatal("no sign-in form")
	}
	resp, err := hc.PostForm(srv.URL+"/ui/login", url.Values{"csrf": {m[1]}, "token": {readSecret}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("sign-in answered %v (%v)", resp, err)
	}
	resp.Body.Close()
	_, page = get("/ui/")
	if !strings.Contains(page, `<span class="n" id="review-total">`+strconv.Itoa(n/1000)+`</span>`) {
		b.Fatalf("the overview does not count %d items in review", n/1000)
	}
	b.ResetTimer()
	for b.Loop() {
		if status, _ := get("/ui/"); status != http.StatusOK {
			b.Fatalf("overview answered %d", status)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
}
