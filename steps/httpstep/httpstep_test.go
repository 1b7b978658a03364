package httpstep

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/store/sqlite"
)

var loopback = &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

func env(vars map[string]string) Env {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func stepCtx(prev onceflow.ErrorClass) *onceflow.StepContext {
	return &onceflow.StepContext{
		RunID: 7, RunKey: "form-8812", Workflow: "website-lead", Step: "crm", EffectKey: "lead-create:8812", Attempt: 1,
		PreviousOutcome: prev,
		Input:           json.RawMessage(`{"submission_id": 8812, "amount": 19.90, "email": "ana@example.com", "tags": ["a"]}`),
		Outputs:         map[string]json.RawMessage{},
	}
}

// recorder is a destination that records requests and answers with the next response.
type recorder struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	answer   func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*recorder, *httptest.Server) {
	rec := &recorder{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.requests = append(rec.requests, r)
		rec.bodies = append(rec.bodies, string(b))
		rec.mu.Unlock()
		rec.answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return rec, srv
}

func newStep(t *testing.T, spec Spec, vars map[string]string) *Step {
	t.Helper()
	s, err := New(spec, loopback.Client(5*time.Second), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuccessSendsTemplatedRequestWithKey(t *testing.T) {
	rec, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		io.WriteString(w, `{"id": "lead_77", "api_token": "tok_live_abcdef"}`)
	})
	s := newStep(t, Spec{Request: Request{
		URL:     srv.URL + "/leads?sub={input.submission_id}",
		Headers: map[string]string{"Authorization": "Bearer {env.CRM_TOKEN}"},
		Body:    map[string]any{"email": "{input.email}", "amount": "{input.amount}", "ref": "sub-{input.submission_id}", "tags": "{input.tags}", "fixed": 3},
	}}, map[string]string{"CRM_TOKEN": "s3cr3t-token"})
	sc := stepCtx("")
	out, err := s.Do(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if string(out.(json.RawMessage)) != `{"id": "lead_77", "api_token": "tok_live_abcdef"}` {
		t.Fatalf("output %s", out)
	}
	r := rec.requests[0]
	if r.Method != "POST" || r.URL.RawQuery != "sub=8812" || r.Header.Get("Idempotency-Key") != "lead-create:8812" ||
		r.Header.Get("Authorization") != "Bearer s3cr3t-token" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %s headers %v", r.Method, r.URL, r.Header)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(rec.bodies[0]), &body); err != nil {
		t.Fatal(err)
	}
	if body["email"] != "ana@example.com" || body["amount"] != 19.9 || body["ref"] != "sub-8812" || body["fixed"] != 3.0 {
		t.Fatalf("body %v", body)
	}
	if tags, ok := body["tags"].([]any); !ok || len(tags) != 1 {
		t.Fatalf("a list field must stay a list: %v", body["tags"])
	}
}

func TestClassification(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		rules      []Rule
		class      onceflow.ErrorClass // "" for success
		retryAfter time.Duration
	}{
		{"201", 201, nil, nil, "", 0},
		{"503 Retry-After seconds", 503, map[string]string{"Retry-After": "7"}, nil, onceflow.Retryable, 7 * time.Second},
		{"429", 429, nil, nil, onceflow.Retryable, 0},
		{"408", 408, nil, nil, onceflow.Retryable, 0},
		{"425", 425, nil, nil, onceflow.Retryable, 0},
		{"500", 500, nil, nil, onceflow.Retryable, 0},
		{"422", 422, nil, nil, onceflow.Permanent, 0},
		{"404", 404, nil, nil, onceflow.Permanent, 0},
		{"302 not followed", 302, map[string]string{"Location": "/elsewhere"}, nil, onceflow.Permanent, 0},
		{"409 declared success", 409, nil, []Rule{{Status: "409", Class: "success"}}, "", 0},
		{"5xx declared permanent", 501, nil, []Rule{{Status: "500-501", Class: "permanent"}}, onceflow.Permanent, 0},
		{"4xx declared unknown", 499, nil, []Rule{{Status: "4xx", Class: "unknown"}}, onceflow.Unknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, `{"error": "x"}`)
			})
			s := newStep(t, Spec{Request: Request{URL: srv.URL}, Classify: tt.rules}, nil)
			sc := stepCtx("")
			_, err := s.Do(context.Background(), sc)
			if tt.class == "" {
				if err != nil {
					t.Fatalf("error %v, want success", err)
				}
				return
			}
			var se *onceflow.StepError
			if !errors.As(err, &se) || se.Class != tt.class || se.RetryAfter != tt.retryAfter || se.ResponseStatus != tt.status {
				t.Fatalf("error %#v, want class %s retry-after %v status %d", err, tt.class, tt.retryAfter, tt.status)
			}
		})
	}
}

