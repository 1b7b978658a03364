package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

// Canary values: none of them may appear in a log line, an audit event, an attempt record,
// an API answer, a problem document or the metrics, although every one of them is sent
// through onceflow (the personal data is stored in the runs' input, intact).
const (
	canaryEmail = "canary.pii.7c1@example.com"
	canaryPhone = "+351-910-CANARY-42"
	canaryName  = "Canarina Piivalue"

	canaryCRMToken  = "canary-crm-token-9d2e41"
	canaryCRMKey    = "canary-crm-key-5b7f03"
	canaryHook      = "canary-hook-secret-c3a8e6"
	canarySMTPPass  = "canary-smtp-pass-77aa1"
	canaryAPIToken  = "canary-api-token-0f9e8d7c"
	canaryBadToken  = "canary-wrong-token-1a2b3c4d"
	canarySMTPLogin = "shop"
)

const signupYAML = `name: signup
run_key: "{input.submission_id}"
entity: "lead:{input.submission_id}"
redact: [email, customer.name]
input:
  required: [submission_id, email]
webhook:
  name: signup
  scheme: hmac
  header: X-Signature
  prefix: "sha256="
  event_id: "{input.submission_id}"
  secret_env: [HOOK_SECRET]
api: true
steps:
  - id: crm
    kind: http
    effect_key: "crm:{input.submission_id}"
    retry: {max_attempts: 3, initial: 1s, max: 1s}
    http:
      url: "{env.CRM_URL}/leads?key={env.CRM_KEY}"
      headers: {Authorization: "Bearer {env.CRM_TOKEN}"}
      body: {email: "{input.email}", phone: "{input.phone}", name: "{input.customer.name}"}
  - id: note
    kind: go
    func: note
    needs: [crm]
    effect_key: "note:{input.submission_id}"
  - id: welcome
    kind: email
    needs: [crm]
    effect_key: "welcome:{input.submission_id}"
    email:
      from: "shop@example.com"
      to: "{input.email}"
      subject: "Welcome {input.customer.name}"
      body: "Hi {input.customer.name}, we will call {input.phone}."
  - id: unreachable
    kind: http
    needs: [crm]
    effect_key: "unreachable:{input.submission_id}"
    retry: {max_attempts: 1}
    http:
      url: "http://127.0.0.1:1/x?key={env.CRM_KEY}&email={input.email}"
`

// lockedBuffer collects log output written from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// echoingCRM answers with everything it was sent — the Authorization header, the query
// and the body — as a careless destination does: first 503, then 201 for submission s1,
// and 422 for any other.
func echoingCRM(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in map[string]any
		_ = json.Unmarshal(body, &in)
		echo, _ := json.Marshal(map[string]any{"auth": r.Header.Get("Authorization"), "query": r.URL.RawQuery, "received": in,
			"note": fmt.Sprintf("contact %v at %v", in["name"], in["email"])})
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		n := seen[r.Header.Get("Idempotency-Key")]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Idempotency-Key") != "crm:s1":
			w.WriteHeader(http.StatusUnprocessableEntity)
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusCreated)
		}
		w.Write(echo)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// echoingSMTP is an SMTP server that accepts the login and refuses every recipient with a
