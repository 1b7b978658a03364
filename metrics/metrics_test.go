package metrics_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/apicheck"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

const orderYAML = `name: order
entity: "order:{input.order_id}"
input:
  required: [order_id, customer_id]
webhook:
  name: orders
  scheme: standard-webhooks
  secret_env: [HOOK_SECRET]
api: true
steps:
  - id: charge
    kind: go
    func: charge
    effect_key: "charge:{input.order_id}"
    retry: {max_attempts: 3, initial: 1s, max: 1s}
  - id: welcome
    kind: go
    func: ok
    needs: [charge]
    effect_key: "welcome:{input.customer_id}"
  - id: ship
    kind: go
    func: ship
    needs: [charge]
    effect_key: "ship:{input.order_id}"
`

const adminToken = "admin-token-0123456789abcdef"

var hookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("metrics-test-secret-0123456789"))

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// series is one sample of the exposition: its name, labels and value.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads url and parses the text exposition format.
func scrape(t *testing.T, url string) []series {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	var out []series
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := series{labels: map[string]string{}}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			t.Fatalf("unparsable line %q", line)
		}
		head, val := line[:i], line[i+1:]
		name, labels, hasLabels := strings.Cut(head, "{")
		s.name = name
		if hasLabels {
			labels = strings.TrimSuffix(labels, "}")
			for _, kv := range splitLabels(labels) {
				k, v, _ := strings.Cut(kv, "=")
				uq, err := strconv.Unquote(v)
				if err != nil {
					t.Fatalf("label %q of line %q: %v", kv, line, err)
				}
				s.labels[k] = uq
			}
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("value of line %q: %v", line, err)
		}
		s.value = f
		out = append(out, s)
	}
	return out
}

