package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// parkedSecretRun stores a run of pay whose charge step was refused with an error that
// repeats the input's card number and password, written by a client that masks nothing it
// was not told to, so the database holds them in the step, its attempt and its audit
// event.
func parkedSecretRun(t *testing.T) (db string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Register(onceflow.Workflow{Name: "pay", Steps: []onceflow.Step{{ID: "charge", EffectKey: "charge:{input.id}",
		Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(fmt.Errorf("gateway refused holder 4111-canary-444 with secret pw-canary-111"))
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "pay", "p-1", map[string]any{"id": "1", "holder": "4111-canary-444", "pin": "pw-canary-111"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := st.EventList(ctx, store.EventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	stored := false
	for _, e := range evs {
		stored = stored || strings.Contains(string(e.Detail), "pw-canary-111")
	}
	if !stored {
		t.Fatal("the audit trail does not hold the error as written; the test needs it")
	}
	return "sqlite://" + path
}

// onceflow audit and runs list read through the client as the other commands do, masked
// with the fields of ONCEFLOW_REDACT_FIELDS (audit printed the stored details and
// explanations as they were, runs list --json the inputs); --unmasked prints them and the
// audit trail says who read them.
func TestAuditAndRunsListMask(t *testing.T) {
	t.Setenv(envRedactFields, "holder, pin")
	db := parkedSecretRun(t)
	for _, args := range [][]string{
		{"audit", "--db", db, "--run", "1"},
		{"audit", "--db", db, "--run", "1", "--json"},
		{"audit", "--db", db, "--key", "charge:1", "--json"},
		{"runs", "list", "--db", db, "--json"},
	} {
		r := runOK(t, args...)
		for _, c := range []string{"4111-canary-444", "pw-canary-111"} {
			if strings.Contains(r.stdout, c) {
				t.Errorf("onceflow %s shows %s:\n%s", strings.Join(args, " "), c, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "[redacted]") {
			t.Errorf("onceflow %s masks nothing:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	r := runOK(t, "audit", "--db", db, "--run", "1", "--json", "--unmasked", "--actor", "cli:ops-cy")
	if !strings.Contains(r.stdout, "pw-canary-111") {
		t.Fatalf("audit --unmasked masked the output:\n%s", r.stdout)
	}
	st := openSQLite(t, strings.TrimPrefix(db, "sqlite://"))
	defer st.Close()
	evs, err := st.EventList(context.Background(), store.EventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var readers []string
	for _, e := range evs {
		if e.Type == store.EventDataUnmasked {
			readers = append(readers, e.Actor+" "+string(e.Detail))
		}
	}
	if want := `cli:ops-cy {"read":"audit events of run 1"}`; strings.Join(readers, "\n") != want {
		t.Fatalf("unmasked reads audited as %q, want %q", readers, want)
	}
}
