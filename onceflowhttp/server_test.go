package onceflowhttp

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
)

const (
	ingestToken = "ingest-token-0123456789"
	readToken   = "read-token-0123456789ab"
	adminToken  = "admin-token-0123456789"
)

const leadYAML = `name: website-lead
run_key: "{input.submission_id}"
entity: "lead:{input.submission_id}"
input:
  required: [submission_id]
steps:
  - id: crm
    kind: go
    func: noop
`

const paymentYAML = `name: payment
entity: "order:{input.data.object.metadata.order_id}"
webhook:
  name: %s
  scheme: %s
  secret_env: [HOOK_SECRET, HOOK_SECRET_OLD]
  event_id: %s
  event_types: [payment_intent.succeeded]
  header: X-Signature
  prefix: "sha256="
steps:
  - id: mark_paid
    kind: go
    func: noop
`

type bundle struct {
	t      *testing.T
	url    string
	path   string
	store  *sqlite.Store
	client *onceflow.Client
	now    time.Time
	env    map[string]string
}

func setup(t *testing.T, yamls ...string) *bundle {
	t.Helper()
	return setupWith(t, nil, yamls...)
}

// setupWith is setup with tune applied to the server's Config before it is built.
func setupWith(t *testing.T, tune func(*Options), yamls ...string) *bundle {
	t.Helper()
	return setupEnv(t, map[string]string{"HOOK_SECRET": "whsec_bmV3LXNlY3JldC0wMTIzNDU2Nzg5", "HOOK_SECRET_OLD": "whsec_b2xkLXNlY3JldC0wMTIzNDU2Nzg5"}, tune, yamls...)
}

