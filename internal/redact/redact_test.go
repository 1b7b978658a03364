package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

func mustMasker(t *testing.T, o Options) *Masker {
	t.Helper()
	m, err := NewMasker(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestText(t *testing.T) {
	m := mustMasker(t, Options{Values: []string{"s3cr3t-token", "Ana@Example.com", "abc", "Tom & Jerry"}})
	tests := []struct{ in, want string }{
		{"Bearer s3cr3t-token", "Bearer [redacted]"},
		{"to ana@example.COM refused", "to [redacted] refused"},                    // case folded
		{`{"to":"ana%40example.com"}`, `{"to":"[redacted]"}`},                      // query-escaped
		{`"Tom \u0026 Jerry"`, `"[redacted]"`},                                     // JSON-escaped by encoding/json
		{"abc stays: shorter than MinLength", "abc stays: shorter than MinLength"}, // too short to mask
		{"s3cr3t-tokens3cr3t-token", "[redacted][redacted]"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := m.Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// The mask itself is never masked again by a value it contains.
	m2 := mustMasker(t, Options{Values: []string{"acted", "redacted-secret"}})
	if got := m2.Text("x redacted-secret acted"); got != "x [redacted] [redacted]" {
		t.Errorf("got %q", got)
	}
	var nilM *Masker
	if got := nilM.Text("anything"); got != "anything" {
		t.Errorf("nil masker changed text: %q", got)
	}
}

func TestJSONFieldsAndNames(t *testing.T) {
	m := mustMasker(t, Options{Fields: []string{"email", "customer.name", "phone"}})
	in := `{"email": "a@b.co", "customer": {"name": "Ana", "Email": "x@y.z"}, "product": {"name": "Kettle"},
		"items": [{"customer": {"name": "Bo"}}], "api_token": "t", "client_secret": "s", "phone": 351900000000, "amount": 12.50}`
	got := string(m.JSON([]byte(in)))
	want := `{"amount":12.50,"api_token":"[redacted]","client_secret":"[redacted]","customer":{"Email":"[redacted]","name":"[redacted]"},"email":"[redacted]","items":[{"customer":{"name":"[redacted]"}}],"phone":"[redacted]","product":{"name":"Kettle"}}`
	if got != want {
		t.Fatalf("JSON:\n got %s\nwant %s", got, want)
	}
	if got := string(m.JSON([]byte("not json: a@b.co"))); got != `"not json: a@b.co"` {
		t.Errorf("non-JSON: %s", got)
	}
}

func TestPolicyForRunMasksValuesFoundAtFields(t *testing.T) {
	p, err := New([]string{"whsec_0123456789"}, []string{"email"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetWorkflow("lead", []string{"customer.name", "phone"}); err != nil {
		t.Fatal(err)
	}
	input := []byte(`{"email": "ana@example.com", "customer": {"name": "Ana Lima"}, "phone": 351900000000, "note": "hi"}`)
	output := []byte(`{"crm": {"contact": {"phone": "+351 900"}}}`)
	m := p.ForRun("lead", input, output)
	text := "550 ana@example.com: no such user (Ana Lima, 351900000000, +351 900) sig whsec_0123456789"
	if got := m.Text(text); strings.Contains(got, "ana@") || strings.Contains(got, "Ana Lima") || strings.Contains(got, "3519") ||
		strings.Contains(got, "+351 900") || strings.Contains(got, "whsec") {
		t.Fatalf("Text = %q", got)
	}
	// Another workflow has only the global fields.
	other := p.ForRun("other", input)
	if got := other.Text("Ana Lima"); got != "Ana Lima" {
		t.Errorf("workflow fields leaked into another workflow: %q", got)
	}
	if got := other.Text("ana@example.com"); got != Mask {
		t.Errorf("global field value not masked: %q", got)
	}
	// The stored document is not changed by masking a copy of it.
	masked := m.JSON(input)
	if !bytes.Contains(input, []byte("ana@example.com")) || bytes.Contains(masked, []byte("ana@example.com")) {
		t.Errorf("input %s masked %s", input, masked)
	}
	var nilP *Policy
	if got := nilP.ForRun("x", input).Text("ana@example.com"); got != "ana@example.com" {
		t.Errorf("nil policy masked %q", got)
	}
}

func TestFieldPathsAreChecked(t *testing.T) {
	for _, bad := range []string{"", "a..b", ".a", "a[0]", "{input.email}"} {
		if CheckField(bad) == nil {
			t.Errorf("CheckField(%q) = nil", bad)
		}
	}
	if _, err := New(nil, []string{"ok", "no..pe"}); err == nil {
		t.Error("New accepted an invalid field")
	}
}

func TestExcerptAndTrim(t *testing.T) {
	m := mustMasker(t, Options{Values: []string{"tok_live_abcdef"}, Fields: []string{"email"}, Names: []string{"ssn"}})
	got := m.Excerpt([]byte(`{"id": 7, "email": "a@b.co", "user_ssn": "1", "echo": "Bearer tok_live_abcdef"}`), 0)
	if got != `{"echo":"Bearer [redacted]","email":"[redacted]","id":7,"user_ssn":"[redacted]"}` {
		t.Errorf("Excerpt = %s", got)
	}
	if got := m.Excerpt([]byte("plain tok_live_abcdef \xff"), 0); got != "plain [redacted] \uFFFD" {
		t.Errorf("Excerpt = %q", got)
	}
	if got := Trim("héllo", 2); got != "h…" {
		t.Errorf("Trim = %q", got)
	}
	if got := Trim("hello", 0); got != "hello" {
		t.Errorf("Trim = %q", got)
	}
}

func TestError(t *testing.T) {
	m := mustMasker(t, Options{Values: []string{"hunter22"}})
	base := &fs.PathError{Op: "open", Path: "/x/hunter22", Err: fs.ErrNotExist}
	err := m.Error(base)
	if strings.Contains(err.Error(), "hunter22") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Error = %v", err)
	}
	plain := errors.New("nothing secret")
	if m.Error(plain) != plain {
		t.Error("an error without values was wrapped")
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	m := mustMasker(t, Options{Values: []string{"s3cr3t-token"}})
	log := slog.New(Handler(slog.NewJSONHandler(&buf, nil), m)).With("bound", "x s3cr3t-token")
	log.WithGroup("g").Info("sending s3cr3t-token", "err", errors.New("bad s3cr3t-token"), "list", []string{"s3cr3t-token"},
		slog.Group("req", "auth", "Bearer s3cr3t-token"), "n", 3)
	out := buf.String()
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("secret in log: %s", out)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	g := rec["g"].(map[string]any)
	if rec["msg"] != "sending [redacted]" || rec["bound"] != "x [redacted]" || g["err"] != "bad [redacted]" || g["n"] != float64(3) {
		t.Fatalf("record %s", out)
	}
	if Handler(slog.DiscardHandler, nil) != slog.DiscardHandler {
		t.Error("a nil masker should not wrap")
	}
}

// deepDoc is {"x":{"a":{"a":…"v"…}}} nested depth levels.
func deepDoc(depth int) []byte {
	var b strings.Builder
	b.WriteString(`{"x":`)
	for i := 0; i < depth-1; i++ {
		b.WriteString(`{"a":`)
	}
	b.WriteString(`"value-1"`)
	b.WriteString(strings.Repeat("}", depth))
	return []byte(b.String())
}

// Masking a deeply nested document costs memory in proportion to its size: the paths it
// builds share one stack instead of copying it at every level.
func TestDeepDocumentsMaskInLinearMemory(t *testing.T) {
	doc := deepDoc(5000)
	p, err := New([]string{"secret-value"}, []string{"email", "customer.name"})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := p.ForRun("wf", doc)
	out := m.JSON(doc)
	runtime.ReadMemStats(&after)
	if !strings.Contains(string(out), "value-1") {
		t.Fatalf("the leaf was lost: %.80s", out)
	}
	// A copy of the path at every level would allocate about 5000²/2 strings (200 MB)
	// per walk; the document itself is 25 KB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Fatalf("masking a %d-byte document allocated %d MB", len(doc), got>>20)
	}
}

// A secret URL is masked also where text shows only a part of it: an error naming the
// request by scheme, host and path, a query value, the password of its user.
func TestSecretURLPartsAreMasked(t *testing.T) {
	const hook = "http://127.0.0.1:9/services/T0001/B0001/SECRETpathTOKEN42?channel=ops&sig=QuerySecret0099"
	m := mustMasker(t, Options{Values: []string{hook, "https://user:pw1234@db.example.com:5432/shop"}})
	for _, text := range []string{
		"POST http://127.0.0.1:9/services/T0001/B0001/SECRETpathTOKEN42: not sent: connection refused",
		`{"error": "unknown webhook SECRETpathTOKEN42"}`,
		"signature QuerySecret0099 expired",
		"login for user failed with pw1234",
	} {
		got := m.Text(text)
		for _, leak := range []string{"SECRETpathTOKEN42", "QuerySecret0099", "pw1234"} {
			if strings.Contains(got, leak) {
				t.Errorf("Text(%q) = %q: shows %s", text, got, leak)
			}
		}
	}
	// The fixed words of the path are not secrets.
	if got := m.Text("see /services/ for help"); got != "see /services/ for help" {
		t.Errorf("a plain path word was masked: %q", got)
	}
}

// A URL that is configuration keeps its host and fixed words; parts that look like
// credentials are returned to be masked on their own.
func TestCredentialParts(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"http://127.0.0.1:9/services/T0001/B0001/SECRETpathTOKEN42?channel=ops", []string{"SECRETpathTOKEN42"}},
		{"https://crm.example.com", nil},
		{"https://crm.example.com/api/v2/leads?region=eu-west", nil},
		{"https://admin:pw@db.example.com/Accounts", []string{"pw"}},
		{"https://hooks.example.com/catch/123456/abcdef?sig=0123abcd#frag", []string{"0123abcd"}},
		{"https://example.com/t/ThisIsALongOpaqueTokenValue", []string{"ThisIsALongOpaqueTokenValue"}},
		{"not a url", nil},
	} {
		if got := CredentialParts(tc.url); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("CredentialParts(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}
