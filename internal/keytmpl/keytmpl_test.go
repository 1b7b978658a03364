package keytmpl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func data(t *testing.T) map[string]any {
	t.Helper()
	in, err := Decode([]byte(`{"submission_id": 8812, "email": "a@example.com", "empty": "", "nothing": null,
		"customer": {"id": "c_1"}, "items": ["x", "y"], "big": 12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"input": in, "run": map[string]any{"key": "sub-8812"}}
}

func TestRender(t *testing.T) {
	tests := []struct{ src, want string }{
		{"lead-create:{input.submission_id}", "lead-create:8812"},
		{"{run.key}/{input.customer.id}", "sub-8812/c_1"},
		{"item:{input.items.1}", "item:y"},
		{"big:{input.big}", "big:12345678901234567890"},
		{"literal {{braces}}", "literal {braces}"},
		{"no fields", "no fields"},
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.src, err)
		}
		got, err := tpl.Render(data(t))
		if err != nil {
			t.Fatalf("Render(%q): %v", tt.src, err)
		}
		if got != tt.want {
			t.Errorf("Render(%q) = %q, want %q", tt.src, got, tt.want)
		}
	}
}

func TestRenderNamesTheBadField(t *testing.T) {
	tests := []struct{ src, field, problem string }{
		{"k:{input.missing}", "input.missing", "is missing"},
		{"k:{input.nothing}", "input.nothing", "is null"},
		{"k:{input.empty}", "input.empty", "is an empty string"},
		{"k:{input.customer}", "input.customer", "is an object"},
		{"k:{input.items}", "input.items", "is a list"},
		{"k:{input.items.7}", "input.items.7", "is missing"},
		{"k:{input.email.x}", "input.email.x", "is missing"},
		{"k:{steps.crm.output.id}", "steps.crm.output.id", "is missing"},
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tpl.Render(data(t))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("Render(%q) error = %v, want a *FieldError", tt.src, err)
		}
		if fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
			t.Errorf("Render(%q) = field %q problem %q, want %q %q", tt.src, fe.Field, fe.Problem, tt.field, tt.problem)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{"a{", "a}", "{}", "{input..x}", "{input.a b}"} {
		if _, err := Parse(src); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", src)
		}
	}
}

func TestValueKeepsJSONTypes(t *testing.T) {
	d := data(t)
	for src, want := range map[string]string{
		"{input.submission_id}":    "8812",
		"{input.customer}":         "map[id:c_1]",
		"id-{input.submission_id}": "id-8812",
	} {
		tpl, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tpl.Value(d)
		if err != nil {
			t.Fatalf("Value(%q): %v", src, err)
		}
		if got := fmt.Sprint(v); got != want {
			t.Errorf("Value(%q) = %v, want %v", src, got, want)
		}
	}
	tpl, _ := Parse("{input.nothing}")
	if _, err := tpl.Value(d); err == nil {
		t.Error("a null field rendered")
	}
}

func TestRenderURLEncodesPerComponent(t *testing.T) {
	data := map[string]any{
		"input": map[string]any{"p": "../a b", "q": "x&y=1#f", "path": "a/b?c=1", "dot": ".."},
		"env":   map[string]any{"BASE": "https://api.example.com/v1"},
	}
	for src, want := range map[string]string{
		"{env.BASE}/items/{input.p}":                 "https://api.example.com/v1/items/..%2Fa%20b",
		"{env.BASE}/items?q={input.q}&n=1":           "https://api.example.com/v1/items?q=x%26y%3D1%23f&n=1",
		"{env.BASE}/{input.dot}/x":                   "https://api.example.com/v1/%2E%2E/x",
		"{env.BASE}/files/{+input.path}&d={input.p}": "https://api.example.com/v1/files/a/b?c=1&d=..%2Fa+b",
		"{env.BASE}/x#{input.p}":                     "https://api.example.com/v1/x#..%2Fa%20b",
	} {
		tm, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tm.RenderURL(data)
		if err != nil || got != want {
			t.Errorf("RenderURL(%s) = %q, %v; want %q", src, got, err, want)
		}
	}
	// Render, for keys and bodies, leaves values alone and reads {+field} as {field}.
	tm, _ := Parse("k:{+input.path}")
	if got, _ := tm.Render(data); got != "k:a/b?c=1" || tm.Fields()[0] != "input.path" || !tm.Raw() {
		t.Errorf("Render = %q, fields %v", got, tm.Fields())
	}
}

// Shape shows what a template's literal parts make of any value; RenderFunc passes each
// value through a function that may refuse it.
func TestShapeAndRenderFunc(t *testing.T) {
	tpl, err := Parse("orders.{input.customer.id}.{run.key}")
	if err != nil {
		t.Fatal(err)
	}
	if got := tpl.Shape("x"); got != "orders.x.x" {
		t.Errorf("Shape = %q", got)
	}
	var fields []string
	got, err := tpl.RenderFunc(data(t), func(field, v string) (string, error) {
		fields = append(fields, field)
		return strings.ToUpper(v), nil
	})
	if err != nil || got != "orders.C_1.SUB-8812" || strings.Join(fields, " ") != "input.customer.id run.key" {
		t.Errorf("RenderFunc = %q, %v, fields %v", got, err, fields)
	}
	refused := errors.New("refused")
	if _, err := tpl.RenderFunc(data(t), func(string, string) (string, error) { return "", refused }); !errors.Is(err, refused) {
		t.Errorf("RenderFunc with a refusal: %v", err)
	}
}
