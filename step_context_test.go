package onceflow

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/keytmpl"
)

// TestKeyDataDecodesWhatTheTemplateReads: a claim builds an effect key from the parts of
// the template data its template reads; the input and the outputs are decoded only for a
// template that reads them, and render as TemplateData renders them.
func TestKeyDataDecodesWhatTheTemplateReads(t *testing.T) {
	sc := &StepContext{Input: json.RawMessage(`{"x": 9007199254740993}`), RunKey: "k", RunID: 7, Workflow: "w", Step: "s",
		Outputs: map[string]json.RawMessage{"a": json.RawMessage(`{"id": "A1"}`)}}
	for _, c := range []struct {
		tmpl  string
		roots templateRoots
		want  string
	}{
		{"{run.key}-{run.id}-{workflow}-{step}", templateRoots{}, "k-7-w-s"},
		{"{input.x}", templateRoots{input: true}, "9007199254740993"},
		{"{steps.a.output.id}:{input.x}", templateRoots{input: true, steps: true}, "A1:9007199254740993"},
	} {
		tp, err := keytmpl.Parse(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := rootsOf(tp); got != c.roots {
			t.Errorf("%s: roots %+v, want %+v", c.tmpl, got, c.roots)
		}
		data, err := sc.templateData(rootsOf(tp))
		if err != nil {
			t.Fatal(err)
		}
		full, err := sc.TemplateData()
		if err != nil {
			t.Fatal(err)
		}
		got, err := tp.Render(data)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := tp.Render(full); got != c.want || got != want {
			t.Errorf("%s renders %q, want %q (TemplateData: %q)", c.tmpl, got, c.want, want)
		}
	}
	// What a template does not read is not decoded.
	sc.Input, sc.Outputs = json.RawMessage(`not JSON`), map[string]json.RawMessage{"a": json.RawMessage(`{`)}
	if _, err := sc.templateData(templateRoots{}); err != nil {
		t.Errorf("a template that reads neither input nor steps: %v", err)
	}
	if _, err := sc.templateData(templateRoots{input: true}); err == nil || !strings.Contains(err.Error(), "decode input") {
		t.Errorf("a template that reads the input: %v, want the input's decoding error", err)
	}
	if _, err := sc.templateData(templateRoots{steps: true}); err == nil || !strings.Contains(err.Error(), `output of step "a"`) {
		t.Errorf("a template that reads steps: %v, want the output's decoding error", err)
	}
}
