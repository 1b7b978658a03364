package onceflowhttp

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// storeBundle is a server over st, serving website-lead and a stripe webhook, logging
// into log.
func storeBundle(t *testing.T, st store.Store) (*bundle, *syncBuffer) {
	t.Helper()
	b := &bundle{t: t, now: time.Now(), env: map[string]string{"HOOK_SECRET": "whsec_bmV3LXNlY3JldC0wMTIzNDU2Nzg5"}}
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	b.client = c
	funcs := map[string]onceflow.StepFunc{
		"noop": func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil },
	}
	reader := readerWith(t, funcs)
	var defs []*flowfile.Definition
	for i, y := range []string{leadYAML, fmt.Sprintf(paymentYAML, "payments", "stripe", `"{input.id}"`)} {
		d, ps := reader.Parse(fmt.Sprintf("wf%d.yaml", i), []byte(y))
		if ps != nil {
			t.Fatal(ps)
		}
		defs = append(defs, d)
	}
	wfs, err := buildWith(defs)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wfs {
		if err := c.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	log := newSyncBuffer()
	srv, err := NewHandler(c, Options{Receivers: receivers(t, defs, b.env), Logger: slog.New(slog.NewJSONHandler(log, nil)),
		Tokens: []Token{{Name: "form", Secret: ingestToken, Scopes: []Scope{ScopeIngest}}, {Name: "ops", Secret: adminToken, Scopes: []Scope{ScopeAdmin}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(checked(t, srv))
	t.Cleanup(hs.Close)
	b.url = hs.URL
	return b, log
}

// wantUnavailable checks that a is the 503 of a database that cannot be reached, with
// Retry-After.
func wantUnavailable(t *testing.T, what string, a answer) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.json["type"] != typeBase+"database-unavailable" || a.header.Get("Retry-After") != "5" {
		t.Errorf("%s: %d (Retry-After %q) %s, want 503 database-unavailable with Retry-After", what, a.status, a.header.Get("Retry-After"), a.body)
	}
}

// wantWarned checks that the log says, at warn level, that the database was unavailable,
// and has no error line.
func wantWarned(t *testing.T, log *syncBuffer) {
	t.Helper()
	out := log.String()
	if !strings.Contains(out, `"level":"WARN","msg":"database unavailable; answered 503"`) || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("log:\n%s\nwant warn lines saying the database is unavailable and no error line", out)
	}
}

// While another process holds the SQLite file's lock past the busy timeout, starts and
// webhook deliveries answer 503 with Retry-After, logged at warn level, not 500; nothing
// is acknowledged, and both succeed once the lock is gone.
func TestLockedDatabaseIsA503(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, log := storeBundle(t, st)
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	start := func() answer {
		return b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-1"}, `{"submission_id": 1}`)
	}
	event := `{"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"metadata": {"order_id": "1"}}}}`
	deliver := func() answer {
		h, err := signature.Sign(signature.Config{Scheme: signature.Stripe, Secrets: []string{b.env["HOOK_SECRET"]}}, 0, "", time.Now(), []byte(event))
		if err != nil {
			t.Fatal(err)
		}
		return b.do("POST", "/hooks/payments", "", map[string]string{"Stripe-Signature": h.Get("Stripe-Signature")}, event)
	}
	wantUnavailable(t, "start", start())
	wantUnavailable(t, "webhook", deliver())
	wantWarned(t, log)
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, start(), http.StatusCreated, "")
	wantStatus(t, deliver(), http.StatusOK, "")
}

// cutProxy forwards connections to a database until cut, after which the port refuses
// connections: the database cannot be reached.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, s); c.Close() })
		}
	})
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

// cut closes the listener and every connection.
func (p *cutProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// While PostgreSQL cannot be reached, every route that reads or writes answers 503 with
// Retry-After, logged at warn level — starts, webhook deliveries, lists, review actions.
func TestUnreachablePostgresIsA503(t *testing.T) {
	raw, schema := testsvc.PostgresSchema(t, "onceflow_http_")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := postgres.Open(context.Background(), u.String(), postgres.Options{Schema: schema, RetryFor: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, log := storeBundle(t, st)
	created := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-1"}, `{"submission_id": 1}`)
	wantStatus(t, created, http.StatusCreated, "")
	proxy.cut()
	wantUnavailable(t, "start", b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-2"}, `{"submission_id": 2}`))
	event := `{"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"metadata": {"order_id": "1"}}}}`
	h, err := signature.Sign(signature.Config{Scheme: signature.Stripe, Secrets: []string{b.env["HOOK_SECRET"]}}, 0, "", time.Now(), []byte(event))
	if err != nil {
		t.Fatal(err)
	}
	wantUnavailable(t, "webhook", b.do("POST", "/hooks/payments", "", map[string]string{"Stripe-Signature": h.Get("Stripe-Signature")}, event))
	for _, path := range []string{"/v1/runs", "/v1/runs/1", "/v1/review", "/v1/audit", "/v1/pauses", "/v1/keys/website-lead.crm:form-1"} {
		wantUnavailable(t, "GET "+path, b.do("GET", path, adminToken, nil, ""))
	}
	wantUnavailable(t, "cancel", b.do("POST", "/v1/runs/1/cancel", adminToken, nil, ""))
	wantUnavailable(t, "pause", b.do("POST", "/v1/workflows/website-lead/pause", adminToken, nil, ""))
	wantWarned(t, log)
}