// receivers are the webhook receivers of defs, their secrets read from env.
func receivers(t *testing.T, defs []*flowfile.Definition, env map[string]string) []triggers.Receiver {
	t.Helper()
	ts, err := flowfile.Triggers(defs, flowfile.TriggerOptions{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	return triggers.Receivers(ts)
}

// setupEnv is setupWith with the environment the webhook receivers read their secrets
// from.
func setupEnv(t *testing.T, env map[string]string, tune func(*Options), yamls ...string) *bundle {
	t.Helper()
	ctx := context.Background()
	b := &bundle{t: t, path: filepath.Join(t.TempDir(), "onceflow.db"), now: time.Unix(1700000000, 0), env: env}
	st, err := sqlite.Open(ctx, b.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b.store = st
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
	for i, y := range append([]string{leadYAML}, yamls...) {
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
	if err := flowfile.RegisterSchedules(c, defs, flowfile.NewBuilder(flowfile.BuildOptions{})); err != nil {
		t.Fatal(err)
	}
	opts := Options{Receivers: receivers(t, defs, b.env), MaxBody: 4096,
		Tokens: []Token{{Name: "form", Secret: ingestToken, Scopes: []Scope{ScopeIngest}}, {Name: "ops", Secret: adminToken, Scopes: []Scope{ScopeAdmin}}, {Name: "viewer", Secret: readToken, Scopes: []Scope{ScopeRead}}},
		Now:    func() time.Time { return b.now },
	}
	if tune != nil {
		tune(&opts)
	}
	srv, err := NewHandler(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(checked(t, srv))
	t.Cleanup(hs.Close)
	b.url = hs.URL
	return b
}

type answer struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func (b *bundle) do(method, path, token string, header map[string]string, body string) answer {
	b.t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	_ = json.Unmarshal(raw, &a.json)
	return a
}

func (b *bundle) runs() []*store.Run {
	b.t.Helper()
	runs, err := b.store.RunList(context.Background(), store.RunListParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	return runs
}

func wantStatus(t *testing.T, a answer, status int, problemType string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	if problemType != "" {
		if a.header.Get("Content-Type") != "application/problem+json" || a.json["type"] != typeBase+problemType || a.json["status"] != float64(status) {
			t.Fatalf("problem %s (%s), want type %s", a.body, a.header.Get("Content-Type"), problemType)
		}
	}
}

func TestStartRunIdempotency(t *testing.T) {
	b := setup(t)
	key := map[string]string{"Idempotency-Key": "form-8812"}
	first := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, key, `{"submission_id": 8812, "email": "a@example.com"}`)
	wantStatus(t, first, http.StatusCreated, "")
	if first.header.Get("Idempotent-Replayed") != "" || first.header.Get("Location") == "" {
		t.Fatalf("first answer headers %v", first.header)
	}

	// The same key and body: the first answer again, marked as a replay.
	again := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, key, `{"email": "a@example.com", "submission_id": 8812}`)
	wantStatus(t, again, http.StatusCreated, "")
	if again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %q (%v), want %q with Idempotent-Replayed", again.body, again.header, first.body)
	}

	// The same key, another body.
	other := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, key, `{"submission_id": 8812, "email": "b@example.com"}`)
	wantStatus(t, other, http.StatusUnprocessableEntity, "idempotency-key-reused")

	// No header: the run_key template derives the key from the body.
	derived := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, `{"submission_id": 9000}`)
	wantStatus(t, derived, http.StatusCreated, "")
	if derived.json["run_key"] != "9000" {
		t.Fatalf("derived run key %v", derived.json["run_key"])
	}
	if n := len(b.runs()); n != 2 {
		t.Fatalf("%d runs stored, want 2", n)
	}
}

func TestStartRunBadRequests(t *testing.T) {
	b := setup(t)
	path := "/v1/workflows/website-lead/runs"
	tests := []struct {
		name    string
		path    string
		token   string
		header  map[string]string
		body    string
		status  int
		problem string
	}{
		{"no key and no field to derive it", path, ingestToken, nil, `{"email": "a@example.com"}`, 400, "idempotency-key-missing"},
		{"control character in key", path, ingestToken, map[string]string{"Idempotency-Key": "a\tb"}, `{"submission_id": 1}`, 400, "invalid-idempotency-key"},
		{"malformed JSON", path, ingestToken, map[string]string{"Idempotency-Key": "k"}, `{"submission_id": `, 400, "malformed-json"},
		{"not an object", path, ingestToken, map[string]string{"Idempotency-Key": "k"}, `[1]`, 422, "invalid-input"},
		{"missing required field", path, ingestToken, map[string]string{"Idempotency-Key": "k"}, `{"x": 1}`, 422, "invalid-input"},
		{"unknown workflow", "/v1/workflows/nope/runs", ingestToken, map[string]string{"Idempotency-Key": "k"}, `{}`, 404, "workflow-not-found"},
		{"body too large", path, ingestToken, map[string]string{"Idempotency-Key": "k"}, `{"pad": "` + strings.Repeat("x", 5000) + `"}`, 413, "body-too-large"},
		{"no token", path, "", map[string]string{"Idempotency-Key": "k"}, `{}`, 401, "unauthorized"},
		{"wrong token", path, "not-a-known-token-at-all", map[string]string{"Idempotency-Key": "k"}, `{}`, 401, "unauthorized"},
		{"ingest token reading runs", "/v1/runs", ingestToken, nil, "", 403, "forbidden"},
		{"unknown route", "/v2/nothing", adminToken, nil, "", 404, "not-found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.body == "" {
				method = "GET"
			}
			wantStatus(t, b.do(method, tt.path, tt.token, tt.header, tt.body), tt.status, tt.problem)
		})
	}
	if n := len(b.runs()); n != 0 {
		t.Fatalf("%d runs stored by refused requests", n)
	}
}

// A second request with the key of one still being stored is answered 409 at once.
func TestStartRunInFlightConflict(t *testing.T) {
	b := setup(t)
	// Hold the database's write lock, so the first request stays in flight.
	db, err := sql.Open("sqlite", b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			answers <- b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-1"}, `{"submission_id": 1}`)
		}()
	}
	// The first answer is the refused duplicate: the other request waits for the lock.
	first := <-answers
	wantStatus(t, first, http.StatusConflict, "idempotency-key-in-use")
	if first.header.Get("Retry-After") != "1" {
		t.Fatalf("409 without Retry-After: %v", first.header)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, <-answers, http.StatusCreated, "")
}

