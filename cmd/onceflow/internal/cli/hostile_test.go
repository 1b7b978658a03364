package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// secretRun stores one completed run whose output holds what the API masks: a password,
// an API key and an echoed bearer token.
func secretRun(t *testing.T) (db string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Register(onceflow.Workflow{Name: "signup", Steps: []onceflow.Step{{ID: "crm", EffectKey: "crm:{input.id}",
		Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return map[string]any{"id": 7, "password": "pw-canary-111", "api_key": "key-canary-222",
				"echo": map[string]any{"authorization": "Bearer tok-canary-333"}}, nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "signup", "s-1", map[string]any{"id": "1", "card": "4111-canary-444"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	return "sqlite://" + path
}

var canaries = []string{"pw-canary-111", "key-canary-222", "tok-canary-333", "4111-canary-444"}

func TestRunsShowAndKeysShowMask(t *testing.T) {
	db := secretRun(t)
	for _, args := range [][]string{
		{"runs", "show", "--db", db, "--json", "1"},
		{"runs", "show", "--db", db, "1"},
		{"keys", "show", "--db", db, "--json", "crm:1"},
		{"keys", "show", "--db", db, "crm:1"},
	} {
		r := runOK(t, args...)
		for _, c := range canaries {
			if strings.Contains(r.stdout, c) {
				t.Errorf("onceflow %s shows %s:\n%s", strings.Join(args, " "), c, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "[redacted]") {
			t.Errorf("onceflow %s masks nothing:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	// An operator who needs the data asks for it, and the audit trail says who did.
	r := runOK(t, "runs", "show", "--db", db, "--json", "--unmasked", "--actor", "cli:ops-ana", "1")
	if !strings.Contains(r.stdout, "pw-canary-111") {
		t.Fatalf("--unmasked masked the output:\n%s", r.stdout)
	}
	runOK(t, "keys", "show", "--db", db, "--unmasked", "--actor", "cli:ops-ben", "crm:1")
	st, err := sqlite.Open(context.Background(), strings.TrimPrefix(db, "sqlite://"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.EventList(context.Background(), store.EventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string]bool{}
	for _, e := range evs {
		if e.Type == store.EventDataUnmasked {
			actors[e.Actor] = true
		}
	}
	if !actors["cli:ops-ana"] || !actors["cli:ops-ben"] {
		t.Fatalf("unmasked reads audited by %v", actors)
	}
}
