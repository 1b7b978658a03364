package onceflow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// accessBundle registers one workflow of each kind the access rule tells apart: ordinary,
// fed by a schedule (with a fan-out, whose walker is internal), fed by a queue, fed by a
// queue and opened to tokens, one that names its tokens, and a notification channel.
func accessBundle(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, func(c *onceflow.Config) {
		c.Notify = onceflow.NotifyConfig{Channels: []onceflow.NotifyChannel{{Name: "ops-alerts", Send: noop}}}
	})
	step := []onceflow.Step{{ID: "a", Do: noop}}
	for _, w := range []onceflow.Workflow{
		{Name: "lead", Steps: step},
		{Name: "invoices", Steps: step},
		{Name: "orders", Steps: step, Access: onceflow.Access{Trigger: onceflow.TriggerQueue}},
		{Name: "orders.rejected", Steps: step, Access: onceflow.Access{Internal: true}},
		{Name: "payments", Steps: step, Access: onceflow.Access{Trigger: onceflow.TriggerQueue, API: true}},
		{Name: "refunds", Steps: step, Access: onceflow.Access{Trigger: onceflow.TriggerQueue, Tokens: []string{"ops"}}},
	} {
		b.register(t, w)
	}
	err := b.client.RegisterSchedule(onceflow.Schedule{Workflow: "invoices", Cron: "@monthly", RunKey: "inv:{item.id}:{schedule.period}",
		ForEach: &onceflow.FanOut{Fetch: func(context.Context, onceflow.Tick, string) (onceflow.FanOutPage, error) {
			t.Error("the list was fetched")
			return onceflow.FanOutPage{}, nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// One rule decides who may start what from outside: internal workflows do not exist for
// any caller, a token's own list and a workflow's token list restrict, a workflow a
// trigger feeds needs Access.API, and a webhook starts its workflow.
func TestMayStart(t *testing.T) {
	b := accessBundle(t)
	website := onceflow.Caller{Token: "website"}
	form := onceflow.Caller{Token: "form", Workflows: []string{"lead"}}
	ops := onceflow.Caller{Token: "ops"}
	hook := onceflow.Caller{Webhook: "payments"}
	notFound := func(err error) bool { return errors.Is(err, onceflow.ErrWorkflowNotFound) }
	refused := func(why onceflow.Refusal) func(error) bool {
		return func(err error) bool {
			var re *onceflow.StartRefusedError
			return errors.As(err, &re) && re.Reason == why && errors.Is(err, onceflow.ErrStartRefused)
		}
	}
	allowed := func(err error) bool { return err == nil }
	for _, tc := range []struct {
		by       onceflow.Caller
		workflow string
		want     func(error) bool
	}{
		{website, "lead", allowed},
		{website, "nope", notFound},
		{website, "invoices.for-each", notFound},
		{ops, "invoices.for-each", notFound},
		{hook, "invoices.for-each", notFound},
		{website, "orders.rejected", notFound},
		{website, "ops-alerts", notFound},
		{website, "invoices", refused(onceflow.RefusedTriggered)},
		{ops, "invoices", refused(onceflow.RefusedTriggered)},
		{website, "orders", refused(onceflow.RefusedTriggered)},
		{website, "payments", allowed},
		{website, "refunds", refused(onceflow.RefusedTokenNotNamed)},
		{ops, "refunds", allowed},
		{hook, "refunds", allowed},
		{form, "lead", allowed},
		{form, "payments", refused(onceflow.RefusedNotInList)},
		{onceflow.Caller{Token: "ops", Workflows: []string{"refunds"}}, "refunds", allowed},
		{onceflow.Caller{}, "lead", refused("")},
	} {
		if err := b.client.MayStart(tc.by, tc.workflow); !tc.want(err) {
			t.Errorf("%s starting %s: %v", tc.by.Actor(), tc.workflow, err)
		}
	}
	if got := b.client.StartableBy(website); !slices.Equal(got, []string{"lead", "payments"}) {
		t.Errorf("startable by %s: %v", website.Actor(), got)
	}
	if got := b.client.StartableBy(form); !slices.Equal(got, []string{"lead"}) {
		t.Errorf("startable by %s: %v", form.Actor(), got)
	}
	// What a refusal says names what to change.
	err := b.client.MayStart(website, "invoices")
	if err == nil || !strings.Contains(err.Error(), `workflow "invoices" is started by its schedule`) || !strings.Contains(err.Error(), "api: true") {
		t.Errorf("refusal of a scheduled workflow: %v", err)
	}
	err = b.client.MayStart(form, "payments")
	if err == nil || !strings.Contains(err.Error(), `token:form may start only lead, not "payments"`) {
		t.Errorf("refusal by a token's list: %v", err)
	}
}

// StartFrom starts nothing it refuses, and names the caller in the audit trail:
// token:NAME, webhook:NAME.
func TestStartFromAuditsTheCaller(t *testing.T) {
	b := accessBundle(t)
	in := map[string]any{"n": 1}
	if _, err := b.client.StartFrom(b.ctx, onceflow.Caller{Token: "website"}, "invoices.for-each", "monthly:2031-07-15T13:37:00Z",
		map[string]any{"schedule": map[string]any{"time": "2031-07-15T13:37:00Z"}}); !errors.Is(err, onceflow.ErrWorkflowNotFound) {
		t.Fatalf("fan-out walker started through StartFrom: %v", err)
	}
	if _, err := b.client.StartFrom(b.ctx, onceflow.Caller{Token: "website"}, "orders", "m-1", in); !errors.Is(err, onceflow.ErrStartRefused) {
		t.Fatalf("queue workflow started by a token: %v", err)
	}
	runs, err := b.store.RunList(b.ctx, store.RunListParams{})
	if err != nil || len(runs) != 0 {
		t.Fatalf("refused starts stored runs: %v %v", runs, err)
	}
	lead, err := b.client.StartFrom(b.ctx, onceflow.Caller{Token: "website"}, "lead", "form-1", in)
	if err != nil {
		t.Fatal(err)
	}
	pay, err := b.client.StartFrom(b.ctx, onceflow.Caller{Webhook: "payments"}, "payments", "evt_1", in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.StartFrom(b.ctx, onceflow.Caller{Token: "website"}, "lead", "form-1", in); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Flush(b.ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64][]string{lead.ID: {"token:website", "token:website"}, pay.ID: {"webhook:payments"}} {
		var actors []string
		for _, e := range b.events(t, store.EventListParams{RunID: id}) {
			if e.Type == "run.created" || e.Type == "run.deduplicated" {
				actors = append(actors, e.Actor)
			}
		}
		if !slices.Equal(actors, want) {
			t.Errorf("run %d: actors of its start events %v, want %v", id, actors, want)
		}
	}
}

// CheckCallers refuses, before anything is served, a token whose list names a workflow it
// could never start and a workflow that names a token nobody has, naming both.
func TestCheckCallers(t *testing.T) {
	b := accessBundle(t)
	err := b.client.CheckCallers([]onceflow.Caller{
		{Token: "website", Workflows: []string{"lead", "leads"}},
		{Token: "billing", Workflows: []string{"invoices.for-each", "invoices"}},
		{Token: "alerts", Workflows: []string{"ops-alerts"}},
	})
	if err == nil {
		t.Fatal("no problem found")
	}
	for _, want := range []string{
		`API token "website" names workflow "leads", which is not registered`,
		`API token "billing" names workflow "invoices.for-each", which only the engine starts`,
		`API token "billing" names workflow "invoices", which it may not start: workflow "invoices" is started by its schedule`,
		`API token "alerts" names workflow "ops-alerts", which only the engine starts`,
		`workflow "refunds" may be started only by API token "ops", which is not configured`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems\n%v\nwant one containing\n%s", err, want)
		}
	}
	if err := b.client.CheckCallers([]onceflow.Caller{{Token: "website", Workflows: []string{"lead", "payments"}}, {Token: "ops"}}); err != nil {
		t.Errorf("valid callers refused: %v", err)
	}
	// Access is checked with the rest of a definition.
	err = onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "a", Do: noop}},
		Access: onceflow.Access{Internal: true, API: true, Tokens: []string{"a:b", "ops", "ops"}, Trigger: "cron"}}.Validate()
	for _, want := range []string{`Access.Trigger "cron"`, "an internal workflow is never started from outside", `"a:b" is not a token name`, `names "ops" twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want a problem containing %q", err, want)
		}
	}
}
