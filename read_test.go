package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// Values a run holds that a reader with the policy of readBundle must never show.
const (
	canaryEmail  = "ada-canary@example.com"
	canaryPhone  = "+44-7700-canary"
	canarySecret = "sk_live_canary_0123456789"
)

var readCanaries = []string{canaryEmail, canaryPhone, canarySecret}

// readBundle stores a run of signup whose steps were executed by a client that masks
// nothing it was not told to: lookup completed with a phone number in its output, notify
// was refused with an error naming the e-mail address, the phone number and a secret. It
// returns that store with a second client on it, the reader, whose policy knows the
// secret and the workflow's personal-data fields — as the command and a server started
// with other settings read what a worker wrote.
func readBundle(t *testing.T) (b *bundle, reader *onceflow.Client, run *onceflow.Run) {
	t.Helper()
	b = setup(t)
	steps := func() []onceflow.Step {
		return []onceflow.Step{
			{ID: "lookup", EffectKey: "lookup:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return map[string]any{"phone": canaryPhone, "plan": "pro"}, nil
			}},
			{ID: "notify", Needs: []string{"lookup"}, EffectKey: "notify:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return nil, &onceflow.StepError{Class: onceflow.Permanent, ResponseStatus: 422,
					ResponseExcerpt: fmt.Sprintf(`{"to":%q,"error":"mailbox full"}`, canaryEmail),
					Err:             fmt.Errorf("mailbox %s refused (phone %s, key %s)", canaryEmail, canaryPhone, canarySecret)}
			}},
		}
	}
	b.register(t, onceflow.Workflow{Name: "signup", Entity: "user:{input.id}", Steps: steps()})
	run = b.start(t, "signup", "form-1", map[string]any{"id": "u1", "email": canaryEmail, "name": "Ada"})
	b.work(t)
	reader, err := onceflow.New(onceflow.Config{Store: b.store, ClockSync: -1, Clock: b.clock.Now,
		Redact: onceflow.Redaction{Secrets: []string{canarySecret}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Register(onceflow.Workflow{Name: "signup", Entity: "user:{input.id}", Redact: []string{"email", "phone"}, Steps: steps()}); err != nil {
		t.Fatal(err)
	}
	return b, reader, run
}

// shows reports the canaries v shows, encoded as JSON.
func shows(t *testing.T, v any) []string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, c := range readCanaries {
		// JSON escapes '+' nowhere, so the encoded text holds every value as written.
		if strings.Contains(string(raw), c) {
			found = append(found, c)
		}
	}
	return found
}

// Every read of the client is masked by its policy: the secret wherever it appears, and
// the values the run holds at personal-data fields (the input's e-mail address, the phone
// number a step output) in inputs, outputs, errors, responses, audit sentences and
// details, key results and replay plans. Identifiers stay as they are.
func TestReadsAreMasked(t *testing.T) {
	b, reader, run := readBundle(t)
	ctx := b.ctx
	read := map[string]func() (any, error){
		"RunList": func() (any, error) { return reader.RunList(ctx, onceflow.RunFilter{Workflow: "signup"}) },
		"RunGet":  func() (any, error) { return reader.RunGet(ctx, run.ID) },
		"ReviewList": func() (any, error) {
			return reader.ReviewList(ctx, onceflow.ReviewFilter{Workflow: "signup"})
		},
		"ReviewGet":    func() (any, error) { return reader.ReviewGet(ctx, run.ID, "notify") },
		"ReviewDetail": func() (any, error) { return reader.ReviewDetail(ctx, run.ID, "notify") },
		"Audit":        func() (any, error) { return reader.Audit(ctx, onceflow.AuditQuery{RunID: run.ID}) },
		"Key":          func() (any, error) { return reader.Key(ctx, "lookup:u1") },
		"ReviewPreview": func() (any, error) {
			return reader.ReviewPreview(ctx, onceflow.ReplayRequest{RunID: run.ID, Step: "notify",
				MergePatch: json.RawMessage(`{"email":"bob-canary@example.com"}`)})
		},
	}
	for name, f := range read {
		v, err := f()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if found := shows(t, v); len(found) > 0 {
			t.Errorf("%s shows %v", name, found)
		}
		raw, _ := json.Marshal(v)
		if name != "RunList" && !strings.Contains(string(raw), "[redacted]") {
			t.Errorf("%s masks nothing: %s", name, raw)
		}
		if strings.Contains(string(raw), "bob-canary") {
			t.Errorf("%s shows the corrected e-mail address: %s", name, raw)
		}
	}
	// What is masked is what it holds, not which run or step it is.
	d, err := reader.RunGet(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Run.Entity != "user:u1" || d.Run.RunKey != "form-1" || len(d.Steps) != 2 || d.Steps[1].EffectKey != "notify:u1" ||
		!strings.Contains(d.Steps[1].LastError, "mailbox [redacted] refused") || len(d.Attempts) != 2 {
		t.Fatalf("RunGet: %+v, steps %+v", d.Run, d.Steps)
	}
	var in map[string]any
	if err := json.Unmarshal(d.Run.Input, &in); err != nil || in["email"] != "[redacted]" || in["name"] != "Ada" {
		t.Fatalf("RunGet input %s", d.Run.Input)
	}
	// The writer's own client has no such policy: the stored data is as it was written.
	if found := shows(t, b.steps(t, run.ID)["notify"]); len(found) != 3 {
		t.Fatalf("the stored step holds %v; the test needs all three", found)
	}
}

// An unmasked read shows what is stored, and the audit trail says who read what, before
// anything is answered; without an actor nothing is read and nothing is recorded.
func TestUnmaskedReadsAreAudited(t *testing.T) {
	b, reader, run := readBundle(t)
	ctx := b.ctx
	d, err := reader.Unmasked("cli:ana").RunGet(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if found := shows(t, d); len(found) != len(readCanaries) {
		t.Fatalf("an unmasked read shows %v", found)
	}
	if _, err := reader.Unmasked("cli:ben").Key(ctx, "lookup:u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Unmasked("").Audit(ctx, onceflow.AuditQuery{RunID: run.ID}); err == nil {
		t.Fatal("an unmasked read without an actor was answered")
	}
	evs, err := b.store.EventList(ctx, store.EventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if e.Type == store.EventDataUnmasked {
			got = append(got, fmt.Sprintf("%s run %d %s %s", e.Actor, e.RunID, e.Workflow, e.Detail))
		}
	}
	want := []string{
		fmt.Sprintf(`cli:ana run %d signup {"read":"run %d"}`, run.ID, run.ID),
		fmt.Sprintf(`cli:ben run %d signup {"read":"effect key lookup:u1"}`, run.ID),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("data.unmasked events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A front-end records only the events that are a person's: the engine's own are refused.
func TestRecordOperatorEvent(t *testing.T) {
	b := setup(t)
	err := b.client.RecordOperatorEvent(b.ctx, onceflow.OperatorEvent{Type: onceflow.EventConsoleSignedIn, Actor: "token:ops",
		Detail: map[string]any{"scope": "read"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []onceflow.OperatorEvent{
		{Type: store.EventStepCompleted, Actor: "token:ops"},
		{Type: onceflow.EventConsoleSignedOut},
	} {
		if err := b.client.RecordOperatorEvent(b.ctx, e); err == nil {
			t.Errorf("%+v was recorded", e)
		}
	}
	evs, err := b.client.Audit(b.ctx, onceflow.AuditQuery{})
	if err != nil || len(evs) != 1 || evs[0].Type != onceflow.EventConsoleSignedIn || !evs[0].At.Equal(b.clock.Now()) {
		t.Fatalf("events %+v (%v)", evs, err)
	}
}

// A run that does not exist is ErrNotFound, as GetRun says.
func TestRunGetNotFound(t *testing.T) {
	b := setup(t)
	if _, err := b.client.RunGet(b.ctx, 99); !errors.Is(err, onceflow.ErrNotFound) {
		t.Fatalf("RunGet of an unknown run: %v", err)
	}
}

// Who paused a workflow and why is shown masked with the client's secrets, by the API's
// GET /v1/pauses as by the console (the API showed a note as it was typed).
func TestPausedWorkflowsMasked(t *testing.T) {
	b := setup(t, func(c *onceflow.Config) { c.Redact.Secrets = []string{canarySecret} })
	b.register(t, onceflow.Workflow{Name: "signup", Steps: []onceflow.Step{{ID: "a", EffectKey: "a:{input.id}",
		Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}})
	if _, err := b.client.PauseWorkflow(b.ctx, "signup", "cli:ana", "rotating "+canarySecret); err != nil {
		t.Fatal(err)
	}
	list, err := b.client.PausedWorkflows(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Note != "rotating [redacted]" || list[0].Actor != "cli:ana" {
		t.Fatalf("paused: %+v", list)
	}
}

// A run's steps are listed in the workflow's order, as the API and runs show have always
// listed them; DependencyOrder lists each after the steps it needs, as the console draws
// them.
func TestRunGetStepOrders(t *testing.T) {
	b := setup(t)
	noop := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	b.register(t, onceflow.Workflow{Name: "late-first", Steps: []onceflow.Step{
		{ID: "mail", Needs: []string{"crm"}, EffectKey: "mail:{input.id}", Do: noop},
		{ID: "crm", EffectKey: "crm:{input.id}", Do: noop},
	}})
	run := b.start(t, "late-first", "k-1", map[string]any{"id": 1})
	d, err := b.client.RunGet(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	names := func(steps []*onceflow.StepInfo) string {
		var s []string
		for _, st := range steps {
			s = append(s, st.Name)
		}
		return strings.Join(s, " ")
	}
	if got, dep := names(d.Steps), names(d.DependencyOrder()); got != "mail crm" || dep != "crm mail" {
		t.Fatalf("steps %q, in dependency order %q; want \"mail crm\" and \"crm mail\"", got, dep)
	}
}