func TestRetryAfterDate(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	if got := retryAfter(now.Add(90*time.Second).Format(http.TimeFormat), now); got != 90*time.Second {
		t.Fatalf("Retry-After date: %v", got)
	}
	if got := retryAfter("soon", now); got != 0 {
		t.Fatalf("garbage Retry-After: %v", got)
	}
}

func TestNetworkErrors(t *testing.T) {
	// Nothing listens: the request was never sent, so a retry is safe.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newStep(t, Spec{Request: Request{URL: "http://" + addr + "/leads"}}, nil)
	_, err = s.Do(context.Background(), stepCtx(""))
	if onceflow.ClassOf(err) != onceflow.Retryable {
		t.Fatalf("connection refused: %v, want retryable", err)
	}

	// The destination reads the request, then drops the connection: outcome unknown.
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	s = newStep(t, Spec{Request: Request{URL: srv.URL}}, nil)
	if _, err := s.Do(context.Background(), stepCtx("")); onceflow.ClassOf(err) != onceflow.Unknown {
		t.Fatalf("dropped after sending: %v, want unknown", err)
	}

	// The destination is too slow: the request went out, so the outcome is unknown.
	release := make(chan struct{})
	_, slow := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	s = newStep(t, Spec{Request: Request{URL: slow.URL}, Timeout: 50 * time.Millisecond}, nil)
	if _, err := s.Do(context.Background(), stepCtx("")); onceflow.ClassOf(err) != onceflow.Unknown {
		t.Fatalf("timeout after sending: %v, want unknown", err)
	}
}

func TestBlockedDestination(t *testing.T) {
	s, err := New(Spec{Request: Request{URL: "http://169.254.169.254/latest/meta-data/"}}, (&egress.Policy{}).Client(time.Second), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Do(context.Background(), stepCtx(""))
	var se *onceflow.StepError
	if !errors.As(err, &se) || se.Class != onceflow.Permanent || se.Reason != ReasonDestinationBlocked {
		t.Fatalf("error %v, want permanent destination_blocked", err)
	}
}

func TestVerifyAfterUnknownOutcome(t *testing.T) {
	var created atomic.Bool
	rec, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && created.Load():
			io.WriteString(w, `{"id": "lead_77", "found": true}`)
		case r.Method == "GET":
			w.WriteHeader(404)
		default:
			created.Store(true)
			w.WriteHeader(201)
			io.WriteString(w, `{"id": "lead_77"}`)
		}
	})
	spec := Spec{
		Request: Request{URL: srv.URL + "/leads", Body: map[string]any{"external_id": "{input.submission_id}"}},
		Verify:  &Request{Method: "GET", URL: srv.URL + "/leads/by-external-id/{input.submission_id}"},
	}
	s := newStep(t, spec, nil)

	// First attempt: no verify.
	if _, err := s.Do(context.Background(), stepCtx("")); err != nil {
		t.Fatal(err)
	}
	// After an unknown outcome, the lead exists: the step completes from the lookup.
	sc := stepCtx(onceflow.Unknown)
	out, err := s.Do(context.Background(), sc)
	if err != nil || !strings.Contains(string(out.(json.RawMessage)), `"found": true`) {
		t.Fatalf("verify: %s %v", out, err)
	}
	methods := []string{}
	for _, r := range rec.requests {
		methods = append(methods, r.Method+" "+r.URL.Path)
	}
	if strings.Join(methods, ",") != "POST /leads,GET /leads/by-external-id/8812" {
		t.Fatalf("requests %v", methods)
	}
	// Not there: act again.
	created.Store(false)
	if _, err := s.Do(context.Background(), stepCtx(onceflow.Unknown)); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.requests); n != 4 || rec.requests[3].Method != "POST" {
		t.Fatalf("after a 404 verify the step must act: %d requests", n)
	}
}

