package queue_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
)

// backends opens a fresh store of each kind: a SQLite file, and a PostgreSQL schema of
// its own (dropped when the test ends).
func backends(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": func(t *testing.T) store.Store {
			url := testsvc.Postgres(t)
			schema := "onceflow_qt_" + suffix()
			st, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				st.Close()
				if c, err := pgx.Connect(context.Background(), url); err == nil {
					_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
					c.Close(context.Background())
				}
			})
			return st
		},
	}
}

// rejectingTrigger is a client of st with the orders workflow and its companion, and a
// trigger whose run key is the Event-Id header, for Handle to be called directly.
func rejectingTrigger(t *testing.T, st store.Store) (*onceflow.Client, bound) {
	t.Helper()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	trig := natsHandler(t, c, queue.Config{Workflow: "orders", RunKey: "{headers.Event-Id}"})
	for _, w := range append([]onceflow.Workflow{ordersWorkflow()}, trig.h.Companions(c)...) {
		if err := c.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	return c, trig
}

// bound is a queue's handler with the client it starts runs through, for Handle to be
// called directly.
type bound struct {
	h *queue.Handler
	s triggers.Starter
}

func (b bound) Handle(ctx context.Context, m queue.Message) (string, error) {
	return b.h.Handle(ctx, b.s, m)
}

// natsHandler is the handler of a JetStream consumer of the stream ORDERS with cfg,
// starting runs through c.
func natsHandler(t *testing.T, c *onceflow.Client, cfg queue.Config) bound {
	t.Helper()
	n, err := natsqueue.New(cfg, natsqueue.Config{Stream: "ORDERS"})
	if err != nil {
		t.Fatal(err)
	}
	return bound{n.Handler, c}
}

// workAll executes steps until none is due.
func workAll(t *testing.T, c *onceflow.Client) {
	t.Helper()
	for {
		n, err := c.Work(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// A message that cannot start a run is kept durably, with the raw message and the
// reason, as one review item however often it is delivered — on both backends.
func TestRejectedMessagesWaitInReview(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			c, trig := rejectingTrigger(t, st)
			cases := []struct {
				msg    queue.Message
				reason onceflow.Reason
			}{
				{queue.Message{Headers: map[string]string{"Event-Id": "e1"}, Payload: []byte("order=1"), Identity: "seq:1"}, queue.ReasonInputNotJSON},
				{queue.Message{Headers: map[string]string{"Event-Id": "e2"}, Payload: []byte(`{"total": 1}`), Identity: "seq:2"}, queue.ReasonInputInvalid},
				{queue.Message{Headers: map[string]string{}, Payload: []byte(`{"order_id": 3}`), Identity: "seq:3"}, queue.ReasonRunKeyMissing},
				{queue.Message{Headers: map[string]string{"Event-Id": "e4"}, Payload: []byte{0xff, 0xfe}, Identity: "seq:4"}, queue.ReasonInputNotJSON},
			}
			for range 2 { // the second time is a redelivery
				for _, tc := range cases {
					out, err := trig.Handle(ctx, tc.msg)
					if err != nil || out != queue.Rejected {
						t.Fatalf("%s: %s %v, want rejected", tc.msg.Payload, out, err)
					}
				}
			}
			// The same key with another payload is a conflict, not a second run.
			if out, err := trig.Handle(ctx, queue.Message{Headers: map[string]string{"Event-Id": "e5"}, Payload: []byte(`{"order_id": 5}`), Identity: "seq:5"}); err != nil || out != queue.Started {
				t.Fatalf("%s %v", out, err)
			}
			if out, err := trig.Handle(ctx, queue.Message{Headers: map[string]string{"Event-Id": "e5"}, Payload: []byte(`{"order_id": 6}`), Identity: "seq:6"}); err != nil || out != queue.Rejected {
				t.Fatalf("%s %v", out, err)
			}
			if out, err := trig.Handle(ctx, queue.Message{Headers: map[string]string{"Event-Id": "e5"}, Payload: []byte(`{"order_id": 5}`), Identity: "seq:7"}); err != nil || out != queue.Duplicate {
				t.Fatalf("%s %v", out, err)
			}
			workAll(t, c)
			items, err := st.ReviewList(ctx, store.ReviewListParams{Workflow: "orders.rejected"})
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != 5 {
				t.Fatalf("%d review items, want 5 (one per rejected message)", len(items))
			}
			got := map[string]onceflow.Reason{}
			for _, it := range items {
				run, err := st.RunGetByID(ctx, it.RunID)
				if err != nil {
					t.Fatal(err)
				}
				got[it.RunKey] = it.Reason
				if !strings.Contains(string(run.Input), `"reason":"`+string(it.Reason)+`"`) || !strings.Contains(it.LastError, "rejected message") {
					t.Fatalf("item %s: input %s error %q", it.RunKey, run.Input, it.LastError)
				}
				if it.RunKey == "nats:ORDERS/onceflow-orders|seq:4" && !strings.Contains(string(run.Input), `"payload_base64":"//4="`) {
					t.Fatalf("binary payload not kept: %s", run.Input)
				}
				if it.RunKey == "nats:ORDERS/onceflow-orders|seq:1" && !strings.Contains(string(run.Input), `"payload":"order=1"`) {
					t.Fatalf("raw payload not kept: %s", run.Input)
				}
			}
			want := map[string]onceflow.Reason{
				"nats:ORDERS/onceflow-orders|seq:1": queue.ReasonInputNotJSON, "nats:ORDERS/onceflow-orders|seq:2": queue.ReasonInputInvalid,
				"nats:ORDERS/onceflow-orders|seq:3": queue.ReasonRunKeyMissing, "nats:ORDERS/onceflow-orders|seq:4": queue.ReasonInputNotJSON,
				"nats:ORDERS/onceflow-orders|seq:6": queue.ReasonRunKeyConflict,
			}
			for k, r := range want {
				if got[k] != r {
					t.Errorf("item %s: reason %q, want %q (all: %v)", k, got[k], r, got)
				}
			}
		})
	}
}

// A rejected message is corrected and replayed from the review queue: the replay starts
// the run the message should have started, once, and a correction that is still wrong
// keeps the item in review with the new reason.
func TestRejectedMessageCorrectedAndReplayed(t *testing.T) {
	ctx := context.Background()
	st := backends(t)["sqlite"](t)
	c, trig := rejectingTrigger(t, st)
	work := func() { t.Helper(); workAll(t, c) }
	item := func(runKey string) *onceflow.ReviewItem {
		t.Helper()
		items, err := c.ReviewList(ctx, onceflow.ReviewFilter{Workflow: "orders.rejected"})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if it.RunKey == runKey {
				return it
			}
		}
		return nil
	}
	msgs := map[string]queue.Message{
		"not-json": {Headers: map[string]string{"Event-Id": "e1"}, Payload: []byte("order=1"), Identity: "seq:1"},
		"invalid":  {Headers: map[string]string{"Event-Id": "e2"}, Payload: []byte(`{"total": 2}`), Identity: "seq:2"},
		"no-key":   {Headers: map[string]string{}, Payload: []byte(`{"order_id": 3}`), Identity: "seq:3"},
	}
	for name, m := range msgs {
		if out, err := trig.Handle(ctx, m); err != nil || out != queue.Rejected {
			t.Fatalf("%s: %s %v", name, out, err)
		}
	}
	work()
	replay := func(runKey, patch string, wantReason onceflow.Reason) {
		t.Helper()
		it := item(runKey)
		if it == nil {
			t.Fatalf("no review item %s", runKey)
		}
		if _, err := c.ReviewReplay(ctx, onceflow.ReplayRequest{RunID: it.RunID, Step: "input", MergePatch: json.RawMessage(patch), Actor: "ops"}); err != nil {
			t.Fatalf("replay %s: %v", runKey, err)
		}
		work()
		got := item(runKey)
		switch {
		case wantReason == "" && got != nil:
			t.Fatalf("%s still in review after the replay: %s %s", runKey, got.Reason, got.LastError)
		case wantReason != "" && (got == nil || got.Reason != wantReason):
			t.Fatalf("%s after the replay: %+v, want reason %s", runKey, got, wantReason)
		}
	}
	src := "nats:ORDERS/onceflow-orders|"
	// Still not an object: stays, with its reason; then the object: the run starts.
	replay(src+"seq:1", `{"payload": "order_id=1"}`, queue.ReasonInputNotJSON)
	replay(src+"seq:1", `{"payload": {"order_id": 1}}`, "")
	// Still lacking a required field: stays; then corrected as text.
	replay(src+"seq:2", `{"payload": "{\"total\": 2, \"id\": 2}"}`, queue.ReasonInputInvalid)
	replay(src+"seq:2", `{"payload": "{\"total\": 2, \"order_id\": 2}"}`, "")
	// No key: the correction names one.
	replay(src+"seq:3", `{"run_key": "e3"}`, "")

	for key, want := range map[string]string{"e1": `{"order_id":1}`, "e2": `{"order_id":2,"total":2}`, "e3": `{"order_id":3}`} {
		run, err := st.RunGetByKey(ctx, "orders", key)
		if err != nil {
			t.Fatalf("run %s: %v", key, err)
		}
		if string(run.Input) != want || run.State != store.StateCompleted {
			t.Fatalf("run %s: %s %s, want %s completed", key, run.Input, run.State, want)
		}
	}
	// The message delivered again after its correction finds its run: no second one.
	if out, err := trig.Handle(ctx, queue.Message{Headers: map[string]string{"Event-Id": "e1"}, Payload: []byte(`{"order_id": 1}`), Identity: "seq:9"}); err != nil || out != queue.Duplicate {
		t.Fatalf("redelivery: %s %v", out, err)
	}
	runs, err := st.RunList(ctx, store.RunListParams{Workflow: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d runs of orders, want 3", len(runs))
	}
}

// Two different messages that cannot start a run and carry the same message id are two
// review items, each with its own raw message: the second is not lost to the first's key.
func TestRejectedMessagesSharingAnIDAreBothKept(t *testing.T) {
	ctx := context.Background()
	st := backends(t)["sqlite"](t)
	c, trig := rejectingTrigger(t, st)
	a := queue.Message{ID: "evt-7", Headers: map[string]string{"Event-Id": "e7"}, Payload: []byte("first, not json")}
	b := queue.Message{ID: "evt-7", Headers: map[string]string{"Event-Id": "e7"}, Payload: []byte("second, not json either")}
	for range 2 { // the second time is a redelivery of each
		for _, m := range []queue.Message{a, b} {
			if out, err := trig.Handle(ctx, m); err != nil || out != queue.Rejected {
				t.Fatalf("%s: %s %v, want rejected", m.Payload, out, err)
			}
		}
	}
	workAll(t, c)
	items, err := st.ReviewList(ctx, store.ReviewListParams{Workflow: "orders.rejected"})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, it := range items {
		run, err := st.RunGetByID(ctx, it.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var in struct{ Payload string }
		if err := json.Unmarshal(run.Input, &in); err != nil {
			t.Fatal(err)
		}
		kept[in.Payload] = true
	}
	if len(items) != 2 || !kept[string(a.Payload)] || !kept[string(b.Payload)] {
		t.Fatalf("%d review items keeping %v, want one for each message", len(items), kept)
	}
}

// A message gets the checks an API body gets (jsondoc.Check): one nested deeper than the
// limit, one naming a member twice and one with an escape that stands for no character
// are kept for review with what is wrong, and start no run — neither when they arrive nor
// when their review item's step tries the message again.
func TestMessagesGetTheBodyChecks(t *testing.T) {
	ctx := context.Background()
	st := backends(t)["sqlite"](t)
	c, trig := rejectingTrigger(t, st)
	deep := `{"order_id":1,"x":` + strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64) + `}`
	cases := map[string]struct {
		payload string
		reason  onceflow.Reason
		says    string
	}{
		"seq:1": {deep, queue.ReasonInputInvalid, "nests objects and lists 65 levels deep; the limit is 64"},
		"seq:2": {`{"order_id":1,"total":5,"total":500}`, queue.ReasonInputInvalid, `the member "total" appears twice`},
		"seq:3": {`{"order_id":"\ud800"}`, queue.ReasonInputNotJSON, "half of a UTF-16 surrogate pair"},
	}
	for id, tc := range cases {
		out, err := trig.Handle(ctx, queue.Message{Headers: map[string]string{"Event-Id": "e-" + id}, Payload: []byte(tc.payload), Identity: id})
		if err != nil || out != queue.Rejected {
			t.Fatalf("%s: %s %v, want rejected", id, out, err)
		}
	}
	workAll(t, c)
	if runs, err := st.RunList(ctx, store.RunListParams{Workflow: "orders"}); err != nil || len(runs) != 0 {
		t.Fatalf("%d order runs (%v), want none", len(runs), err)
	}
	items, err := st.ReviewList(ctx, store.ReviewListParams{Workflow: "orders.rejected"})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != len(cases) {
		t.Fatalf("%d review items, want %d", len(items), len(cases))
	}
	for _, it := range items {
		tc := cases[strings.TrimPrefix(it.RunKey, "nats:ORDERS/onceflow-orders|")]
		if it.Reason != tc.reason || !strings.Contains(it.LastError, tc.says) {
			t.Errorf("item %s: reason %q, error %q; want %q saying %q", it.RunKey, it.Reason, it.LastError, tc.reason, tc.says)
		}
	}
}

// mustNATS is a JetStream consumer of cfg and nc.
func mustNATS(t *testing.T, cfg queue.Config, nc natsqueue.Config) *natsqueue.Consumer {
	t.Helper()
	n, err := natsqueue.New(cfg, nc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mustAMQP is a RabbitMQ consumer of cfg and ac.
func mustAMQP(t *testing.T, cfg queue.Config, ac amqpqueue.Config) *amqpqueue.Consumer {
	t.Helper()
	a, err := amqpqueue.New(cfg, ac)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A handler whose depth limit is below the client's keeps a message nested past it for
// review, and the review item's step, trying the message again, refuses it by the same
// limit: it does not start the run the handler refused.
func TestRejectedMessageKeepsTheHandlersDepthLimit(t *testing.T) {
	ctx := context.Background()
	st := backends(t)["sqlite"](t)
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	trig := natsHandler(t, c, queue.Config{Workflow: "orders", RunKey: "{headers.Event-Id}", MaxDepth: 4})
	for _, w := range append([]onceflow.Workflow{ordersWorkflow()}, trig.h.Companions(c)...) {
		if err := c.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	deep := `{"order_id":1,"x":{"a":{"a":{"a":{"a":1}}}}}` // 5 levels: within the client's 64, past the handler's 4
	if out, err := trig.Handle(ctx, queue.Message{Headers: map[string]string{"Event-Id": "e-1"}, Payload: []byte(deep), Identity: "seq:1"}); err != nil || out != queue.Rejected {
		t.Fatalf("%s %v, want rejected", out, err)
	}
	workAll(t, c)
	if runs, err := st.RunList(ctx, store.RunListParams{Workflow: "orders"}); err != nil || len(runs) != 0 {
		t.Fatalf("%d order runs (%v): the review item's step started the message the handler refused", len(runs), err)
	}
	items, err := st.ReviewList(ctx, store.ReviewListParams{Workflow: "orders.rejected"})
	if err != nil || len(items) != 1 || items[0].Reason != queue.ReasonInputInvalid {
		t.Fatalf("review items %+v (%v), want one, input_invalid", items, err)
	}
}
