package onceflow_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

// What an attempt sent is stored with the attempt and shown by the read API, masked: a
// credential in a header, a URL's password and token parameter, a configured secret and
// the run's personal data never reach the database file, and the request of an attempt
// that failed is kept too.
func TestAttemptRequestRecordedMasked(t *testing.T) {
	const (
		canary = "canary-bearer-4b1d7e9a0c"
		pii    = "ada-canary@example.com"
		secret = "configured-secret-6f2e"
	)
	b := setup(t, func(c *onceflow.Config) { c.Redact = onceflow.Redaction{Secrets: []string{secret}} })
	calls := 0
	b.register(t, onceflow.Workflow{Name: "crm", Redact: []string{"email"}, Steps: []onceflow.Step{{ID: "lead", EffectKey: "lead:{input.id}",
		Retry: onceflow.RetryPolicy{MaxAttempts: 2},
		Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			calls++
			sc.RecordRequest(onceflow.Request{Method: "POST",
				URL: "https://bot:hunter2-pass@crm.example/leads?access_token=" + canary + "&list=42",
				Headers: map[string][]string{"Authorization": {"Bearer " + canary}, "Idempotency-Key": {sc.EffectKey},
					"X-Note": {"see " + secret}, "Content-Type": {"application/json"}},
				Body: `{"name":"Ada","email":"` + pii + `","password":"p4ss-` + canary + `"}`})
			if calls == 1 {
				return nil, errors.New("503 from the CRM")
			}
			sc.RecordResponse(201, `{"id":7}`)
			return map[string]any{"id": 7}, nil
		}}}})
	run := b.start(t, "crm", "r1", map[string]any{"id": "1", "email": pii})
	b.work(t)
	b.clock.Advance(time.Hour)
	b.work(t)

	d, err := b.client.RunGet(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2", len(d.Attempts))
	}
	for _, a := range d.Attempts {
		r := a.Request
		if r == nil {
			t.Fatalf("attempt %d (%s) shows no request", a.Number, a.Outcome)
		}
		if r.Method != "POST" || !strings.HasPrefix(r.URL, "https://bot:[redacted]@crm.example/leads?") || !strings.Contains(r.URL, "access_token=[redacted]") ||
			!strings.Contains(r.URL, "list=42") {
			t.Errorf("attempt %d sent %s %s", a.Number, r.Method, r.URL)
		}
		if got := r.Headers["Authorization"]; len(got) != 1 || got[0] != "[redacted]" {
			t.Errorf("attempt %d: Authorization %q", a.Number, got)
		}
		if got := r.Headers["Idempotency-Key"]; len(got) != 1 || got[0] != "lead:1" {
			t.Errorf("attempt %d: Idempotency-Key %q, want the effect key", a.Number, got)
		}
		if got := r.Headers["X-Note"]; len(got) != 1 || got[0] != "see [redacted]" {
			t.Errorf("attempt %d: X-Note %q", a.Number, got)
		}
		if !strings.Contains(r.Body, `"name":"Ada"`) || strings.Contains(r.Body, pii) || strings.Contains(r.Body, "p4ss") {
			t.Errorf("attempt %d body %s", a.Number, r.Body)
		}
	}
	unmasked, err := b.client.Unmasked("test:ana").RunGet(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := unmasked.Attempts[1].Request.Headers["Authorization"]; got[0] != "[redacted]" {
		t.Errorf("an unmasked read shows Authorization %q: it must never have been stored", got)
	}
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(b.path + "*")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{canary, secret, "hunter2-pass"} {
			if strings.Contains(string(raw), c) {
				t.Errorf("%s holds %q in clear", filepath.Base(f), c)
			}
		}
	}
}

// A request is bounded before it is stored: a long body, many headers and long values are
// cut, marked with "…".
func TestAttemptRequestBounded(t *testing.T) {
	b := setup(t)
	headers := map[string][]string{}
	for i := range 100 {
		headers[strings.Repeat("h", 3)+string(rune('a'+i%26))+strings.Repeat("x", i)] = []string{strings.Repeat("v", 1000)}
	}
	b.register(t, onceflow.Workflow{Name: "big", Steps: []onceflow.Step{{ID: "s", EffectKey: "big:{input.id}",
		Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			sc.RecordRequest(onceflow.Request{Method: "PUT", URL: "https://x.example/" + strings.Repeat("p", 10000), Headers: headers,
				Body: strings.Repeat("b", 1<<20), Args: make([]string, 100)})
			return nil, nil
		}}}})
	run := b.start(t, "big", "r1", map[string]any{"id": "1"})
	b.work(t)
	d, err := b.client.RunGet(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := d.Attempts[0].Request
	if r == nil || len(r.URL) > onceflow.MaxRequestURL+len("…") || len(r.Body) > onceflow.MaxRequestBody+len("…") || !strings.HasSuffix(r.Body, "…") ||
		len(r.Headers) > onceflow.MaxRequestHeaders+1 || len(r.Args) > onceflow.MaxRequestArgs+1 {
		t.Fatalf("a large request was stored as URL %d bytes, body %d, %d headers, %d args", len(r.URL), len(r.Body), len(r.Headers), len(r.Args))
	}
	for k, vs := range r.Headers {
		if len(vs[0]) > onceflow.MaxRequestValue+len("…") {
			t.Errorf("header %s holds %d bytes", k, len(vs[0]))
		}
	}
}