func TestTemplateProblemsArePermanentAndNameTheField(t *testing.T) {
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	s := newStep(t, Spec{Request: Request{URL: srv.URL, Body: map[string]any{"phone": "{input.phone}"}}}, nil)
	_, err := s.Do(context.Background(), stepCtx(""))
	if onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "input.phone is missing") {
		t.Fatalf("missing field: %v", err)
	}
	s = newStep(t, Spec{Request: Request{URL: srv.URL, Headers: map[string]string{"Authorization": "{env.NOPE}"}}}, nil)
	_, err = s.Do(context.Background(), stepCtx(""))
	if onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "NOPE is not set") {
		t.Fatalf("missing env: %v", err)
	}
}

func TestExcerptIsRedactedAndCapped(t *testing.T) {
	secret := "s3cr3t-token-value"
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(422)
		io.WriteString(w, `{"error": "bad", "echo": "Bearer `+secret+`", "password": "hunter2", "detail": "`+strings.Repeat("x", 3000)+`"}`)
	})
	s := newStep(t, Spec{Request: Request{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer {env.TOKEN}"}}, ExcerptBytes: 200},
		map[string]string{"TOKEN": secret})
	_, err := s.Do(context.Background(), stepCtx(""))
	var se *onceflow.StepError
	if !errors.As(err, &se) {
		t.Fatal(err)
	}
	if strings.Contains(se.ResponseExcerpt, secret) || strings.Contains(se.ResponseExcerpt, "hunter2") || strings.Contains(err.Error(), secret) {
		t.Fatalf("secret leaked: %q / %v", se.ResponseExcerpt, err)
	}
	if len(se.ResponseExcerpt) > 200+len("…") {
		t.Fatalf("excerpt is %d bytes", len(se.ResponseExcerpt))
	}
}

func TestNewRejectsBadSpecs(t *testing.T) {
	for name, spec := range map[string]Spec{
		"no url":        {},
		"bad method":    {Request: Request{Method: "BREW", URL: "http://x"}},
		"bad template":  {Request: Request{URL: "http://x/{input.a"}},
		"unknown root":  {Request: Request{URL: "http://x/{secrets.a}"}},
		"bad rule":      {Request: Request{URL: "http://x"}, Classify: []Rule{{Status: "6xx", Class: "success"}}},
		"bad class":     {Request: Request{URL: "http://x"}, Classify: []Rule{{Status: "409", Class: "fine"}}},
		"bad env field": {Request: Request{URL: "http://x/{env.A.B}"}},
	} {
		if _, err := New(spec, http.DefaultClient, env(nil)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// manualEngine is a client on a new SQLite store whose clock moves only when work moves it.
type manualEngine struct {
	st  *sqlite.Store
	c   *onceflow.Client
	now atomic.Int64
}

// newManualEngine returns an engine with w registered, its clock at 2026-03-01 09:00 UTC.
func newManualEngine(t *testing.T, w onceflow.Workflow) *manualEngine {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &manualEngine{st: st}
	e.now.Store(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	if e.c, err = onceflow.New(onceflow.Config{Store: st, Clock: func() time.Time { return time.Unix(0, e.now.Load()).UTC() }, ClockSync: -1}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Register(w); err != nil {
		t.Fatal(err)
	}
	return e
}

// work runs n passes of the engine, its clock an hour later after each.
func (e *manualEngine) work(t *testing.T, n int) {
	t.Helper()
	for range n {
		if _, err := e.c.Work(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.now.Add(int64(time.Hour))
	}
}

// A step without an HTTP client is refused when it is compiled, not found out when it
// runs.
func TestNewNeedsAClient(t *testing.T) {
	_, err := New(Spec{Request: Request{URL: "http://x"}}, nil, env(nil))
	if err == nil || !strings.Contains(err.Error(), "needs an HTTP client") {
		t.Fatalf("New without a client = %v, want it refused", err)
	}
}
