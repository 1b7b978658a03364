package onceflowhttp

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/triggers/webhook"
)

// nested returns {"submission_id":"deep","x":{"a":{"a":…1…}}} with depth levels in all.
func nested(depth int) string {
	var b strings.Builder
	b.WriteString(`{"submission_id":"deep","x":`)
	for i := 0; i < depth-1; i++ {
		b.WriteString(`{"a":`)
	}
	b.WriteString(`1`)
	b.WriteString(strings.Repeat("}", depth-1))
	b.WriteString(`}`)
	return b.String()
}

func TestDeepJSONIsRefused(t *testing.T) {
	b := setupWith(t, func(c *Options) { c.MaxBody = 1 << 20 })
	a := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, nested(10000))
	wantStatus(t, a, http.StatusBadRequest, "json-too-deep")
	if !strings.Contains(a.body, "64") {
		t.Fatalf("the problem does not name the limit: %s", a.body)
	}
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, nested(64)), http.StatusCreated, "")
	if n := len(b.runs()); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
	// The review actions read bodies too.
	wantStatus(t, b.do("POST", "/v1/review/1/crm/retry", adminToken, nil, `{"note":`+nested(100)+`}`), http.StatusBadRequest, "json-too-deep")
	// So do webhooks: a correctly signed delivery nested too deeply is refused.
	hooks := setupWith(t, func(c *Options) { c.MaxBody = 1 << 20 }, fmt.Sprintf(paymentYAML, "payments", "stripe", `"{input.id}"`))
	deep := `{"id":"evt_deep","type":"payment_intent.succeeded","x":` + nested(10000) + `}`
	h, err := signature.Sign(signature.Config{Scheme: signature.Stripe, Secrets: []string{hooks.env["HOOK_SECRET"]}}, 0, "d-1", hooks.now, []byte(deep))
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{}
	for k := range h {
		hdr[k] = h.Get(k)
	}
	wantStatus(t, hooks.do("POST", "/hooks/payments", "", hdr, deep), http.StatusBadRequest, "json-too-deep")
	if n := len(hooks.runs()); n != 0 {
		t.Fatalf("%d runs from a webhook nested too deeply, want none", n)
	}

	small := setupWith(t, func(c *Options) { c.MaxDepth = 3 })
	a = small.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, nested(4))
	wantStatus(t, a, http.StatusBadRequest, "json-too-deep")
	if !strings.Contains(a.body, "limit is 3") {
		t.Fatalf("the problem does not name the configured limit: %s", a.body)
	}
	wantStatus(t, small.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, nested(3)), http.StatusCreated, "")
}

func TestDuplicateMembersAreRefused(t *testing.T) {
	b := setup(t)
	for _, body := range []string{
		`{"submission_id":"a","submission_id":"b"}`,
		`{"submission_id":"a","x":{"k":1,"k":2}}`,
		`{"submission_id":"a","\u0073ubmission_id":"b"}`, // the same name, escaped
		`{"submission_id":"a","l":[{"k":1,"k":1}]}`,
	} {
		a := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, body)
		wantStatus(t, a, http.StatusBadRequest, "duplicate-member")
	}
	wantStatus(t, b.do("POST", "/v1/review/1/crm/retry", adminToken, nil, `{"note":"a","note":"b"}`), http.StatusBadRequest, "duplicate-member")
	// The same name in sibling objects is fine.
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, `{"submission_id":"a","l":[{"k":1},{"k":2}],"m":{"k":3}}`), http.StatusCreated, "")
	if n := len(b.runs()); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func TestInvalidUTF8IsRefused(t *testing.T) {
	b := setup(t)
	key := map[string]string{"Idempotency-Key": "utf8-1"}
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, key, "{\"submission_id\":\"a\xffb\"}"), http.StatusBadRequest, "invalid-utf8")
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, key, "{\"submission_id\":\"a\xfeb\"}"), http.StatusBadRequest, "invalid-utf8")
	// Half a surrogate pair decodes to U+FFFD: \ud800 and \udbff would read the same.
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, key, `{"submission_id":"a\ud800b"}`), http.StatusBadRequest, "invalid-utf8")
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, key, `{"submission_id":"a\udc00"}`), http.StatusBadRequest, "invalid-utf8")
	if n := len(b.runs()); n != 0 {
		t.Fatalf("%d runs, want none", n)
	}
	// A pair, an escaped backslash before a u, and U+FFFD itself are fine.
	for i, body := range []string{`{"submission_id":"\ud83d\ude00"}`, `{"submission_id":"a\\ud800"}`, "{\"submission_id\":\"\uFFFD\"}"} {
		wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": fmt.Sprint("ok-", i)}, body), http.StatusCreated, "")
	}
}

