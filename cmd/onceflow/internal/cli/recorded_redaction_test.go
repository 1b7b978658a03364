package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
)

// runs show, runs list, audit and review list mask a workflow's declared personal data
// without its workflow file: the engine that ran it recorded the workflow's redact:
// fields in the database. Another workflow's field of the same name is not masked.
func TestReadCommandsMaskRecordedFieldsWithoutWorkflowFiles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []onceflow.Workflow{
		{Name: "signup", Redact: []string{"email", "customer.name"}, Steps: []onceflow.Step{{ID: "crm", EffectKey: "crm:{input.id}",
			Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return nil, onceflow.PermanentError(errorString("the CRM refused ada.canary@example.org"))
			}}}},
		{Name: "newsletter", Steps: []onceflow.Step{{ID: "send", Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}},
	} {
		if err := c.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Start(ctx, "signup", "s-1", map[string]any{"id": "1", "email": "ada.canary@example.org", "customer": map[string]any{"name": "Ada Canary-Lovelace"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "newsletter", "n-1", map[string]any{"email": "list-public@example.org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	db := "sqlite://" + path
	for _, args := range [][]string{
		{"runs", "show", "1"},
		{"runs", "show", "1", "--json"},
		{"runs", "list", "--json"},
		{"audit", "--run", "1"},
		{"review", "list", "--json"},
	} {
		r := runOK(t, append(args, "--db", db)...)
		for _, canary := range []string{"ada.canary@example.org", "Canary-Lovelace"} {
			if strings.Contains(r.stdout, canary) {
				t.Errorf("onceflow %s, without --workflows, shows %s:\n%s", strings.Join(args, " "), canary, r.stdout)
			}
		}
	}
	if r := runOK(t, "runs", "show", "2", "--json", "--db", db); !strings.Contains(r.stdout, "list-public@example.org") {
		t.Errorf("a workflow that declares no email field has it masked:\n%s", r.stdout)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
