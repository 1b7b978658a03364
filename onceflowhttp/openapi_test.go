package onceflowhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/internal/apicheck"
)

var (
	checkerOnce sync.Once
	checker     *apicheck.Checker
	checkerErr  error
)

// apiChecker returns the checker of the committed OpenAPI document, loaded once.
func apiChecker(t *testing.T) *apicheck.Checker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = apicheck.New(openAPIDocument) })
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checker
}

// checked wraps the handler of a test server: every request the test makes and every
// answer are checked against the OpenAPI document, and what does not match fails the test.
func checked(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	return apiChecker(t).Handler(h, func(err error) { t.Errorf("OpenAPI document: %v", err) })
}

// GET /v1/openapi.json serves the committed document without a token, and every operation
// it describes is routed by the server (none falls through to the catch-all 404).
func TestOpenAPIDocumentServed(t *testing.T) {
	b := setup(t)
	a := b.do("GET", "/v1/openapi.json", "", nil, "")
	wantStatus(t, a, http.StatusOK, "")
	if a.body != string(openAPIDocument) || !bytes.Equal(OpenAPI(), openAPIDocument) {
		t.Fatal("the served document differs from the committed one")
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q: %v", doc.OpenAPI, err)
	}
	srv, err := NewHandler(b.client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		if path == "/metrics" {
			continue // served only with Options.MetricsHandler
		}
		for method := range ops {
			p := strings.NewReplacer("{name}", "x", "{id}", "1", "{run}", "1", "{step}", "s", "{action}", "retry", "{key}", "k").Replace(path)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(strings.ToUpper(method), p, strings.NewReader("{}")))
			if strings.Contains(rec.Body.String(), "is not part of the API") || rec.Code == http.StatusMethodNotAllowed {
				t.Errorf("%s %s is in the document but not routed: %d %s", strings.ToUpper(method), path, rec.Code, rec.Body)
			}
		}
	}
}

// The checker fails: an answer of the wrong shape, an undocumented status, a route the
// document lacks and an invalid request that was accepted are each reported.
func TestOpenAPICheckerReportsMismatches(t *testing.T) {
	c := apiChecker(t)
	wrong := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/runs/7": // id as a string, an unknown state, no links
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id": "7", "workflow": "w", "run_key": "k", "state": "done", "created_at": "2026-03-01T09:00:00Z", "updated_at": "2026-03-01T09:00:00Z"}`)
		case "/v1/workflows": // a status the operation does not list
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, `{"workflows": []}`)
		case "/v1/secret-route":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{}`)
		case "/v1/runs": // limit=0 is invalid by the document, yet answered 200
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"runs": []}`)
		}
	})
	for _, tc := range []struct{ path, want string }{
		{"/v1/runs/7", `"id"`},
		{"/v1/workflows", "418"},
		{"/v1/secret-route", "has no such operation"},
		{"/ui/runs", ""}, // not the API: not checked
		{"/v1/runs?limit=0", "the request is invalid by the document"},
	} {
		var got []error
		var mu sync.Mutex
		h := c.Handler(wrong, func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if tc.want == "" {
			if len(got) != 0 {
				t.Errorf("GET %s: reported %v", tc.path, got)
			}
			continue
		}
		if len(got) != 1 || !strings.Contains(got[0].Error(), tc.want) {
			t.Errorf("GET %s: reported %v, want one report containing %q", tc.path, got, tc.want)
		}
	}
	// The same exchanges, answered correctly, pass.
	if err := c.Check(context.Background(), apicheck.Exchange{Request: httptest.NewRequest(http.MethodGet, "/v1/workflows", nil), Status: http.StatusOK,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"workflows": []}`)}); err != nil {
		t.Fatalf("a correct answer was reported: %v", err)
	}
}
