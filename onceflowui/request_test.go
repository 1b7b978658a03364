package onceflowui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/steps/httpstep"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// TestRequestSentShownMasked: the request an http step sent — method, URL, headers, body —
// is shown beside the destination's answer on the run's page and in GET /v1/runs/{id}, per
// attempt; the bearer token of its Authorization header, read from the environment, is in
// no page, no API answer and nowhere in the database file.
func TestRequestSentShownMasked(t *testing.T) {
	const canary = "canary-crm-token-93c1f0d7e2"
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"error":"lead exists"}`)
	}))
	t.Cleanup(crm.Close)
	policy := &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	step, err := httpstep.New(httpstep.Spec{Request: httpstep.Request{URL: crm.URL + "/leads?source=web",
		Headers: map[string]string{"Authorization": "Bearer {env.CRM_TOKEN}"},
		Body:    map[string]any{"name": "{input.name}", "ref": "form-{input.id}"}}},
		policy.Client(5*time.Second), func(name string) (string, bool) { return canary, name == "CRM_TOKEN" })
	if err != nil {
		t.Fatal(err)
	}
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Register(onceflow.Workflow{Name: "lead", Steps: []onceflow.Step{{ID: "crm", EffectKey: "crm:{input.id}", Do: step.Do}}}); err != nil {
		t.Fatal(err)
	}
	run, err := client.Start(ctx, "lead", "form-1", map[string]any{"id": "1", "name": "Müller & Söhne"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if it, err := client.ReviewGet(ctx, run.ID, "crm"); err != nil || it.State != store.StateNeedsReview || len(got) != 1 || got[0] != "Bearer "+canary {
		t.Fatalf("the step is %v (%v) after %d requests, want parked after one with the token", it, err, len(got))
	}

	tokens, err := onceflowhttp.ParseTokens("ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{t: t, store: st, client: client, runID: run.ID}
	b.srv = httptest.NewServer(newConsole(t, onceflowui.Config{Client: client, Tokens: tokens}))
	t.Cleanup(b.srv.Close)
	api, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	b.api = httptest.NewServer(apiChecker(t).Handler(api, func(err error) { t.Errorf("OpenAPI document: %v", err) }))
	t.Cleanup(b.api.Close)

	// The API: the attempt's request, its token masked.
	req, _ := http.NewRequest(http.MethodGet, b.api.URL+"/v1/runs/1", nil)
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var doc struct {
		Steps []struct {
			Attempts []struct {
				Request *onceflow.Request `json:"request"`
			} `json:"attempt_log"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Steps) != 1 || len(doc.Steps[0].Attempts) != 1 || doc.Steps[0].Attempts[0].Request == nil {
		t.Fatalf("GET /v1/runs/1 = %d: %s (%v)", resp.StatusCode, body, err)
	}
	sent := doc.Steps[0].Attempts[0].Request
	if sent.Method != "POST" || sent.URL != crm.URL+"/leads?source=web" || sent.Headers["Authorization"][0] != "[redacted]" ||
		sent.Headers["Idempotency-Key"][0] != "crm:1" || sent.Body != `{"name":"Müller & Söhne","ref":"form-1"}` {
		t.Errorf("the API shows the request as %+v", sent)
	}
	if strings.Contains(string(body), canary) {
		t.Errorf("GET /v1/runs/1 shows the token: %s", body)
	}

	// The console: the run's page and the review item, beside the answer.
	br := b.browser()
	br.signIn(adminSecret)
	for _, page := range []string{"/ui/runs/1", "/ui/runs/1/live", "/ui/review/1/crm", "/ui/audit", "/ui/audit/export.json"} {
		resp, html := br.get(page)
		wantStatus(t, resp, html, http.StatusOK)
		if strings.Contains(html, canary) {
			t.Errorf("%s shows the token", page)
		}
		if strings.HasPrefix(page, "/ui/runs/") || strings.HasPrefix(page, "/ui/review/") {
			if !strings.Contains(html, "POST "+crm.URL+"/leads?source=web") || !strings.Contains(html, "Authorization: [redacted]") ||
				!strings.Contains(html, "Idempotency-Key: crm:1") || !strings.Contains(html, "lead exists") {
				t.Errorf("%s does not show the request beside the answer:\n%s", page, html)
			}
		}
	}

	// The database file.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), canary) {
			t.Errorf("%s holds the token in clear", filepath.Base(f))
		}
	}
}
