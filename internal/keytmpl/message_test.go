package keytmpl

import (
	"strings"
	"testing"
)

func TestMessage(t *testing.T) {
	vars := EnvVars{}
	m, err := CompileMessage(map[string]string{"X-Order": "{input.submission_id}"},
		map[string]any{"id": "{input.submission_id}", "to": []any{"{input.email}"}}, vars)
	if err != nil {
		t.Fatal(err)
	}
	hs, body, err := m.Render(data(t))
	if err != nil {
		t.Fatal(err)
	}
	if hs["X-Order"] != "8812" {
		t.Errorf("header = %q, want 8812", hs["X-Order"])
	}
	b := body.(map[string]any)
	if to := b["to"].([]any); to[0] != "a@example.com" {
		t.Errorf("body to = %v", to)
	}
	if len(vars) != 0 {
		t.Errorf("vars = %v, want none", vars)
	}

	if _, err := CompileMessage(map[string]string{"X-Bad": "{input.x"}, nil, vars); err == nil || !strings.HasPrefix(err.Error(), "header X-Bad: ") {
		t.Errorf("bad header: err = %v, want it to name the header", err)
	}
	if _, err := CompileMessage(nil, map[string]any{"a": "{input.x"}, vars); err == nil || !strings.HasPrefix(err.Error(), "body: a: ") {
		t.Errorf("bad body: err = %v, want it to name the body field", err)
	}
	if _, err := CompileMessage(nil, "{env.SECRET}", vars); err != nil || len(vars) != 1 {
		t.Errorf("env: err = %v, vars = %v; want the variable recorded for the step to refuse", err, vars)
	}
}
