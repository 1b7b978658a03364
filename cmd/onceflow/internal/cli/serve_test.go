package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/internal/smtptest"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

func TestValidate(t *testing.T) {
	r := runOK(t, "validate", "../../../../examples/website-lead.yaml", "../../../../examples/payment-webhook.yaml")
	if !strings.Contains(r.stdout, `workflow "website-lead" is valid (4 steps)`) || !strings.Contains(r.stdout, `workflow "payment-succeeded" is valid`) {
		t.Fatalf("stdout %s", r.stdout)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nsteps:\n  - id: a\n    kind: ftp\n  - id: b\n    kind: go\n    func: f\n    needs: [zz]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, "validate", bad)
	if r.code != exitError || !strings.Contains(r.stdout, bad+":4:11: step \"a\": kind \"ftp\"") || !strings.Contains(r.stdout, bad+":8:12: step \"b\": needs \"zz\"") ||
		!strings.Contains(r.stderr, "2 problem(s) in 1 file(s)") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "validate"); r.code != exitUsage {
		t.Fatalf("validate without files: exit %d", r.code)
	}
}

// fakeServices stands in for the CRM, WhatsApp, stock and invoicing services of the
// examples, counting requests per idempotency key.
type fakeServices struct {
	*httptest.Server
	mu   sync.Mutex
	keys map[string]int // path + " " + Idempotency-Key → requests
}

func newFakeServices(t *testing.T) *fakeServices {
	f := &fakeServices{keys: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.keys[r.URL.Path+" "+r.Header.Get("Idempotency-Key")]++
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id": "obj_1", "number": "INV-1"}`)
	}))
	t.Cleanup(f.Close)
	return f
}

// The two examples run end to end behind the real API and webhook endpoint: a form posted
// twice makes one lead; a payment webhook delivered twice marks the order paid and
// invoices it once.
func TestServeExamples(t *testing.T) {
	svc := newFakeServices(t)
	smtp := smtptest.New(t)
	const secret = "whsec_dGVzdC1zZWNyZXQtMDEyMzQ1Njc4OQ=="
	env := map[string]string{
		"CRM_URL": svc.URL, "CRM_TOKEN": "crm-token", "WHATSAPP_URL": svc.URL, "WHATSAPP_TOKEN": "wa-token",
		"STOCK_URL": svc.URL, "INVOICING_URL": svc.URL, "INVOICING_TOKEN": "inv-token",
		"PAYMENTS_WEBHOOK_SECRET": secret, "ONCEFLOW_SMTP_ADDR": smtp.Addr, "ONCEFLOW_SMTP_TLS": "none",
		// order-events.yaml: connections are made on first use, which this test never makes.
		"SHOP_DB": "postgres://shop@127.0.0.1:1/shop", "ONCEFLOW_NATS_URL": "nats://127.0.0.1:1",
		// monthly-invoices.yaml: its schedule fires on the first of the month only.
		"BILLING_URL": svc.URL, "BILLING_TOKEN": "billing-token",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openSQLite(t, filepath.Join(t.TempDir(), "onceflow.db"))
	defer st.Close()
	token := onceflowhttp.Token{Name: "test", Secret: "admin-secret-0123456789", Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}
	_, base, done := startServer(t, ctx, server.Config{Store: st, Workflows: []string{"../../../../examples"}, AllowNet: loopback,
		Engine: onceflow.Config{Workers: 4, PollInterval: 10 * time.Millisecond}, API: &server.APIConfig{Tokens: []onceflowhttp.Token{token}}})

	post := func(path string, header map[string]string, body string) int {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	form := `{"submission_id": "8812", "name": "Ana", "email": "ana@example.com", "phone": "+351900000000"}`
	auth := map[string]string{"Authorization": "Bearer " + token.Secret}
	for range 2 {
		if code := post("/v1/workflows/website-lead/runs", auth, form); code != http.StatusCreated {
			t.Fatalf("form post: %d", code)
		}
	}
	event := `{"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"id": "pi_1", "amount": 1990, "currency": "eur",
		"receipt_email": "ana@example.com", "metadata": {"order_id": "1001"}}}}`
	h, err := signature.Sign(signature.Config{Scheme: signature.Stripe, Secrets: []string{secret}}, 0, "", time.Now(), []byte(event))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code := post("/hooks/payments", map[string]string{"Stripe-Signature": h.Get("Stripe-Signature")}, event); code != http.StatusOK {
			t.Fatalf("webhook: %d", code)
		}
	}

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		runs, err := st.RunList(ctx, store.RunListParams{State: store.StateCompleted})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 2 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			all, _ := st.RunList(ctx, store.RunListParams{})
			b, _ := json.Marshal(all)
			t.Fatalf("runs did not complete: %s", b)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	svc.mu.Lock()
	defer svc.mu.Unlock()
	for key, n := range map[string]int{
		"/leads lead-create:8812": 1, "/messages whatsapp-notice:8812": 1, "/tasks sales-task:8812": 1,
		"/reservations stock-reserve:pi_1": 1, "/invoices invoice-create:pi_1": 1,
	} {
		if svc.keys[key] != n {
			t.Errorf("%s: %d requests, want %d (all: %v)", key, svc.keys[key], n, svc.keys)
		}
	}
	if got := smtp.Count(); got != 2 {
		t.Errorf("%d e-mails sent, want 2 (welcome and receipt)", got)
	}
	order, err := st.EntityGetByKey(context.Background(), "order:1001")
	if err != nil || order.State != "paid" {
		t.Fatalf("order: %+v %v", order, err)
	}
}

// worker executes the steps of runs started elsewhere, until it is stopped.
func TestWorkerCommand(t *testing.T) {
	svc := newFakeServices(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ping.yaml"), []byte(`name: ping
steps:
  - id: ping
    kind: http
    effect_key: "ping:{input.id}"
    http: {url: "`+svc.URL+`/ping"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "onceflow.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openSQLite(t, path)
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "ping", Steps: []onceflow.Step{{ID: "ping", Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}); err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(ctx, "ping", "p-1", map[string]any{"id": 1})
	if err != nil {
		t.Fatal(err)
	}
	exit := make(chan result, 1)
	go func() {
		var out, errOut strings.Builder
		code := execute(ctx, []string{"worker", "--workflows", dir, "--allow-net", "127.0.0.1/32", "--db", "sqlite://" + path, "--log-level", "error"}, &out, &errOut, apiMiddleware)
		exit <- result{stdout: out.String(), stderr: errOut.String(), code: code}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		r, err := st.RunGetByID(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == store.StateCompleted {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("run %s after 30 s", r.State)
		case r := <-exit:
			t.Fatalf("worker exited early: %d %s", r.code, r.stderr)
		}
	}
	cancel()
	if r := <-exit; r.code != exitOK {
		t.Fatalf("worker: exit %d %s", r.code, r.stderr)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.keys["/ping ping:1"] != 1 {
		t.Fatalf("requests %v", svc.keys)
	}
}

// startServer builds the server of cfg (its API on a loopback port, checked against the
// OpenAPI document), runs it until ctx ends and returns it, the API's base URL and what
// Run returned.
func startServer(t *testing.T, ctx context.Context, cfg server.Config) (*server.Server, string, <-chan error) {
	t.Helper()
	if cfg.API == nil {
		cfg.API = &server.APIConfig{}
	}
	cfg.API.Addr = "127.0.0.1:0"
	cfg.Middleware = apiMiddleware
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	return srv, "http://" + srv.Addr("api").String(), done
}

// loopback opens the loopback range to steps, as --allow-net 127.0.0.1/32 does.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
