package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

// gatedDestination holds every request until the test lets it go, counting how many are
// in flight at once and the most ever seen.
type gatedDestination struct {
	*httptest.Server
	release chan struct{}
	mu      sync.Mutex
	inside  int
	peak    int
	served  int
}

func newGatedDestination(t *testing.T) *gatedDestination {
	g := &gatedDestination{release: make(chan struct{})}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.inside++
		g.peak = max(g.peak, g.inside)
		g.mu.Unlock()
		select {
		case <-g.release:
		case <-r.Context().Done():
		}
		g.mu.Lock()
		g.inside--
		g.served++
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(func() { close(g.release); g.Close() })
	return g
}

func (g *gatedDestination) state() (inside, peak, served int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.peak, g.served
}

// drain lets total requests through one at a time, each time once as many as the limit
// allows are in flight, and fails if more than limit ever are.
func (g *gatedDestination) drain(t *testing.T, total, limit int) {
	t.Helper()
	for i := range total {
		want := min(limit, total-i)
		waitFor(t, fmt.Sprintf("%d requests in flight (round %d)", want, i), func() bool {
			inside, peak, _ := g.state()
			if peak > limit {
				t.Fatalf("%d requests in flight at once; the limit is %d", peak, limit)
			}
			return inside == want
		})
		g.release <- struct{}{}
	}
	waitFor(t, "every request answered", func() bool { _, _, served := g.state(); return served == total })
	if _, peak, _ := g.state(); peak != limit {
		t.Errorf("peak %d requests in flight, want exactly the limit %d", peak, limit)
	}
}

func limitedWorkflow(name, host string, concurrency int) string {
	return fmt.Sprintf(`name: %s
run_key: "{input.id}"
limits:
  - {host: "%s", concurrency: %d}
steps:
  - id: call
    kind: http
    effect_key: "%s:{input.id}"
    http: {url: "{env.LIMIT_DEST}/%s", body: {id: "{input.id}"}}
`, name, host, concurrency, name, name)
}

// limits: by host holds for every worker of a process and every workflow sending there:
// with 8 workers and two workflows, never more than 2 requests reach the host at once.
func TestDestinationLimitInOneProcess(t *testing.T) {
	dest := newGatedDestination(t)
	host := strings.TrimPrefix(dest.URL, "http://")
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		src := limitedWorkflow(name, host, 2)
		if name == "b" { // the same host, declared once
			src = strings.Replace(src, fmt.Sprintf("limits:\n  - {host: \"%s\", concurrency: 2}\n", host), "", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := limitsApp(t, dir, dest.URL, 8)
	served := make(chan error, 1)
	go func() { served <- a.Client().Serve(ctx) }()
	for i := range 10 {
		if _, err := a.Client().Start(ctx, []string{"a", "b"}[i%2], fmt.Sprint(i), map[string]any{"id": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	dest.drain(t, 10, 2)
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// A 429 with Retry-After holds back every request to the destination, not only the step
// that got it: the next request, of another run, is not sent before the time asked.
func TestRetryAfterSlowsTheWholeDestination(t *testing.T) {
	var mu sync.Mutex
	var first429 time.Time
	arrivals := map[string]time.Time{}
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		defer mu.Unlock()
		if body.ID == "1" && first429.IsZero() {
			first429 = time.Now()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if _, ok := arrivals[body.ID]; !ok {
			arrivals[body.ID] = time.Now()
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	defer dest.Close()
	dir := t.TempDir()
	src := limitedWorkflow("a", strings.TrimPrefix(dest.URL, "http://"), 1)
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := limitsApp(t, dir, dest.URL, 4)
	if _, err := a.Client().Start(ctx, "a", "1", map[string]any{"id": "1"}); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.Client().Serve(ctx) }()
	waitFor(t, "the 429", func() bool { mu.Lock(); defer mu.Unlock(); return !first429.IsZero() })
	if _, err := a.Client().Start(ctx, "a", "2", map[string]any{"id": "2"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both runs served", func() bool { mu.Lock(); defer mu.Unlock(); return len(arrivals) == 2 })
	mu.Lock()
	gap := arrivals["2"].Sub(first429)
	mu.Unlock()
	if gap < 900*time.Millisecond {
		t.Errorf("run 2's request was sent %v after the 429 asked for 1s", gap)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// On PostgreSQL the limit holds across processes: two worker processes, each allowed 2
// requests in flight to the host, never have more than 2 there together.
func TestDestinationLimitAcrossProcessesOnPostgres(t *testing.T) {
	db := withSchema(t, postgresURL(t))
	dest := newGatedDestination(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(limitedWorkflow("a", strings.TrimPrefix(dest.URL, "http://"), 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	runOK(t, "migrate", "--db", db)
	for range 2 {
		w := startCommand(t, []string{"LIMIT_DEST=" + dest.URL}, "worker", "--db", db, "--workflows", dir, "--allow-net", "127.0.0.1/32", "--workers", "4")
		w.waitLog("onceflow worker running", 1)
	}
	ctx := context.Background()
	st := openPostgres(t, db)
	defer st.Close()
	var ids []int64
	for i := range 8 {
		r, _, err := st.RunInsert(ctx, store.RunInsertParams{Workflow: "a", RunKey: fmt.Sprint(i), Input: json.RawMessage(fmt.Sprintf(`{"id":"%d"}`, i)),
			InputHash: "h", Steps: []store.StepInsert{{Name: "call"}}, Actor: "test", Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	dest.drain(t, 8, 2)
	// Both processes sent requests: otherwise one process's own limit alone would explain
	// the peak, and the test would prove nothing about the limit shared through the database.
	workers := map[string]bool{}
	for _, id := range ids {
		atts, err := st.AttemptListByRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range atts {
			workers[a.Worker] = true
		}
	}
	if len(workers) != 2 {
		t.Errorf("attempts by %d worker process(es), want both: %v", len(workers), workers)
	}
}

// A step's own limits: bound its requests whatever the host.
func TestStepLimit(t *testing.T) {
	dest := newGatedDestination(t)
	dir := t.TempDir()
	src := `name: a
run_key: "{input.id}"
steps:
  - id: call
    kind: http
    effect_key: "a:{input.id}"
    limits: {concurrency: 1}
    http: {url: "{env.LIMIT_DEST}/a", body: {id: "{input.id}"}}
`
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := limitsApp(t, dir, dest.URL, 4)
	served := make(chan error, 1)
	go func() { served <- a.Client().Serve(ctx) }()
	for i := range 4 {
		if _, err := a.Client().Start(ctx, "a", fmt.Sprint(i), map[string]any{"id": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	dest.drain(t, 4, 1)
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// limitsApp loads the workflow files of dir on a new SQLite store, with LIMIT_DEST set to
// destURL, the given number of workers and a 10 ms poll.
func limitsApp(t *testing.T, dir, destURL string, workers int) *server.Server {
	t.Helper()
	st := openSQLite(t, filepath.Join(t.TempDir(), "l.db"))
	t.Cleanup(func() { st.Close() })
	a, err := server.New(context.Background(), server.Config{Store: st, Workflows: []string{dir}, AllowNet: loopback,
		Env:    func(k string) (string, bool) { return map[string]string{"LIMIT_DEST": destURL}[k], k == "LIMIT_DEST" },
		Engine: onceflow.Config{Workers: workers, PollInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}
