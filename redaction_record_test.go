package onceflow_test

import (
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
)

// An engine records its workflows' personal-data fields when it works; a client that has
// not registered a workflow masks its runs by them once it loads them, and a client that
// registered it masks by its own definition. A changed definition is recorded again.
func TestRecordedRedactionMasksWithoutTheDefinition(t *testing.T) {
	b := setup(t)
	b.register(t, onceflow.Workflow{Name: "signup", Redact: []string{"email"}, Steps: []onceflow.Step{{ID: "crm", Do: noop}}})
	run, err := b.client.Start(b.ctx, "signup", "s-1", map[string]any{"email": "ada@example.org", "phone": "+4915100001"})
	if err != nil {
		t.Fatal(err)
	}
	b.work(t)

	input := func(c *onceflow.Client) string {
		t.Helper()
		rd, err := c.RunGet(b.ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return string(rd.Run.Input)
	}
	reader, err := onceflow.New(onceflow.Config{Store: b.store})
	if err != nil {
		t.Fatal(err)
	}
	if got := input(reader); !strings.Contains(got, "ada@example.org") {
		t.Fatalf("before loading, a reader without the definition shows %s; the test needs the field unmasked there", got)
	}
	if err := reader.LoadRecordedRedaction(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := input(reader); strings.Contains(got, "ada@example.org") || !strings.Contains(got, "+4915100001") {
		t.Fatalf("a reader that loaded the recorded fields shows %s; want email masked, phone shown", got)
	}

	// The definition changes (a reload): the next Work records the new fields.
	if _, err := b.client.ReplaceDefinitions([]onceflow.Workflow{{Name: "signup", Redact: []string{"phone"}, Steps: []onceflow.Step{{ID: "crm", Do: noop}}}}, nil); err != nil {
		t.Fatal(err)
	}
	b.work(t)
	later, err := onceflow.New(onceflow.Config{Store: b.store})
	if err != nil {
		t.Fatal(err)
	}
	if err := later.LoadRecordedRedaction(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := input(later); !strings.Contains(got, "ada@example.org") || strings.Contains(got, "+4915100001") {
		t.Fatalf("after the reload, a reader shows %s; want phone masked as the new definition says", got)
	}

	// A client that registered the workflow masks by its own definition.
	own, err := onceflow.New(onceflow.Config{Store: b.store})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Register(onceflow.Workflow{Name: "signup", Redact: []string{"email"}, Steps: []onceflow.Step{{ID: "crm", Do: noop}}}); err != nil {
		t.Fatal(err)
	}
	if err := own.LoadRecordedRedaction(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := input(own); strings.Contains(got, "ada@example.org") || !strings.Contains(got, "+4915100001") {
		t.Fatalf("a client with its own definition shows %s; want it masked by that definition", got)
	}
}
