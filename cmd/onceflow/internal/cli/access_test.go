package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

// With examples/monthly-invoices.yaml served, a token cannot issue invoices: the
// schedule's fan-out walker (monthly-invoices.for-each) does not exist for any token, and
// is answered exactly as a workflow that does not exist; the workflow the schedule feeds
// is refused with what to change; nothing is stored, nothing fetched from the billing
// system and nothing posted to it.
func TestServeRefusesTheScheduleOfMonthlyInvoices(t *testing.T) {
	var (
		mu       sync.Mutex
		requests []string
	)
	billing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.String())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/customers":
			io.WriteString(w, `{"data": [{"customer_id": 1}, {"customer_id": 2}]}`)
		default:
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id": "inv_1"}`)
		}
	}))
	defer billing.Close()
	t.Setenv("BILLING_URL", billing.URL)
	t.Setenv("BILLING_TOKEN", "billing-token-0123456789")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openSQLite(t, filepath.Join(t.TempDir(), "onceflow.db"))
	defer st.Close()
	ingest := onceflowhttp.Token{Name: "website", Secret: "ingest-secret-0123456789", Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeIngest}}
	admin := onceflowhttp.Token{Name: "ops", Secret: "admin-secret-0123456789", Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}
	_, base, done := startServer(t, ctx, server.Config{Store: st, Workflows: []string{"../../../../examples/monthly-invoices.yaml"}, AllowNet: loopback,
		Engine: onceflow.Config{Workers: 4, PollInterval: 10 * time.Millisecond}, API: &server.APIConfig{Tokens: []onceflowhttp.Token{ingest, admin}}})

	post := func(path, secret, key, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, doc
	}
	offTick := `{"schedule": {"time": "2031-07-15T13:37:00Z"}}`
	for _, tok := range []onceflowhttp.Token{ingest, admin} {
		code, walker := post("/v1/workflows/monthly-invoices.for-each/runs", tok.Secret, "monthly-invoices:2031-07-15T13:37:00Z", offTick)
		if code != http.StatusNotFound || walker["type"] != "https://onceflow.dev/problems/workflow-not-found" {
			t.Fatalf("token %s, POST …/monthly-invoices.for-each/runs: %d %v, want 404 workflow-not-found", tok.Name, code, walker)
		}
		// Nothing more than for a workflow that does not exist.
		_, unknown := post("/v1/workflows/monthly-invoices.for-all/runs", tok.Secret, "k", offTick)
		if got, want := strings.ReplaceAll(walker["detail"].(string), "for-each", "for-all"), unknown["detail"]; got != want {
			t.Fatalf("the walker's 404 says %q, an unknown workflow's %q", got, want)
		}
	}
	code, refused := post("/v1/workflows/monthly-invoices/runs", ingest.Secret, "invoice:1:2031-07:subscription",
		`{"item": {"customer_id": 1}, "schedule": {"period": "2031-07"}}`)
	detail, _ := refused["detail"].(string)
	if code != http.StatusForbidden || refused["type"] != "https://onceflow.dev/problems/start-refused" ||
		!strings.Contains(detail, "started by its schedule") || !strings.Contains(detail, "api: true") || !strings.Contains(detail, "monthly-invoices.yaml") {
		t.Fatalf("POST …/monthly-invoices/runs: %d %v, want 403 start-refused naming the file and api: true", code, refused)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runs, err := st.RunList(context.Background(), store.RunListParams{})
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs stored: %d %v", len(runs), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) != 0 {
		t.Fatalf("the billing system was called: %v", requests)
	}
}

// A reload may not leave a token whose list names a workflow it cannot start, nor a file
// that names a token that does not exist: it is refused with the problem, and the
// definitions loaded before keep running.
func TestReloadChecksTokenLists(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: a\nsteps:\n  - id: s\n    kind: go\n    func: noop\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openSQLite(t, filepath.Join(t.TempDir(), "onceflow.db"))
	defer st.Close()
	noop := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	admin := onceflowhttp.Token{Name: "ops", Secret: "admin-secret-0123456789", Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}
	site := onceflowhttp.Token{Name: "site", Secret: "site-secret-0123456789", Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeIngest}, Workflows: []string{"a"}}
	a, base, done := startServer(t, ctx, server.Config{Store: st, Workflows: []string{dir}, Funcs: map[string]onceflow.StepFunc{"noop": noop},
		API: &server.APIConfig{Tokens: []onceflowhttp.Token{admin, site}}})
	reload := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/admin/reload", nil)
		req.Header.Set("Authorization", "Bearer "+admin.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// a renamed: the token's list would name a workflow that is gone.
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	write("b.yaml", "name: b\napi: {tokens: [billing]}\nsteps:\n  - id: s\n    kind: go\n    func: noop\n")
	code, body := reload()
	for _, want := range []string{`API token \"site\" names workflow \"a\", which is not registered`,
		`workflow \"b\" may be started only by API token \"billing\", which is not configured`} {
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, want) {
			t.Errorf("reload: %d %s\nwant 422 with %s", code, body, want)
		}
	}
	if got := a.Client().Workflows(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("workflows after the refused reload: %v", got)
	}
	write("a.yaml", "name: a\nsteps:\n  - id: s\n    kind: go\n    func: noop\n")
	write("b.yaml", "name: b\napi: {tokens: [ops]}\nsteps:\n  - id: s\n    kind: go\n    func: noop\n")
	if code, body := reload(); code != http.StatusOK {
		t.Fatalf("reload of fitting files: %d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// serve refuses to start when a token's list names a workflow that does not exist,
// naming the token and the workflow, never the secret.
func TestServeRefusesATokenListNamingAMissingWorkflow(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lead.yaml"), []byte("name: website-lead\nsteps:\n  - id: crm\n    kind: http\n    http: {url: \"https://crm.example/leads\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "web-secret-0123456789abcdef"
	t.Setenv("ONCEFLOW_API_TOKENS", "web:ingest:workflows=website-leads:"+secret)
	r := run(t, "serve", "--db", "sqlite://"+filepath.Join(dir, "onceflow.db"), "--workflows", dir, "--addr", "127.0.0.1:0")
	if r.code != exitError || !strings.Contains(r.stderr, `API token "web" names workflow "website-leads", which is not registered`) || strings.Contains(r.stderr, secret) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}
