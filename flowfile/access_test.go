package flowfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
)

const accessBase = `name: orders
steps:
  - id: store
    kind: go
    func: f
`

// Every mistake in the api block is reported at its place, file:line:col, without
// echoing anything but what the file says.
func TestAPILoadErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"false", accessBase + "api: false\n", `orders.yaml:6:6: api: false is not a setting`},
		{"a string", accessBase + "api: sometimes\n", `orders.yaml:6:6: api must be true or a mapping such as {tokens: [website]}`},
		{"no tokens", accessBase + "api: {}\n", `orders.yaml:6:6: api.tokens names no token`},
		{"empty tokens", accessBase + "api:\n  tokens: []\n", `orders.yaml:7:11: api.tokens names no token`},
		{"token twice", accessBase + "api:\n  tokens: [ops, ops]\n", `orders.yaml:7:17: api.tokens names "ops" twice`},
		{"token with a colon", accessBase + "api:\n  tokens: [ops, \"a:b\"]\n", `orders.yaml:7:17: "a:b" is not a token name`},
		{"unknown field", accessBase + "api:\n  token: [ops]\n", `orders.yaml:7:3: unknown field "token"`},
	} {
		_, ps := testReader.Parse("orders.yaml", []byte(tc.src))
		if !strings.Contains(ps.Error(), tc.want) {
			t.Errorf("%s: problems\n%v\nwant one containing\n%s", tc.name, ps, tc.want)
		}
	}
}

// Build gives each workflow the access its file says: its trigger, and what its api block
// opens to tokens.
func TestBuildAccess(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, extra string
		want        onceflow.Access
	}{
		{"ordinary", "", onceflow.Access{}},
		{"scheduled", "schedule: {cron: \"@daily\"}\n", onceflow.Access{Trigger: onceflow.TriggerSchedule}},
		{"scheduled, open to tokens", "schedule: {cron: \"@daily\"}\napi: true\n", onceflow.Access{Trigger: onceflow.TriggerSchedule, API: true}},
		{"queue", "queue: {nats: {stream: ORDERS, consumer: onceflow}}\n", onceflow.Access{Trigger: onceflow.TriggerQueue}},
		{"webhook", "webhook: {name: orders, scheme: standard-webhooks, secret_env: [S]}\n", onceflow.Access{Trigger: onceflow.TriggerWebhook}},
		{"webhook, api", "webhook: {name: orders, scheme: standard-webhooks, secret_env: [S]}\napi: true\n", onceflow.Access{Trigger: onceflow.TriggerWebhook, API: true}},
		{"queue, some tokens", "queue: {nats: {stream: ORDERS, consumer: onceflow}}\napi: {tokens: [ops]}\n",
			onceflow.Access{Trigger: onceflow.TriggerQueue, API: true, Tokens: []string{"ops"}}},
		{"ordinary, some tokens", "api: {tokens: [website, ops]}\n", onceflow.Access{API: true, Tokens: []string{"website", "ops"}}},
	}
	for _, tc := range cases {
		d, ps := testReader.Parse("orders.yaml", []byte(accessBase+tc.extra))
		if ps != nil {
			t.Fatalf("%s: %v", tc.name, ps)
		}
		ws, err := Outline([]*Definition{d})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ws[0].Access, tc.want) {
			t.Errorf("%s: access %+v, want %+v", tc.name, ws[0].Access, tc.want)
		}
	}
}