func TestReadRuns(t *testing.T) {
	b := setup(t)
	created := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-7"}, `{"submission_id": 7}`)
	wantStatus(t, created, http.StatusCreated, "")
	if _, err := b.client.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := b.do("GET", created.json["links"].(map[string]any)["self"].(string), adminToken, nil, "")
	wantStatus(t, got, http.StatusOK, "")
	steps := got.json["steps"].([]any)
	step := steps[0].(map[string]any)
	if got.json["state"] != "completed" || step["effect_key"] != "website-lead.crm:form-7" || step["state"] != "completed" {
		t.Fatalf("run view %s", got.body)
	}
	if tries := step["attempt_log"].([]any); len(tries) != 1 || tries[0].(map[string]any)["outcome"] != "success" {
		t.Fatalf("attempts %v", step["attempt_log"])
	}
	list := b.do("GET", "/v1/runs?workflow=website-lead&state=completed&entity=lead:7", adminToken, nil, "")
	wantStatus(t, list, http.StatusOK, "")
	if runs := list.json["runs"].([]any); len(runs) != 1 {
		t.Fatalf("list %s", list.body)
	}
	wantStatus(t, b.do("GET", "/v1/runs?state=done", adminToken, nil, ""), 400, "invalid-state")
	wantStatus(t, b.do("GET", "/v1/runs/999", adminToken, nil, ""), 404, "run-not-found")
	wantStatus(t, b.do("GET", "/v1/runs/abc", adminToken, nil, ""), 400, "invalid-id")
	wantStatus(t, b.do("GET", "/healthz", "", nil, ""), 200, "")
	wantStatus(t, b.do("GET", "/readyz", "", nil, ""), 200, "")
}

func TestWebhooks(t *testing.T) {
	schemes := []struct {
		scheme  string
		eventID string
	}{
		{"stripe", `"{input.id}"`},
		{"standard-webhooks", `""`},
		{"github", `"{input.id}"`},
		{"hmac", `"{input.id}"`},
	}
	for _, sc := range schemes {
		t.Run(sc.scheme, func(t *testing.T) {
			b := setup(t, fmt.Sprintf(paymentYAML, "payments", sc.scheme, sc.eventID))
			scheme, err := signature.ParseScheme(sc.scheme)
			if err != nil {
				t.Fatal(err)
			}
			cfg := signature.Config{Scheme: scheme, Secrets: []string{b.env["HOOK_SECRET"], b.env["HOOK_SECRET_OLD"], "whsec_cmVtb3ZlZC1zZWNyZXQtMDEyMzQ1Njc4OQ=="}}
			if scheme == signature.HMAC {
				cfg.Header, cfg.Prefix = "X-Signature", "sha256="
			}
			deliver := func(secret int, id string, at time.Time, body string, mutate func(http.Header)) answer {
				h, err := signature.Sign(cfg, secret, id, at, []byte(body))
				if err != nil {
					t.Fatal(err)
				}
				if mutate != nil {
					mutate(h)
				}
				hdr := map[string]string{}
				for k := range h {
					hdr[k] = h.Get(k)
				}
				return b.do("POST", "/hooks/payments", "", hdr, body)
			}
			event := `{"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"metadata": {"order_id": "1001"}}}}`

			first := deliver(0, "evt_1", b.now, event, nil)
			wantStatus(t, first, http.StatusOK, "")
			if first.json["duplicate"] != false {
				t.Fatalf("first delivery %s", first.body)
			}
			again := deliver(0, "evt_1", b.now, event, nil)
			wantStatus(t, again, http.StatusOK, "")
			if again.json["duplicate"] != true || again.json["run_id"] != first.json["run_id"] {
				t.Fatalf("repeated delivery %s", again.body)
			}
			rotated := deliver(1, "evt_1", b.now, event, nil)
			wantStatus(t, rotated, http.StatusOK, "")

			wantStatus(t, deliver(2, "evt_2", b.now, event, nil), http.StatusUnauthorized, "signature-invalid")
			wantStatus(t, deliver(0, "evt_1", b.now, event, func(h http.Header) {
				for k := range h {
					if k != "Webhook-Id" && k != "X-Github-Delivery" && k != "Webhook-Timestamp" {
						h.Del(k)
					}
				}
			}), http.StatusBadRequest, "signature-missing")
			tampered := strings.Replace(event, "1001", "1002", 1)
			h, _ := signature.Sign(cfg, 0, "evt_1", b.now, []byte(event))
			hdr := map[string]string{}
			for k := range h {
				hdr[k] = h.Get(k)
			}
			wantStatus(t, b.do("POST", "/hooks/payments", "", hdr, tampered), http.StatusUnauthorized, "signature-invalid")
			if scheme == signature.Stripe || scheme == signature.StandardWebhooks {
				wantStatus(t, deliver(0, "evt_3", b.now.Add(-10*time.Minute), event, nil), http.StatusUnauthorized, "signature-invalid")
			}
			// Too large: refused before anything is parsed or verified.
			big := `{"id": "evt_9", "pad": "` + strings.Repeat("x", 5000) + `"}`
			wantStatus(t, deliver(0, "evt_9", b.now, big, nil), http.StatusRequestEntityTooLarge, "body-too-large")
			// Another event type: acknowledged, nothing started.
			ignored := deliver(0, "evt_4", b.now, `{"id": "evt_4", "type": "charge.refunded"}`, nil)
			wantStatus(t, ignored, http.StatusOK, "")
			if ignored.json["status"] != "ignored" {
				t.Fatalf("other event type %s", ignored.body)
			}
			if runs := b.runs(); len(runs) != 1 || runs[0].Entity != "order:1001" {
				t.Fatalf("runs %+v, want one for order:1001", runs)
			}
		})
	}
}