// syncBuffer is a log destination safe for the server's goroutines; wrote receives a
// value after each write (coalesced).
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		select {
		case s.wrote <- struct{}{}:
		default:
		}
	}()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type abortCounter struct {
	mu      sync.Mutex
	aborted map[string]int
}

func (a *abortCounter) WebhookDelivery(string, string) {}
func (a *abortCounter) RequestAborted(route string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.aborted[route]++
}

func (a *abortCounter) count(route string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.aborted[route]
}

func TestAbortedBodyIsA400(t *testing.T) {
	logs := newSyncBuffer()
	metrics := &abortCounter{aborted: map[string]int{}}
	b := setupWith(t, func(c *Options) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.Metrics = metrics
	}, fmt.Sprintf(paymentYAML, "payments", "stripe", `"{input.id}"`))
	host := strings.TrimPrefix(b.url, "http://")
	for _, path := range []string{"/hooks/payments", "/v1/workflows/website-lead/runs"} {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: cut-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", path, ingestToken)
		conn.(*net.TCPConn).CloseWrite()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400", path, resp.StatusCode)
		}
	}
	// The count is made before the answer is written, so it is there now.
	if metrics.count("POST /hooks/{name}") != 1 || metrics.count("POST /v1/workflows/{name}/runs") != 1 {
		t.Fatalf("aborted requests counted %v", metrics.aborted)
	}
	// Each request's log line is written after its answer: wait for both.
	deadline := time.After(30 * time.Second)
	for strings.Count(logs.String(), `"http request"`) < 2 {
		select {
		case <-logs.wrote:
		case <-deadline:
			t.Fatalf("no log line for each request after 30 s:\n%s", logs)
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("aborted requests logged as errors:\n%s", logs)
	}
	if n := strings.Count(logs.String(), `"level":"DEBUG","msg":"request body incomplete"`); n != 2 {
		t.Fatalf("%d debug lines about incomplete bodies, want 2:\n%s", n, logs)
	}
	if len(b.runs()) != 0 {
		t.Fatal("a run was started from a body cut short")
	}
}

func TestParseTokensNeverEchoesTheSecret(t *testing.T) {
	for _, bad := range []string{
		"web:INGESTsecretValue0123456789:ingest", // scope and secret swapped
		"web:ingest+INGESTsecretValue0123456789:x",
		"INGESTsecretValue0123456789",
		"INGESTsecretValue0123456789:ingest",     // no name
		"INGESTsecretValue0123456789:web:ingest", // secret first
		"ops:admin:0123456789abcdef0123,INGESTsecretValue0123456789:web:ingest",
		"web:ingest:INGESTsecretValue0123456789,ops:admin:INGESTsecretValue0123456789", // one secret, two scopes
		"web:ingest:INGESTsecretValue0123456789,web:admin:0123456789abcdef0123",        // one name twice
	} {
		_, err := ParseTokens(bad)
		if err == nil {
			t.Fatalf("ParseTokens(%q) accepted it", bad)
		}
		if strings.Contains(err.Error(), "INGESTsecretValue") {
			t.Fatalf("ParseTokens(%q) = %v: the error shows the secret", bad, err)
		}
	}
}

