package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

const queueYAML = `name: orders
entity: "order:{input.order_id}"
input: {required: [order_id]}
queue:
  amqp: {queue: QUEUE}
steps:
  - id: note
    kind: go
    func: noop
    effect_key: "note:{input.order_id}"
`

// queueApp serves a workflow fed by queue q with ONCEFLOW_AMQP_URL=url, until the test
// ends; it returns the API's base URL, the store and the server, its workflow directory
// and its database file.
func queueApp(t *testing.T, url, q string) (string, store.Store, *server.Server, string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "orders.yaml"), []byte(strings.Replace(queueYAML, "QUEUE", q, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	db := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, db)
	env := func(k string) (string, bool) {
		if k == "ONCEFLOW_AMQP_URL" && url != "" {
			return url, true
		}
		return "", false
	}
	a, err := server.New(ctx, server.Config{Store: st, Workflows: []string{dir}, Env: env, Metrics: &server.MetricsConfig{},
		API: &server.APIConfig{Addr: "127.0.0.1:0"}, Middleware: apiMiddleware,
		Funcs:  map[string]onceflow.StepFunc{"noop": func(context.Context, *onceflow.StepContext) (any, error) { return map[string]any{}, nil }},
		Engine: onceflow.Config{Workers: 2, PollInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		a.Close()
		st.Close()
	})
	return "http://" + a.Addr("api").String(), st, a, dir, db
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A broker that cannot be reached at start is a clear /readyz answer and is retried.
func TestServeQueueBrokerUnreachable(t *testing.T) {
	base, _, _, _, _ := queueApp(t, "amqp://guest:guest@127.0.0.1:1/", "orders")
	var body string
	waitFor(t, "/readyz says the broker cannot be reached", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "amqp:orders: cannot reach the AMQP broker") &&
			strings.Contains(body, "check ONCEFLOW_AMQP_URL and that the server is running")
	})
	if strings.Contains(body, "guest:guest") {
		t.Fatalf("/readyz shows the URL's credentials: %s", body)
	}
	waitFor(t, "the metrics show the consumer down", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `onceflow_queue_connected{broker="amqp",workflow="orders"} 0`)
	})
}

func TestServeQueueNeedsItsURL(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "orders.yaml"), []byte(strings.Replace(queueYAML, "QUEUE", "orders", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	st := openSQLite(t, filepath.Join(t.TempDir(), "onceflow.db"))
	defer st.Close()
	_, err := server.New(context.Background(), server.Config{Store: st, Workflows: []string{dir}, Env: func(string) (string, bool) { return "", false },
		API:   &server.APIConfig{},
		Funcs: map[string]onceflow.StepFunc{"noop": func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}})
	if err == nil || !strings.Contains(err.Error(), "workflow orders consumes a queue: set ONCEFLOW_AMQP_URL") {
		t.Fatalf("%v", err)
	}
}

// serve consumes the queue: a message delivered twice is one run, a bad one waits in
// review, /readyz is ready and the metrics count what happened.
func TestServeQueue(t *testing.T) {
	url := testsvc.AMQP(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := fmt.Sprintf("onceflow-cli-%d-%d", os.Getpid(), time.Now().UnixNano())
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	defer ch.QueueDelete(q, false, false, false) //nolint:errcheck
	base, st, a, dir, db := queueApp(t, url, q)
	for _, m := range []amqp.Publishing{
		{MessageId: "evt-1", Body: []byte(`{"order_id": 1}`)},
		{MessageId: "evt-1", Body: []byte(`{"order_id": 1}`)},
		{MessageId: "evt-2", Body: []byte(`not json`)},
	} {
		if err := ch.PublishWithContext(context.Background(), "", q, false, false, m); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	waitFor(t, "one run and one review item", func() bool {
		runs, err := st.RunList(ctx, store.RunListParams{Workflow: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		items, err := st.ReviewList(ctx, store.ReviewListParams{Workflow: "orders.rejected"})
		if err != nil {
			t.Fatal(err)
		}
		return len(runs) == 1 && len(items) == 1 && items[0].Reason == "input_not_json"
	})
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d %s", code, body)
	}
	waitFor(t, "the metrics count the messages", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `onceflow_queue_connected{broker="amqp",workflow="orders"} 1`) &&
			strings.Contains(m, `onceflow_queue_messages_total{outcome="duplicate",workflow="orders"} 1`) &&
			strings.Contains(m, `onceflow_queue_messages_total{outcome="rejected",workflow="orders"} 1`)
	})

	// After a reload, the rejected message is corrected and replayed: its run starts once,
	// under the message id.
	if _, err := a.Reload(ctx); err != nil {
		t.Fatalf("reload: %v", err)
	}
	items, err := a.Client().ReviewList(ctx, onceflow.ReviewFilter{Workflow: "orders.rejected"})
	if err != nil || len(items) != 1 {
		t.Fatalf("review items %v %v", items, err)
	}
	// The command's preview, then the replay through the API's client.
	id := strconv.FormatInt(items[0].RunID, 10)
	patch := `{"payload": {"order_id": 2}}`
	if r := runOK(t, "review", "replay", id, "input", "--db", db, "--workflows", dir, "--patch", patch, "--dry-run"); !strings.Contains(r.stdout, "input") {
		t.Fatalf("preview: %s", r.stdout)
	}
	if _, err := a.Client().ReviewReplay(ctx, onceflow.ReplayRequest{RunID: items[0].RunID, Step: items[0].Step,
		MergePatch: json.RawMessage(patch), Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the corrected message's run", func() bool {
		run, err := st.RunGetByKey(ctx, "orders", "evt-2")
		return err == nil && string(run.Input) == `{"order_id":2}`
	})
}
