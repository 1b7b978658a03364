package flowfile

import (
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/steps/amqpstep"
	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/queue"
)

const orderEventsYAML = `name: order-events
entity: "order:{input.order_id}"
queue:
  amqp: {queue: order-events, prefetch: 20}
  run_key: "{headers.X-Event-Id}"
steps:
  - id: mark_paid
    kind: sql
    effect_key: "order-paid:{input.order_id}"
    sql:
      database: SHOP_DB
      on_mismatch: needs_review
      statements:
        - query: "UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'"
          args: ["{input.order_id}"]
          expect_rows: 1
  - id: warehouse
    kind: amqp
    needs: [mark_paid]
    effect_key: "warehouse:{input.order_id}"
    amqp: {exchange: warehouse, routing_key: pick, body: {order: "{input.order_id}"}}
  - id: notify
    kind: nats
    needs: [mark_paid]
    effect_key: "notify:{input.order_id}"
    nats: {subject: "orders.paid.{input.order_id}", body: "{input.order_id}"}
`

func TestQueueAndBrokerStepsParse(t *testing.T) {
	d, ps := testReader.Parse("order-events.yaml", []byte(orderEventsYAML))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if queueOf(d).Brokers["amqp"].(*amqpqueue.Settings).Queue != "order-events" || d.Steps[0].Config.(*sqlstep.Settings).Statements[0].ExpectRows == nil || d.Steps[1].Config.(*amqpstep.Settings).Exchange != "warehouse" {
		t.Fatalf("%+v", queueOf(d))
	}
	d, ps = testReader.Parse("order-events.yaml", []byte(strings.Replace(orderEventsYAML, "  run_key:", "  max_message_bytes: 65536\n  run_key:", 1)))
	if len(ps) > 0 || queueOf(d).MaxMessageBytes != 65536 {
		t.Fatalf("max_message_bytes: %v %+v", ps, queueOf(d))
	}
}

// queueOf is d's queue: block.
func queueOf(d *Definition) *queue.Settings {
	cfg, _ := d.Trigger("queue")
	q, _ := cfg.(*queue.Settings)
	return q
}