func TestWebhookWithoutSecretFailsReadiness(t *testing.T) {
	yaml := fmt.Sprintf(paymentYAML, "payments", "standard-webhooks", `"{input.id}"`)
	b := setup(t, yaml)
	wantStatus(t, b.do("GET", "/readyz", "", nil, ""), http.StatusOK, "")

	b.env = map[string]string{"HOOK_SECRET": "whsec_not base64!"}
	bad := setupEnv(t, b.env, nil, yaml)
	a := bad.do("GET", "/readyz", "", nil, "")
	wantStatus(t, a, http.StatusServiceUnavailable, "not-ready")
	if !strings.Contains(a.body, "payments") || strings.Contains(a.body, "not base64") {
		t.Fatalf("readiness answer %s", a.body)
	}

	defs := bad.defs(t, yaml)
	err := receivers(t, defs, b.env)[0].Err()
	if err == nil || !strings.Contains(err.Error(), "payments") || !strings.Contains(err.Error(), "HOOK_SECRET") || strings.Contains(err.Error(), "not base64!") {
		t.Fatalf("the receiver's Err = %v", err)
	}
	if err := receivers(t, defs, nil)[0].Err(); err == nil || !strings.Contains(err.Error(), "none of its secret variables") {
		t.Fatalf("the receiver's Err without secrets = %v", err)
	}
}

// defs parses workflow files for a test.
func (b *bundle) defs(t *testing.T, yamls ...string) []*flowfile.Definition {
	t.Helper()
	var out []*flowfile.Definition
	for i, y := range yamls {
		d, ps := readerWith(t, nil).Parse(fmt.Sprintf("hook%d.yaml", i), []byte(y))
		if ps != nil {
			t.Fatal(ps)
		}
		out = append(out, d)
	}
	return out
}

// One signed GitHub delivery replayed under new X-GitHub-Delivery ids starts one run: the
// run key comes from the signed payload, and a file without event_id is refused.
func TestGitHubRunKeyComesFromThePayload(t *testing.T) {
	noID := fmt.Sprintf(paymentYAML, "payments", "github", `""`)
	if _, ps := readerWith(t, nil).Parse("gh.yaml", []byte(noID)); ps == nil || !strings.Contains(ps.Error(), "event_id is required for scheme github") {
		t.Fatalf("a github webhook without event_id: %v", ps)
	}
	b := setup(t, fmt.Sprintf(paymentYAML, "payments", "github", `"{input.id}"`))
	cfg := signature.Config{Scheme: signature.GitHub, Secrets: []string{b.env["HOOK_SECRET"]}}
	event := `{"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"metadata": {"order_id": "1001"}}}}`
	for _, delivery := range []string{"d-1", "d-2", "d-3"} {
		h, err := signature.Sign(cfg, 0, "d-1", b.now, []byte(event))
		if err != nil {
			t.Fatal(err)
		}
		hdr := map[string]string{}
		for k := range h {
			hdr[k] = h.Get(k)
		}
		hdr["X-GitHub-Delivery"] = delivery // not signed: an attacker can change it
		wantStatus(t, b.do("POST", "/hooks/payments", "", hdr, event), http.StatusOK, "")
	}
	if n := len(b.runs()); n != 1 {
		t.Fatalf("%d runs from one signed body, want 1", n)
	}
	// A definition built without Parse is caught when serving.
	d, _ := readerWith(t, nil).Parse("gh.yaml", []byte(fmt.Sprintf(paymentYAML, "payments", "github", `"{input.id}"`)))
	hook, _ := d.Trigger("webhook")
	hook.(*webhook.Settings).EventID = ""
	if _, err := flowfile.Triggers([]*flowfile.Definition{d}, flowfile.TriggerOptions{Env: func(string) (string, bool) { return "s3cret-value-0123", true }}); err == nil || !strings.Contains(err.Error(), "event_id") {
		t.Fatalf("building the receiver = %v", err)
	}
}
