package steps

import (
	"sort"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// Template is a parsed template of a workflow file: text with fields such as
// {input.email}, {steps.crm.output.id}, {run.key} and {env.CRM_URL}. A field whose value
// is missing is an error when it renders, never an empty string: an effect is never sent
// with a value it did not mean to have.
type Template struct {
	t *keytmpl.Template
}

// ParseTemplate parses src.
func ParseTemplate(src string) (*Template, error) {
	t, err := keytmpl.Parse(src)
	if err != nil {
		return nil, err
	}
	return &Template{t: t}, nil
}

// Fields lists the fields the template reads, such as "input.email" and "env.CRM_URL".
func (t *Template) Fields() []string { return t.t.Fields() }

// Render renders the template over the step's data (sc.TemplateData) and, for {env.NAME},
// env; nil env reads no variable.
func (t *Template) Render(sc *onceflow.StepContext, env func(string) (string, bool)) (string, error) {
	data, err := sc.TemplateData()
	if err != nil {
		return "", err
	}
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	var vars []string
	for _, f := range t.t.Fields() {
		if name, ok := strings.CutPrefix(f, "env."); ok {
			vars = append(vars, name)
		}
	}
	if len(vars) > 0 {
		if _, err := keytmpl.AddEnv(data, vars, env); err != nil {
			return "", err
		}
	}
	return t.t.Render(data)
}

// Strings calls fn with every string of a decoded YAML value (a request body, a message),
// the keys of mappings in order: the templates a kind's Walk reports.
func Strings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			Strings(x[k], fn)
		}
	case []any:
		for _, e := range x {
			Strings(e, fn)
		}
	}
}