// splitLabels splits `a="x",b="y,z"` at the commas between pairs.
func splitLabels(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// value returns the value of the series name with exactly the given labels.
func value(t *testing.T, all []series, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, s := range all {
		if s.name != name || len(s.labels) != len(want) {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		return s.value
	}
	t.Errorf("no series %s%v", name, labels)
	return -1
}

// A small workload — webhook deliveries (one repeated, one forged), API starts (one
// repeated), a step that is retried, an effect reused from the ledger, a step parked for
// review and a run left due — shows up at /metrics with the values it must have, and with
// no label but workflow, step, state, outcome and reason.
func TestMetricsAfterWorkload(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	m := metrics.New(metrics.Config{Store: st, Now: clk.Now, StatsMaxAge: time.Nanosecond})
	client, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "w1", Clock: clk.Now, ClockSync: -1, Rand: func() float64 { return 0.5 }, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]onceflow.StepFunc{}
	kinds, err := stdsteps.New(stdsteps.Options{Funcs: funcs})
	if err != nil {
		t.Fatal(err)
	}
	trigs, err := stdtriggers.New()
	if err != nil {
		t.Fatal(err)
	}
	def, ps := (&flowfile.Reader{Kinds: kinds, Triggers: trigs}).Parse("order.yaml", []byte(orderYAML))
	if ps != nil {
		t.Fatal(ps)
	}
	orderOf := func(sc *onceflow.StepContext) string {
		var in struct {
			OrderID string `json:"order_id"`
		}
		_ = sc.DecodeInput(&in)
		return in.OrderID
	}
	maps.Copy(funcs, map[string]onceflow.StepFunc{
		"charge": func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			if orderOf(sc) == "1" && sc.Attempt == 1 {
				return nil, errors.New("payment provider answered 503")
			}
			return map[string]any{"charged": true}, nil
		},
		"ok": func(context.Context, *onceflow.StepContext) (any, error) { return map[string]any{"ok": true}, nil },
		"ship": func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			if orderOf(sc) == "3" {
				return nil, onceflow.PermanentError(errors.New("address refused by the carrier"))
			}
			return map[string]any{"shipped": true}, nil
		},
	})
	wfs, err := flowfile.NewBuilder(flowfile.BuildOptions{}).Workflows([]*flowfile.Definition{def})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wfs {
		if err := client.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	hooks, err := flowfile.Triggers([]*flowfile.Definition{def}, flowfile.TriggerOptions{Env: func(k string) (string, bool) { return hookSecret, k == "HOOK_SECRET" }})
	if err != nil {
		t.Fatal(err)
	}
	api, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Receivers: triggers.Receivers(hooks),
		Tokens:  []onceflowhttp.Token{{Name: "ops", Secret: adminToken, Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}},
		Now:     clk.Now,
		Metrics: m, MetricsHandler: m.Handler(),
	})
	if err != nil {
		t.Fatal(err)
	}
	checker, err := apicheck.New(onceflowhttp.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	// Every request to the API is checked against its OpenAPI document.
	hs := httptest.NewServer(checker.Handler(api, func(err error) { t.Errorf("OpenAPI document: %v", err) }))
	t.Cleanup(hs.Close)

	post := func(path string, header http.Header, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
	}
	deliver := func(id, body string, forged bool, want int) {
		t.Helper()
		cfg := signature.Config{Scheme: signature.StandardWebhooks, Secrets: []string{hookSecret}}
		if forged {
			cfg.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("not-the-secret-0123456789"))}
		}
		h, err := signature.Sign(cfg, 0, id, clk.Now(), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		post("/hooks/orders", h, body, want)
	}
	start := func(key, body string) {
		t.Helper()
		post("/v1/workflows/order/runs", http.Header{"Authorization": {"Bearer " + adminToken}, "Idempotency-Key": {key}}, body, http.StatusCreated)
	}
	work := func() {
		t.Helper()
		if _, err := client.Work(ctx); err != nil {
			t.Fatal(err)
		}
	}

	order1 := `{"order_id": "1", "customer_id": "c1"}`
	deliver("evt_1", order1, false, http.StatusOK)
	deliver("evt_1", order1, false, http.StatusOK) // a repeated delivery: starts nothing
	deliver("evt_2", order1, true, http.StatusUnauthorized)
	start("order-2", `{"order_id": "2", "customer_id": "c1"}`)
	start("order-2", `{"order_id": "2", "customer_id": "c1"}`) // a double click
	start("order-3", `{"order_id": "3", "customer_id": "c3"}`)
	work() // order 1's charge fails once; order 2 completes welcome:c1; order 3's ship is parked

	runs, err := st.RunList(ctx, store.RunListParams{RunKey: "evt_1"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("run of evt_1: %v %v", runs, err)
	}
	steps, err := st.StepListByRun(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].Name != "charge" || steps[0].State != store.StateRetrying {
		t.Fatalf("order 1's charge: %s %s, want retrying", steps[0].Name, steps[0].State)
	}
	clk.Set(steps[0].NextAt.Add(3 * time.Second)) // claimed 3 s after it became due
	work()                                        // order 1 completes; welcome:c1 comes from the ledger
	start("order-4", `{"order_id": "4", "customer_id": "c4"}`)

	all := scrape(t, hs.URL+"/metrics")
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"onceflow_run_starts_total", []string{"workflow", "order", "outcome", "created"}, 4},
		{"onceflow_run_starts_total", []string{"workflow", "order", "outcome", "deduplicated"}, 2},
		{"onceflow_webhook_deliveries_total", []string{"workflow", "order", "outcome", "accepted"}, 1},
		{"onceflow_webhook_deliveries_total", []string{"workflow", "order", "outcome", "duplicate"}, 1},
		{"onceflow_webhook_deliveries_total", []string{"workflow", "order", "outcome", "rejected"}, 1},
		{"onceflow_step_attempts_total", []string{"workflow", "order", "step", "charge", "outcome", "retryable"}, 1},
		{"onceflow_step_attempts_total", []string{"workflow", "order", "step", "charge", "outcome", "success"}, 3},
		{"onceflow_step_attempts_total", []string{"workflow", "order", "step", "welcome", "outcome", "success"}, 2},
		{"onceflow_step_attempts_total", []string{"workflow", "order", "step", "ship", "outcome", "success"}, 2},
		{"onceflow_step_attempts_total", []string{"workflow", "order", "step", "ship", "outcome", "permanent"}, 1},
		{"onceflow_step_attempt_duration_seconds_count", []string{"workflow", "order", "step", "charge", "outcome", "retryable"}, 1},
		{"onceflow_step_attempt_duration_seconds_count", []string{"workflow", "order", "step", "ship", "outcome", "permanent"}, 1},
		{"onceflow_effect_reuses_total", []string{"workflow", "order", "step", "welcome"}, 1},
		{"onceflow_step_claim_lag_seconds_count", []string{"workflow", "order"}, 9},
		{"onceflow_step_claim_lag_seconds_sum", []string{"workflow", "order"}, 3},
		{"onceflow_step_claim_lag_seconds_bucket", []string{"workflow", "order", "le", "2.5"}, 8},
		{"onceflow_review_queue", []string{"workflow", "order", "reason", "permanent_error"}, 1},
		{"onceflow_runs", []string{"workflow", "order", "state", "completed"}, 2},
		{"onceflow_runs", []string{"workflow", "order", "state", "needs_review"}, 1},
		{"onceflow_runs", []string{"workflow", "order", "state", "pending"}, 1},
		{"onceflow_runs", []string{"workflow", "order", "state", "failed"}, 0},
		{"onceflow_steps", []string{"workflow", "order", "step", "charge", "state", "completed"}, 3},
		{"onceflow_steps", []string{"workflow", "order", "step", "charge", "state", "pending"}, 1},
		{"onceflow_steps", []string{"workflow", "order", "step", "welcome", "state", "completed"}, 3},
		{"onceflow_steps", []string{"workflow", "order", "step", "ship", "state", "needs_review"}, 1},
		{"onceflow_steps", []string{"workflow", "order", "step", "ship", "state", "processing"}, 0},
		{"onceflow_steps_due", []string{"workflow", "order"}, 1},
		{"onceflow_leases_reaped_total", nil, 0},
		{"onceflow_store_stats_errors_total", nil, 0},
	}
	for _, c := range checks {
		if got := value(t, all, c.name, c.labels...); got != c.want && got != -1 {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if value(t, all, "go_goroutines") <= 0 {
		t.Error("the Go runtime's series are missing")
	}

	// Labels are bounded: names of workflows and steps, states, outcomes, reasons.
	allowed := map[string]bool{"workflow": true, "step": true, "state": true, "outcome": true, "reason": true, "le": true, "kind": true}
	var names []string
	seen := map[string]bool{}
	for _, s := range all {
		if !strings.HasPrefix(s.name, "onceflow_") {
			continue
		}
		if !seen[s.name] {
			seen[s.name] = true
			names = append(names, s.name)
		}
		for k, v := range s.labels {
			if !allowed[k] {
				t.Errorf("%s has label %s", s.name, k)
			}
			for _, id := range []string{"evt_", "order-", "order:", "charge:", "welcome:", "c1", "c3"} {
				if strings.Contains(v, id) {
					t.Errorf("%s label %s=%q carries a key, an entity or an id", s.name, k, v)
				}
			}
		}
	}
	sort.Strings(names)
	t.Logf("onceflow series: %s", strings.Join(names, ", "))
}

// A store that cannot be read is counted, and the other series are still served.
func TestMetricsStoreError(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Config{Store: st})
	m.Observe(onceflow.Measurement{Kind: onceflow.MeasureLeaseReap, Count: 2})
	st.Close()
	hs := httptest.NewServer(m.Handler())
	t.Cleanup(hs.Close)
	all := scrape(t, hs.URL)
	if got := value(t, all, "onceflow_store_stats_errors_total"); got != 1 {
		t.Errorf("onceflow_store_stats_errors_total = %v, want 1", got)
	}
	if got := value(t, all, "onceflow_leases_reaped_total"); got != 2 {
		t.Errorf("onceflow_leases_reaped_total = %v, want 2", got)
	}
	for _, s := range all {
		if s.name == "onceflow_runs" {
			t.Errorf("a gauge of the store was served without the store: %v", s)
		}
	}
}