// reply naming the recipient and the password it was given.
func echoingSMTP(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	serve := func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		say := func(s string) { c.Write([]byte(s + "\r\n")) }
		say("220 canary ESMTP")
		login := ""
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSpace(line)
			cmd := strings.ToUpper(line)
			switch {
			case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
				say("250-canary")
				say("250 AUTH PLAIN")
			case strings.HasPrefix(cmd, "AUTH PLAIN "):
				raw, _ := base64.StdEncoding.DecodeString(line[len("AUTH PLAIN "):])
				login = strings.ReplaceAll(string(raw), "\x00", " ")
				say("235 2.7.0 accepted")
			case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RSET"), strings.HasPrefix(cmd, "NOOP"):
				say("250 ok")
			case strings.HasPrefix(cmd, "RCPT"):
				say("550 5.1.1 " + line[len("RCPT TO:"):] + " unknown here (logged in as" + login + ")")
			case cmd == "QUIT":
				say("221 bye")
				return
			default:
				say("502 not implemented")
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// Canary test: secrets (an {env} header and query value, the webhook secret, the API
// tokens, the SMTP password) and personal data (configured fields of the input) are sent
// through workflows that retry and fail, with destinations that echo them back in their
// answers and errors. Then every log line, every audit event, every attempt record, every
// API answer, every problem document and the metrics are searched for them: none may
// appear. The stored input keeps the personal data, and the API shows it masked.
func TestCanariesNeverLeak(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "signup.yaml"), []byte(signupYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	crm := echoingCRM(t)
	env := map[string]string{
		"CRM_URL": crm.URL, "CRM_TOKEN": canaryCRMToken, "CRM_KEY": canaryCRMKey, "HOOK_SECRET": canaryHook,
		"ONCEFLOW_SMTP_ADDR": echoingSMTP(t), "ONCEFLOW_SMTP_TLS": "none",
		"ONCEFLOW_SMTP_USERNAME": canarySMTPLogin, "ONCEFLOW_SMTP_PASSWORD": canarySMTPPass,
	}
	st := openSQLite(t, filepath.Join(t.TempDir(), "onceflow.db"))
	defer st.Close()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := &manualClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	tokens := []onceflowhttp.Token{{Name: "ops", Secret: canaryAPIToken, Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}}
	a, err := server.New(ctx, server.Config{
		Store: st, Workflows: []string{dir}, AllowNet: loopback, Logger: log,
		Env:          func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		RedactFields: []string{"phone"},
		Secrets:      processSecrets(dbLocation{}, tokens),
		Metrics:      &server.MetricsConfig{}, // on the API
		API:          &server.APIConfig{Tokens: tokens},
		Middleware:   apiMiddleware,
		Funcs: map[string]onceflow.StepFunc{"note": func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			var in struct {
				Email    string `json:"email"`
				Phone    string `json:"phone"`
				Customer struct {
					Name string `json:"name"`
				} `json:"customer"`
			}
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			return nil, onceflow.PermanentError(fmt.Errorf("CRM note for %s <%s>, %s refused (token %s)", in.Customer.Name, in.Email, in.Phone, canaryCRMToken))
		}},
		Engine: onceflow.Config{Workers: 4, Clock: clk.Now, Rand: func() float64 { return 0.5 }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(hs.Close)

	var api strings.Builder // every answer of the API
	call := func(method, path string, header map[string]string, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(&api, "%s %s → %d %v\n%s\n", method, path, resp.StatusCode, resp.Header, b)
		return resp.StatusCode, b
	}
	admin := map[string]string{"Authorization": "Bearer " + canaryAPIToken}
	input := func(id string) string {
		b, _ := json.Marshal(map[string]any{"submission_id": id, "email": canaryEmail, "phone": canaryPhone,
			"customer": map[string]any{"name": canaryName, "segment": "smb"}})
		return string(b)
	}
	hook := func(body, secret string) int {
		t.Helper()
		h, err := signature.Sign(signature.Config{Scheme: signature.HMAC, Secrets: []string{secret}, Header: "X-Signature", Prefix: "sha256="}, 0, "", time.Now(), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		hdr := map[string]string{}
		for k := range h {
			hdr[k] = h.Get(k)
		}
		code, _ := call(http.MethodPost, "/hooks/signup", hdr, body)
		return code
	}

	// s1 through the API, s2 through the webhook; repeats, forgeries and mistakes.
	if code, b := call(http.MethodPost, "/v1/workflows/signup/runs", map[string]string{"Authorization": "Bearer " + canaryAPIToken, "Idempotency-Key": "form-s1"}, input("s1")); code != http.StatusCreated {
		t.Fatalf("start s1: %d %s", code, b)
	}
	if code := hook(input("s2"), canaryHook); code != http.StatusOK {
		t.Fatalf("webhook s2: %d", code)
	}
	if code := hook(input("s2"), canaryHook); code != http.StatusOK {
		t.Fatalf("repeated webhook s2: %d", code)
	}
	if code := hook(input("s3"), "not-"+canaryHook); code != http.StatusUnauthorized {
		t.Fatalf("forged webhook: %d", code)
	}
	for _, c := range []struct {
		method, path string
		header       map[string]string
		body         string
		want         int
	}{
		{http.MethodPost, "/v1/workflows/signup/runs", map[string]string{"Authorization": "Bearer " + canaryAPIToken, "Idempotency-Key": "form-s1"},
			strings.Replace(input("s1"), "smb", "enterprise", 1), http.StatusUnprocessableEntity},
		{http.MethodPost, "/v1/workflows/signup/runs", map[string]string{"Authorization": "Bearer " + canaryBadToken, "Idempotency-Key": "form-s9"}, input("s9"), http.StatusUnauthorized},
		{http.MethodPost, "/v1/workflows/signup/runs", map[string]string{"Authorization": "Bearer " + canaryAPIToken, "Idempotency-Key": "form-s8"},
			`{"email": "` + canaryEmail + `", "phone": "` + canaryPhone + `"}`, http.StatusUnprocessableEntity},
		{http.MethodPost, "/v1/workflows/signup/runs", admin, `{"email": "` + canaryEmail + `"`, http.StatusBadRequest},
		{http.MethodGet, "/v1/runs/999999", admin, "", http.StatusNotFound},
		{http.MethodGet, "/v1/runs?state=bogus", admin, "", http.StatusBadRequest},
	} {
		if code, b := call(c.method, c.path, c.header, c.body); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, b, c.want)
		}
	}

	// Work: s1's crm is answered 503 then 201; s2's crm 422; after s1's crm the note
	// fails with the data in its error, the mail server refuses the recipient, and the
	// unreachable step cannot connect.
	work := func() {
		t.Helper()
		if _, err := a.Client().Work(ctx); err != nil {
			t.Fatal(err)
		}
	}
	work()
	clk.Advance(time.Hour)
	work()

	runs, err := st.RunList(ctx, store.RunListParams{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs: %d %v", len(runs), err)
	}
	states := map[string]store.State{}
	var storeText strings.Builder // everything the engine wrote about the runs
	for _, r := range runs {
		steps, err := st.StepListByRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			states[r.RunKey+"/"+s.Name] = s.State
			fmt.Fprintf(&storeText, "step %s/%s %s reason %s last_error %s\n", r.RunKey, s.Name, s.State, s.Reason, s.LastError)
		}
		attempts, err := st.AttemptListByRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range attempts {
			fmt.Fprintf(&storeText, "attempt %s #%d %s error %s excerpt %s\n", at.StepName, at.Number, at.Outcome, at.Error, at.ResponseExcerpt)
		}
		if !strings.Contains(string(r.Input), canaryEmail) {
			t.Errorf("the stored input of %s lost its data: %s", r.RunKey, r.Input)
		}
		if code, b := call(http.MethodGet, fmt.Sprintf("/v1/runs/%d", r.ID), admin, ""); code != http.StatusOK {
			t.Fatalf("GET run %d: %d %s", r.ID, code, b)
		} else {
			var v struct {
				Input map[string]any `json:"input"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			cust, _ := v.Input["customer"].(map[string]any)
			if v.Input["email"] != "[redacted]" || v.Input["phone"] != "[redacted]" || cust["name"] != "[redacted]" ||
				cust["segment"] != "smb" || v.Input["submission_id"] != strings.TrimPrefix(r.RunKey, "form-") {
				t.Errorf("GET /v1/runs/%d input = %v, want the personal data masked and the rest shown", r.ID, v.Input)
			}
		}
	}
	call(http.MethodGet, "/v1/runs?limit=500", admin, "")
	call(http.MethodGet, "/metrics", nil, "")
	// The review queue, the audit trail and the key report show the same runs: whatever
	// they answer is searched too.
	call(http.MethodGet, "/v1/review", admin, "")
	for _, r := range runs {
		call(http.MethodGet, fmt.Sprintf("/v1/audit?run=%d", r.ID), admin, "")
		for _, step := range []string{"crm", "note", "welcome", "unreachable"} {
			call(http.MethodGet, fmt.Sprintf("/v1/review/%d/%s", r.ID, step), admin, "")
		}
	}
	call(http.MethodGet, "/v1/keys/crm:s1", admin, "")
	events, err := st.EventList(ctx, store.EventListParams{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		fmt.Fprintf(&storeText, "event %s run %d step %s key %s actor %s reason %s detail %s\n", e.Type, e.RunID, e.StepName, e.EffectKey, e.Actor, e.Reason, e.Detail)
	}

	// The workload went where it should, so that there is something to search.
	want := map[string]store.State{
		"form-s1/crm": store.StateCompleted, "form-s1/note": store.StateNeedsReview, "form-s1/welcome": store.StateNeedsReview,
		"form-s1/unreachable": store.StateNeedsReview, "s2/crm": store.StateNeedsReview,
	}
	for k, w := range want {
		if states[k] != w {
			t.Errorf("step %s is %s, want %s\n%s", k, states[k], w, storeText.String())
		}
	}

	all := map[string]string{"logs": logs.String(), "audit and attempts": storeText.String(), "API": api.String()}
	for _, p := range []string{"/v1/review → 200", "/v1/audit?run=1 → 200", "/v1/review/1/note → 200"} {
		if !strings.Contains(all["API"], p) {
			t.Logf("note: %s was not answered (the endpoint may have changed)", p)
		}
	}
	for _, required := range []string{"[redacted]", "retryable", "permanent", "550"} {
		if !strings.Contains(all["audit and attempts"], required) {
			t.Errorf("audit and attempts lack %q: the workload did not produce what the test searches\n%s", required, all["audit and attempts"])
		}
	}
	canaries := []string{canaryEmail, canaryPhone, canaryName, canaryCRMToken, canaryCRMKey, canaryHook, canarySMTPPass, canaryAPIToken, canaryBadToken,
		base64.StdEncoding.EncodeToString([]byte("\x00" + canarySMTPLogin + "\x00" + canarySMTPPass))}
	for where, text := range all {
		low := strings.ToLower(text)
		for _, c := range canaries {
			if strings.Contains(low, strings.ToLower(c)) {
				i := strings.Index(low, strings.ToLower(c))
				from, to := max(0, i-200), min(len(text), i+len(c)+100)
				t.Errorf("canary %q appears in the %s: …%s…", c, where, text[from:to])
			}
		}
	}

	// Every log line about a step names the run, workflow, entity, step, effect key and
	// attempt; request lines name method, route, status and duration, and no header.
	var stepLines, requestLines int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, ok := rec["step"]; ok {
			stepLines++
			for _, k := range []string{"run_id", "workflow", "entity", "effect_key", "attempt"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("step log line lacks %s: %s", k, line)
				}
			}
		}
		if rec["msg"] == "http request" {
			requestLines++
			for _, k := range []string{"method", "route", "status", "duration"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("request log line lacks %s: %s", k, line)
				}
			}
		}
	}
	if stepLines == 0 || requestLines == 0 {
		t.Errorf("%d step log lines and %d request log lines; want some of each", stepLines, requestLines)
	}
	if strings.Contains(logs.String(), "Bearer") || strings.Contains(logs.String(), "Idempotency-Key") {
		t.Error("a request header reached the logs")
	}
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
