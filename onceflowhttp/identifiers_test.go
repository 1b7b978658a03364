package onceflowhttp

import (
	"net/http"
	"strings"
	"testing"
)

// contactYAML derives its entity from a form field.
const contactYAML = `name: contact
entity: "contact:{input.email}"
steps:
  - id: crm
    kind: go
    func: noop
`

// A form field that lands in the entity and breaks the key rules is a 422 naming the
// field, with a short, escaped excerpt: never a 500 (a 3 KB entity is an index row
// PostgreSQL refuses; a NUL a text it cannot store), and nothing is stored.
func TestEntityFromAFormFieldIsChecked(t *testing.T) {
	b := setup(t, contactYAML)
	for i, email := range []string{strings.Repeat("a", 3000) + "@example.com", `ana\u0000@example.com`, `ana\u001b[2J@example.com`,
		`ana@example.com\nforged`, `ana\u202e@example.com`, `ana\u200b@example.com`} {
		a := b.do("POST", "/v1/workflows/contact/runs", ingestToken, map[string]string{"Idempotency-Key": "c-" + string(rune('a'+i))},
			`{"email": "`+email+`"}`)
		wantStatus(t, a, http.StatusUnprocessableEntity, "invalid-input")
		if a.json["field"] != "input.email" || !strings.Contains(a.body, "entity") || len(a.body) > 1000 {
			t.Fatalf("%.40q: the problem does not name the field, or echoes too much (%d bytes): %.300s", email, len(a.body), a.body)
		}
	}
	if n := len(b.runs()); n != 0 {
		t.Fatalf("%d runs, want none", n)
	}
	wantStatus(t, b.do("POST", "/v1/workflows/contact/runs", ingestToken, map[string]string{"Idempotency-Key": "c-ok"}, `{"email": "ana@example.com"}`), http.StatusCreated, "")
}

// An Idempotency-Key is refused without echoing it whole, two of them are refused, and a
// key with an invisible character is refused: it would start a second run that looks
// like the first.
func TestIdempotencyKeyHeaderIsChecked(t *testing.T) {
	b := setup(t)
	body := `{"submission_id": 1}`
	t.Run("a 60 KB key is not echoed", func(t *testing.T) {
		a := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": strings.Repeat("k", 60*1024)}, body)
		wantStatus(t, a, http.StatusBadRequest, "invalid-idempotency-key")
		if len(a.body) > 600 || !strings.Contains(a.body, "61440 bytes") {
			t.Fatalf("the refusal of a 60 KB key is %d bytes: %.300s", len(a.body), a.body)
		}
	})
	t.Run("invisible characters", func(t *testing.T) {
		wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-1"}, body), http.StatusCreated, "")
		for _, key := range []string{"form-1\u200b", "form\u200d-1", "\ufeffform-1", "form-1\u202e", "form-1\u2066", "form\u2060-1"} {
			a := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": key}, body)
			wantStatus(t, a, http.StatusBadRequest, "invalid-idempotency-key")
			if strings.ContainsAny(a.body, "\u200b\u200d\ufeff\u202e\u2066\u2060") {
				t.Fatalf("the refusal of %q holds the character raw: %s", key, a.body)
			}
		}
	})
	t.Run("two headers", func(t *testing.T) {
		req, err := http.NewRequest("POST", b.url+"/v1/workflows/website-lead/runs", strings.NewReader(`{"submission_id": 2}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+ingestToken)
		req.Header.Add("Idempotency-Key", "form-2")
		req.Header.Add("Idempotency-Key", "form-3")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("two Idempotency-Key headers: %d, want 400", resp.StatusCode)
		}
	})
	if n := len(b.runs()); n != 1 {
		t.Fatalf("%d runs, want the one of form-1", n)
	}
}
