package onceflowhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/store/sqlite"
)

// fuzzMaxBody is the largest body the fuzzed server reads; a larger one is a 413.
const fuzzMaxBody = 4096

// fuzzHandler is the API of a server with the lead workflow (run key and entity from the
// input, submission_id required) on a SQLite file of its own.
func fuzzHandler(f *testing.F) http.Handler {
	f.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		f.Fatal(err)
	}
	d, ps := readerWith(f, map[string]onceflow.StepFunc{
		"noop": func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil },
	}).Parse("lead.yaml", []byte(leadYAML))
	if ps != nil {
		f.Fatal(ps)
	}
	wfs, err := buildWith([]*flowfile.Definition{d})
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Register(wfs[0]); err != nil {
		f.Fatal(err)
	}
	srv, err := NewHandler(c, Options{MaxBody: fuzzMaxBody,
		Tokens: []Token{{Name: "form", Secret: ingestToken, Scopes: []Scope{ScopeIngest}}}})
	if err != nil {
		f.Fatal(err)
	}
	return srv
}

// FuzzStartRun posts any body under any Idempotency-Key (or none, the run key then
// derived from the body) to POST /v1/workflows/website-lead/runs and checks the answers:
// never a server error, a 201 only for a valid key and a JSON body in UTF-8 without a
// duplicate member, a refused key or body
// a 4xx problem, and the same request again answers with the same run, marked replayed.
func FuzzStartRun(f *testing.F) {
	for _, s := range []struct{ key, body string }{
		{"form-8812", `{"submission_id": 8812, "email": "ana@example.com"}`},
		{"", `{"submission_id": "s-1"}`},
		{"", `{"submission_id": ""}`},
		{"", `{"submission_id": {"a": 1}}`},
		{"", `{"email": "x"}`},
		{"form-1", `{}`},
		{"form-2", `{"submission_id": null}`},
		{" lead", `{"submission_id": 1}`},
		{"a\tb", `{"submission_id": 1}`},
		{"", `not json`},
		{"form-3", `{"submission_id": 1`},
		{"form-4", `[1, 2]`},
		{"form-5", `"text"`},
		{"form-6", ``},
		{"ключ", `{"submission_id": 1e400}`},
		{"form-7", `{"submission_id": 1, "submission_id": 2}`},
		{"form-8", `{"submission_id": 1} trailing`},
		{"", `{"submission_id": " padded "}`},
		{"", `{"submission_id": "` + string(bytes.Repeat([]byte("k"), 300)) + `"}`},
		{"form-9", `{"submission_id": 9, "pad": "` + string(bytes.Repeat([]byte("p"), fuzzMaxBody)) + `"}`},
		{" bad key ", `{"submission_id": 9, "pad": "` + string(bytes.Repeat([]byte("p"), fuzzMaxBody)) + `"}`},
	} {
		f.Add(s.key, []byte(s.body))
	}
	h := fuzzHandler(f)
	post := func(key string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/workflows/website-lead/runs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ingestToken)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		if !validHeaderValue(key) {
			return // not something a client can send
		}
		first := post(key, body)
		switch {
		case first.Code >= 500:
			t.Fatalf("key %q body %q: %d %s", key, body, first.Code, first.Body)
		case first.Code == http.StatusCreated:
			if !json.Valid(body) {
				t.Fatalf("key %q: a body that is not JSON was accepted: %q", key, body)
			}
			if !utf8.Valid(body) {
				t.Fatalf("key %q: a body that is not UTF-8 was accepted: %q", key, body)
			}
			if hasDuplicateMember(body) {
				t.Fatalf("key %q: a body with a duplicate member was accepted: %q", key, body)
			}
			var run createdRun
			if err := json.Unmarshal(first.Body.Bytes(), &run); err != nil {
				t.Fatalf("201 answer %s: %v", first.Body, err)
			}
			if err := onceflow.ValidateKey("run key", run.RunKey); err != nil || (key != "" && run.RunKey != key) {
				t.Fatalf("key %q body %q: started run key %q (%v)", key, body, run.RunKey, err)
			}
			again := post(key, body)
			if again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
				t.Fatalf("the same request again: %d replayed %q %s; first %s", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body, first.Body)
			}
		case first.Code >= 400:
			if ct := first.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("key %q body %q: %d with Content-Type %q, want a problem", key, body, first.Code, ct)
			}
			if key != "" && onceflow.ValidateKey("k", key) == nil && json.Valid(body) && first.Code != http.StatusBadRequest &&
				first.Code != http.StatusUnprocessableEntity && first.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("key %q body %q: %d %s", key, body, first.Code, first.Body)
			}
		default:
			t.Fatalf("key %q body %q: unexpected status %d", key, body, first.Code)
		}
		if key != "" && onceflow.ValidateKey("k", key) != nil && len(body) <= fuzzMaxBody && first.Code != http.StatusBadRequest {
			t.Fatalf("invalid key %q: %d %s, want 400", key, first.Code, first.Body)
		}
	})
}

// hasDuplicateMember reports whether a JSON text has an object with two members of the same
// name (at any depth).
func hasDuplicateMember(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		key    bool // the next string token is a member name
		seen   map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, key: true, seen: map[string]bool{}})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.object && top.key {
				if top.seen[v] {
					return true
				}
				top.seen[v] = true
				top.key = false
				continue
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}

// validHeaderValue reports whether v can be sent as an HTTP header value.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