func TestBrokerStepProblems(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"splice", `"UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'"`,
			`"UPDATE orders SET note = '{input.note}' WHERE id = $1"`,
			"order-events.yaml:14:18: step \"mark_paid\": query contains the template field {input.note}: values are never spliced into SQL text"},
		{"ddl", `"UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'"`,
			`"CREATE TABLE IF NOT EXISTS paid (id BIGINT)"`,
			"order-events.yaml:14:18: step \"mark_paid\": CREATE TABLE is DDL, which MySQL and MariaDB commit implicitly"},
		{"commit", `"UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'"`,
			`"UPDATE orders SET status = 'paid' WHERE id = $1; COMMIT"`,
			"order-events.yaml:14:18: step \"mark_paid\": COMMIT ends the transaction in which onceflow runs the step's statements"},
		{"dsn in file", "database: SHOP_DB", "database: postgres://shop@db/shop", "order-events.yaml:11:17: step \"mark_paid\": database must name the environment variable"},
		{"mismatch", "on_mismatch: needs_review", "on_mismatch: ignore", `on_mismatch "ignore" is not skip or needs_review`},
		{"no queue", "amqp: {queue: order-events, prefetch: 20}", "amqp: {prefetch: 20}", "order-events.yaml:4:9: amqp.queue is required"},
		{"run key", `run_key: "{headers.X-Event-Id}"`, `run_key: "{steps.a.output.id}"`, "a queue's run_key reads {headers.NAME}"},
		{"message size", "  run_key:", "  max_message_bytes: -1\n  run_key:", "order-events.yaml:5:22: max_message_bytes must be positive"},
		{"both", "amqp: {queue: order-events, prefetch: 20}", "amqp: {queue: q}\n  nats: {stream: S}", "queue takes one of nats and amqp"},
		{"subject", `subject: "orders.paid.{input.order_id}"`, `subject: "orders.paid.>.{input.order_id}"`,
			`step "notify": nats subject "orders.paid.>.{input.order_id}": '>' is a wildcard, which a message cannot be published to`},
		{"env in message", `body: "{input.order_id}"`, `body: "{env.SECRET}"`, "messages may not read the environment"},
		{"url in file", "amqp: {queue: order-events, prefetch: 20}", "amqp: {queue: order-events, prefetch: 20, url: \"amqp://guest:guest@mq/\"}",
			`unknown field "url": connection settings come from the environment, never the file (a queue's broker URL from ONCEFLOW_NATS_URL or ONCEFLOW_AMQP_URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(orderEventsYAML, tc.old, tc.new, 1)
			if src == orderEventsYAML {
				t.Fatal("the test's replacement did not apply")
			}
			_, ps := testReader.Parse("order-events.yaml", []byte(src))
			if !strings.Contains(ps.Error(), tc.want) {
				t.Fatalf("problems:\n%v\nwant %q", ps, tc.want)
			}
		})
	}
}

func TestSQLStepNeedsItsDSNVariable(t *testing.T) {
	d, ps := testReader.Parse("order-events.yaml", []byte(orderEventsYAML))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	_, err := NewBuilder(BuildOptions{Env: func(k string) (string, bool) {
		if k == "ONCEFLOW_AMQP_URL" || k == "ONCEFLOW_NATS_URL" {
			return "amqp://127.0.0.1:1/", true
		}
		return "", false
	}}).Workflows([]*Definition{d})
	if err == nil || !strings.Contains(err.Error(), "order-events.yaml:7:7: step \"mark_paid\": database: environment variable SHOP_DB is not set") {
		t.Fatalf("%v", err)
	}
}

func TestAMQPStepRetriesUnknownOutcomesByDefault(t *testing.T) {
	d, ps := testReader.Parse("order-events.yaml", []byte(orderEventsYAML))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	wf, err := d.skeleton()
	if err != nil {
		t.Fatal(err)
	}
	if wf.Steps[1].ID != "warehouse" || wf.Steps[1].OnUnknown != onceflow.RetrySameKey {
		t.Fatalf("amqp step on_unknown %v", wf.Steps[1].OnUnknown)
	}
	src := strings.Replace(orderEventsYAML, "    amqp: {exchange: warehouse", "    on_unknown: needs_review\n    amqp: {exchange: warehouse", 1)
	d, ps = testReader.Parse("order-events.yaml", []byte(src))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if wf, _ := d.skeleton(); wf.Steps[1].OnUnknown != onceflow.ReviewUnknown {
		t.Fatalf("on_unknown: needs_review gave %v", wf.Steps[1].OnUnknown)
	}
}

// The templates of sql, nats and amqp steps are checked like those of http steps: a step
// reads only the outputs of the steps it needs, and a run has {run.key} and {run.id} only.
func TestBrokerStepTemplatesAreChecked(t *testing.T) {
	src := `name: orders
steps:
  - id: paid
    kind: go
    func: f
  - id: mark
    kind: sql
    needs: [paid]
    effect_key: "mark:{input.id}"
    sql:
      database: SHOP_DB
      statements:
        - query: "UPDATE orders SET status = 'paid' WHERE id = $1 AND ref = $2"
          args: ["{input.id}", "{steps.charge.output.ref}"]
  - id: notify
    kind: nats
    effect_key: "notify:{input.id}"
    nats: {subject: "orders.{steps.nope.output.id}", headers: {X-Run: "{run.nope}"}, body: {y: "{run.nope}"}}
  - id: pick
    kind: amqp
    needs: [paid]
    effect_key: "pick:{input.id}"
    amqp: {exchange: warehouse, routing_key: "pick.{steps.paid.output.zone}", body: "{+input.note}"}
`
	_, ps := testReader.Parse("orders.yaml", []byte(src))
	got := ps.Error()
	for _, want := range []string{
		`orders.yaml:14:32: step "mark": statement 1 arg 2 reads {steps.charge.output.ref}: "charge" is not a step this step needs`,
		`orders.yaml:18:21: step "notify": nats subject reads {steps.nope.output.id}: "nope" is not a step this step needs`,
		`orders.yaml:18:71: step "notify": nats header X-Run reads {run.nope}: a run has {run.key} and {run.id} only`,
		`orders.yaml:18:92: step "notify": nats body reads {run.nope}: a run has {run.key} and {run.id} only`,
		`orders.yaml:23:85: step "pick": amqp body: {+field} splices a value into a URL as it is; elsewhere write {field}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `step "pick": amqp routing_key`) {
		t.Errorf("the amqp routing key reads a step it needs:\n%s", got)
	}
}

// The variable holding a sql step's DSN is read from the environment like {env.NAME}, and
// is a secret: a reload sees it, its value (which holds the database's password) is masked
// whole, and a program serving the file refuses to start without it.
func TestSQLDatabaseVariableIsASecret(t *testing.T) {
	d, ps := testReader.Parse("order-events.yaml", []byte(orderEventsYAML))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if !slices.Contains(d.EnvNames(), "SHOP_DB") || !slices.Contains(d.SecretNames(), "SHOP_DB") {
		t.Errorf("EnvNames %q, SecretNames %q: want SHOP_DB in both", d.EnvNames(), d.SecretNames())
	}
	const dsn = "postgres://shop:Sh0p-pa55word@db.internal:5432/shop"
	masked := d.MaskedValues(func(k string) (string, bool) { return dsn, k == "SHOP_DB" })
	if !slices.Contains(masked, dsn) {
		t.Errorf("MaskedValues = %q: want the whole DSN", masked)
	}
	missing := d.CheckEnv(func(string) (string, bool) { return "", false })
	if len(missing) != 1 || !strings.Contains(missing.Error(), `order-events.yaml:11:17: step "mark_paid" reads its database's DSN from the environment variable SHOP_DB, which is not set`) {
		t.Errorf("CheckEnv without SHOP_DB: %v", missing)
	}
}
