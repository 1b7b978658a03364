package onceflowhttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/store"
)

// A misspelt parameter is refused, not ignored: POST /v1/review/bulk/abandon?dryrun=true
// abandons nothing and says which parameters the route takes; a parameter given twice is
// refused too.
func TestUnknownQueryParameterActsOnNothing(t *testing.T) {
	b := setupReview(t)
	id := b.parked("o-1", "no-at-sign")
	a := b.do("POST", "/v1/review/bulk/abandon?dryrun=true", adminToken, nil, `{"filter": {}, "note": "a look first"}`)
	wantStatus(t, a, http.StatusBadRequest, "unknown-parameter")
	if a.json["detail"] != `"dryrun" is not a parameter of POST /v1/review/bulk/{action}, which takes only the query parameters dry_run; nothing was done` ||
		a.json["parameter"] != "dryrun" {
		t.Fatalf("refusal %s", a.body)
	}
	wantStatus(t, b.do("POST", "/v1/review/bulk/abandon?dry_run=true&dry_run=false", adminToken, nil, `{"filter": {}}`), http.StatusBadRequest, "repeated-parameter")
	wantStatus(t, b.do("POST", "/v1/review/bulk/abandon?dry_run=%zz", adminToken, nil, `{"filter": {}}`), http.StatusBadRequest, "invalid-query")
	// The action on one item takes no dry run: it would otherwise act for real.
	wantStatus(t, b.do("POST", "/v1/review/"+itoa(id)+"/charge/abandon?dry_run=true", adminToken, nil, `{}`), http.StatusBadRequest, "unknown-parameter")
	steps, err := b.store.StepListByRun(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Name == "charge" && st.State != store.StateNeedsReview {
			t.Fatalf("charge is %s after refused requests", st.State)
		}
	}
	// The replay of one item does take it.
	wantStatus(t, b.do("POST", "/v1/review/"+itoa(id)+"/charge/replay?dry_run=true", adminToken, nil, `{"merge_patch": {"email": "a@example.com"}}`), http.StatusOK, "")
}

// Every route refuses a parameter it does not declare with a 400 naming those it does —
// the webhooks, the health checks and the admin routes too — and what each route declares
// is what the OpenAPI document lists.
func TestEveryRouteRefusesUnknownParameters(t *testing.T) {
	b := setup(t)
	srv, err := NewHandler(b.client, Options{Tokens: []Token{{Name: "ops", Secret: adminToken, Scopes: []Scope{ScopeAdmin}}},
		MetricsHandler: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	h := checked(t, srv)
	fill := strings.NewReplacer("{name}", "website-lead", "{id}", "1", "{run}", "1", "{step}", "crm", "{action}", "retry", "{key...}", "k", "{$}", "")
	for _, rt := range srv.routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		req := httptest.NewRequest(method, fill.Replace(path)+"?dryrun=true", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var p map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		known, _ := json.Marshal(p["known"])
		want, _ := json.Marshal(append([]string{}, rt.query...))
		if rec.Code != http.StatusBadRequest || p["type"] != typeBase+"unknown-parameter" || string(known) != string(want) {
			t.Errorf("%s?dryrun=true: %d %s, want 400 unknown-parameter naming %s", rt.pattern, rec.Code, rec.Body, want)
		}
	}

	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In string } `json:"parameters"`
			Responses  map[string]json.RawMessage  `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			method = strings.ToUpper(method)
			var listed []string
			for _, p := range op.Parameters {
				if p.In == "query" {
					listed = append(listed, p.Name)
				}
			}
			_, pattern := srv.mux.Handler(httptest.NewRequest(method, strings.NewReplacer("{key}", "k", "{action}", "retry").Replace(path), nil))
			i := slices.IndexFunc(srv.routes, func(rt route) bool { return rt.pattern == pattern })
			if i < 0 {
				t.Errorf("%s %s is routed to %q, not a route of handleRoute", method, path, pattern)
				continue
			}
			declared := srv.routes[i].query
			slices.Sort(listed)
			declared = slices.Sorted(slices.Values(declared))
			if !slices.Equal(listed, declared) {
				t.Errorf("%s %s: the document lists the query parameters %v, the route %q takes %v", method, path, listed, pattern, declared)
			}
			if _, ok := op.Responses["400"]; !ok {
				t.Errorf("%s %s: the document lists no 400, which an unknown parameter is answered with", method, path)
			}
		}
	}
}