// onceflow_clock_skew_seconds is this machine's clock minus the database's, once the
// client measured it on PostgreSQL (a client whose clock is 90 s ahead shows about 90); on
// SQLite, which has no clock of its own to compare with, there is no such series.
func TestClockSkewGauge(t *testing.T) {
	ctx := context.Background()
	u, schema := testsvc.PostgresSchema(t, "onceflow_metrics_")
	pg, err := postgres.Open(ctx, u, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	for _, tc := range []struct {
		name string
		st   store.Store
		want bool
	}{{"postgres", pg, true}, {"sqlite", lite, false}} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New(metrics.Config{})
			c, err := onceflow.New(onceflow.Config{Store: tc.st, Metrics: m, Clock: func() time.Time { return time.Now().Add(90 * time.Second) }})
			if err != nil {
				t.Fatal(err)
			}
			c.Now() // measures the database's clock, where there is one
			srv := httptest.NewServer(m.Handler())
			defer srv.Close()
			var skew []series
			for _, s := range scrape(t, srv.URL) {
				if s.name == "onceflow_clock_skew_seconds" {
					skew = append(skew, s)
				}
			}
			switch {
			case !tc.want && len(skew) > 0:
				t.Fatalf("onceflow_clock_skew_seconds on a store without a database clock: %v", skew)
			case tc.want && (len(skew) != 1 || skew[0].value < 89 || skew[0].value > 91):
				t.Fatalf("onceflow_clock_skew_seconds = %v; want one series of about 90", skew)
			}
		})
	}
}