func TestWebhookWithoutSecretIsRefused(t *testing.T) {
	b := setupEnv(t, map[string]string{}, nil, fmt.Sprintf(paymentYAML, "payments", "stripe", `"{input.id}"`))
	a := b.do("POST", "/hooks/payments", "", map[string]string{"Stripe-Signature": "t=1,v1=00"}, `{"id": "evt_1"}`)
	wantStatus(t, a, http.StatusInternalServerError, "webhook-misconfigured")
	if strings.Contains(a.body, "HOOK_SECRET") {
		t.Fatalf("the answer names the receiver's configuration: %s", a.body)
	}
	wantStatus(t, b.do("POST", "/hooks/nope", "", nil, `{}`), http.StatusNotFound, "webhook-not-found")
}

func TestParseTokens(t *testing.T) {
	toks, err := ParseTokens("form:ingest:0123456789abcdef, ops:ingest+admin:fedcba9876543210")
	if err != nil || len(toks) != 2 || toks[1].Scopes[1] != ScopeAdmin {
		t.Fatalf("%+v %v", toks, err)
	}
	if toks, err := ParseTokens("viewer:read:0123456789abcdef"); err != nil || toks[0].Scopes[0] != ScopeRead {
		t.Fatalf("read scope: %+v %v", toks, err)
	}
	for _, bad := range []string{"form:ingest", "form:write:0123456789abcdef", "form:ingest:short"} {
		_, err := ParseTokens(bad)
		if err == nil || bytes.Contains([]byte(err.Error()), []byte("0123456789abcdef")) {
			t.Errorf("ParseTokens(%q) = %v", bad, err)
		}
	}
}

// A read token sees runs, the review queue, the audit trail and effect keys, and acts on
// nothing; an ingest token starts runs and sees none of them.
func TestReadScope(t *testing.T) {
	b := setup(t)
	created := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-r1"}, `{"submission_id": 71}`)
	wantStatus(t, created, http.StatusCreated, "")
	for _, path := range []string{"/v1/runs", "/v1/runs/1", "/v1/review", "/v1/audit?run=1", "/v1/keys/website-lead.crm:form-r1"} {
		if a := b.do("GET", path, readToken, nil, ""); a.status != http.StatusOK && a.status != http.StatusNotFound {
			t.Errorf("read token, GET %s: %d %s", path, a.status, a.body)
		}
		wantStatus(t, b.do("GET", path, ingestToken, nil, ""), http.StatusForbidden, "forbidden")
	}
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", readToken, map[string]string{"Idempotency-Key": "form-r2"}, `{"submission_id": 72}`), http.StatusForbidden, "forbidden")
	wantStatus(t, b.do("POST", "/v1/review/1/crm/retry", readToken, nil, `{"note": "x"}`), http.StatusForbidden, "forbidden")
	wantStatus(t, b.do("POST", "/v1/runs/1/replay?dry_run=true", readToken, nil, `{"note": "x", "merge_patch": {}}`), http.StatusForbidden, "forbidden")
}
