package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
)

// sharedQueueWorkflow is a workflow fed by the queue block, whose one http step calls
// {env.ORDERS_DEST}/NAME with the message's order id.
const sharedQueueWorkflow = `name: %s
entity: "order:{input.order_id}"
queue:
  %s
steps:
  - id: ship
    kind: http
    effect_key: "%s:{input.order_id}"
    http: {url: "{env.ORDERS_DEST}/%s", body: {order_id: "{input.order_id}"}}
`

// effectCounter is a destination that counts the requests it gets per Idempotency-Key.
type effectCounter struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

func newEffectCounter(t *testing.T) *effectCounter {
	t.Helper()
	d := &effectCounter{seen: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.seen[r.Header.Get("Idempotency-Key")]++
		d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"shipped": true}`)
	}))
	t.Cleanup(d.Close)
	return d
}

// counts returns how often each key was seen.
func (d *effectCounter) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.seen))
	for k, v := range d.seen {
		out[k] = v
	}
	return out
}

// sharedQueues are a RabbitMQ queue and a JetStream stream with random names, deleted
// when the test ends, and what publishes to them.
type sharedQueues struct {
	amqpURL, natsURL string
	queue            string // RabbitMQ
	stream, subject  string // JetStream
	ch               *amqp.Channel
	js               jetstream.JetStream
}

func newSharedQueues(t *testing.T) *sharedQueues {
	t.Helper()
	q := &sharedQueues{amqpURL: testsvc.AMQP(t), natsURL: testsvc.NATS(t)}
	sfx := testsvc.Suffix()
	q.queue, q.stream, q.subject = "onceflow-shared-"+sfx, "SHARED_"+strings.ToUpper(sfx), "shared-"+sfx+".orders"
	conn, err := amqp.Dial(q.amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if q.ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ch.QueueDeclare(q.queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.ch.QueueDelete(q.queue, false, false, false) })
	nc, err := nats.Connect(q.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if q.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := q.js.CreateStream(ctx, jetstream.StreamConfig{Name: q.stream, Subjects: []string{q.subject}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.js.DeleteStream(context.Background(), q.stream) })
	return q
}

// publish sends the orders first..last to both queues, each with its message id; the
// orders for which again is true are sent a second time, with the same id.
func (q *sharedQueues) publish(t *testing.T, first, last int, again func(int) bool) {
	t.Helper()
	ctx := context.Background()
	for i := first; i <= last; i++ {
		for n := 0; n < 1 || (n < 2 && again(i)); n++ {
			body := []byte(fmt.Sprintf(`{"order_id": %d}`, i))
			id := "order-" + strconv.Itoa(i)
			if err := q.ch.PublishWithContext(ctx, "", q.queue, false, false, amqp.Publishing{MessageId: id, Body: body}); err != nil {
				t.Fatal(err)
			}
			// No Nats-Msg-Id: the stream would drop the repeat itself. The queue's run key
			// is the Order-Id header.
			if _, err := q.js.PublishMsg(ctx, &nats.Msg{Subject: q.subject, Data: body, Header: nats.Header{"Order-Id": []string{id}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// queueStarted is what a worker's /metrics counts of the messages of workflow that
// started a run.
func queueStarted(t *testing.T, metricsURL, workflow string) int {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`onceflow_queue_messages_total\{outcome="started",workflow="` + regexp.QuoteMeta(workflow) + `"\} (\d+)`)
	m := re.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// Two onceflow worker processes share one RabbitMQ queue and one JetStream consumer:
// each consumes from both, every message is one run and its effect is requested once,
// a message sent twice under one id is one run too, and nothing is rejected. Then one
// worker is killed (SIGKILL) in the middle of a second batch: the messages it held are
// redelivered to the other, and every message is still one run.
func TestWorkersShareQueues(t *testing.T) {
	db := withSchema(t, postgresURL(t))
	q := newSharedQueues(t)
	dest := newEffectCounter(t)
	dir := t.TempDir()
	consumer := "onceflow-shared-" + testsvc.Suffix()
	for _, f := range []struct{ name, block string }{
		{"orders-amqp", "amqp: {queue: " + q.queue + "}"},
		{"orders-nats", "nats: {stream: " + q.stream + ", consumer: " + consumer + ", ack_wait: 2s}\n  run_key: \"{headers.Order-Id}\""},
	} {
		src := fmt.Sprintf(sharedQueueWorkflow, f.name, f.block, f.name, f.name)
		if err := os.WriteFile(filepath.Join(dir, f.name+".yaml"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runOK(t, "migrate", "--db", db)
	env := []string{"ORDERS_DEST=" + dest.URL, "ONCEFLOW_AMQP_URL=" + q.amqpURL, "ONCEFLOW_NATS_URL=" + q.natsURL}
	var workers []*command
	var metricsURLs []string
	for range 2 {
		w := startCommand(t, env, "worker", "--db", db, "--workflows", dir, "--allow-net", "127.0.0.1/32", "--metrics-addr", "127.0.0.1:0",
			"--lease", "2s", "--shutdown-grace", "1s")
		metricsURLs = append(metricsURLs, w.waitLog("serving metrics", 1)["addr"].(string))
		w.waitLog("onceflow worker running", 1)
		w.waitLog("queue consumer connected", 2) // both queues
		workers = append(workers, w)
	}
	st := openPostgres(t, db)
	defer st.Close()
	ctx := context.Background()
	runs := func(workflow string) []*store.Run {
		t.Helper()
		list, err := st.RunList(ctx, store.RunListParams{Workflow: workflow, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	// settle waits until each workflow has want completed runs, one per order id.
	settle := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; {
			done := true
			var status []string
			for _, wf := range []string{"orders-amqp", "orders-nats"} {
				list := runs(wf)
				completed := 0
				for _, r := range list {
					if r.State == store.StateCompleted {
						completed++
					}
				}
				if completed < want {
					done = false
				}
				status = append(status, fmt.Sprintf("%d of %d runs of %s started, %d completed", len(list), want, wf, completed))
				if len(list) == 0 {
					status[len(status)-1] += ": no worker consumed the queue"
				}
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 60 s: %s", strings.Join(status, "; "))
			}
			time.Sleep(50 * time.Millisecond) // polling the database until the deadline
		}
	}
	// check asserts one run per order id 1..n in each workflow, nothing rejected, and
	// every effect requested (at most once each when once is set).
	check := func(n int, once bool) {
		t.Helper()
		seen := dest.counts()
		for _, wf := range []string{"orders-amqp", "orders-nats"} {
			list := runs(wf)
			keys := map[string]bool{}
			for _, r := range list {
				if keys[r.RunKey] {
					t.Errorf("%s: two runs for %s", wf, r.RunKey)
				}
				keys[r.RunKey] = true
			}
			if len(list) != n {
				t.Errorf("%s: %d runs, want %d (one per message id)", wf, len(list), n)
			}
			if rejected := runs(wf + ".rejected"); len(rejected) != 0 {
				t.Errorf("%s: %d messages rejected", wf, len(rejected))
			}
			for i := 1; i <= n; i++ {
				key := fmt.Sprintf("%s:%d", wf, i)
				if !keys["order-"+strconv.Itoa(i)] {
					t.Errorf("%s: no run for order-%d", wf, i)
				}
				if c := seen[key]; c == 0 || (once && c != 1) {
					t.Errorf("effect %s requested %d times", key, c)
				}
			}
		}
	}

	// Phase 1: 190 orders per queue, 10 of them sent twice.
	const first = 190
	q.publish(t, 1, first, func(i int) bool { return i%19 == 0 })
	settle(first)
	check(first, true)
	for _, wf := range []string{"orders-amqp", "orders-nats"} {
		total := 0
		for i, u := range metricsURLs {
			n := queueStarted(t, u, wf)
			if n == 0 {
				t.Errorf("worker %d started no run of %s: the workers do not share the queue", i+1, wf)
			}
			total += n
		}
		if total != first {
			t.Errorf("%s: the workers started %d runs together, want %d", wf, total, first)
		}
	}

	// Phase 2: 100 more orders per queue; the first worker is killed once some of them
	// are stored and before all are.
	const second = 100
	q.publish(t, first+1, first+second, func(int) bool { return false })
	waitFor(t, "some runs of the second batch", func() bool {
		n := len(runs("orders-amqp")) + len(runs("orders-nats"))
		return n > 2*first && n < 2*(first+second)
	})
	if err := workers[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	settle(first + second)
	check(first+second, false)
}

// A reload that changes a file's queue: settings — reconfigures it, removes it with its
// file, or adds one — is refused with the reason, and the consumer started with the
// process keeps consuming: a message sent after the refused reloads still starts its
// run. (A reload used to take such files silently: the new queue was never consumed, and
// a removed workflow's consumer kept taking messages it could not start.)
func TestReloadRefusesQueueChanges(t *testing.T) {
	q := newSharedQueues(t)
	dest := newEffectCounter(t)
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	amqpFile := func(prefetch int) string {
		return fmt.Sprintf(sharedQueueWorkflow, "orders-amqp", fmt.Sprintf("amqp: {queue: %s, prefetch: %d}", q.queue, prefetch), "orders-amqp", "orders-amqp")
	}
	write("orders-amqp.yaml", amqpFile(10))
	write("other.yaml", "name: other\nsteps:\n  - id: call\n    kind: http\n    http: {url: \"{env.ORDERS_DEST}/other\"}\n")
	const admin = "admin-secret-0123456789"
	c := startCommand(t, []string{"ORDERS_DEST=" + dest.URL, "ONCEFLOW_AMQP_URL=" + q.amqpURL, "ONCEFLOW_NATS_URL=" + q.natsURL,
		"ONCEFLOW_API_TOKENS=ops:admin:" + admin},
		"serve", "--db", "sqlite://"+filepath.Join(t.TempDir(), "q.db"), "--workflows", dir, "--addr", "127.0.0.1:0", "--allow-net", "127.0.0.1/32")
	base := c.waitLog("onceflow serving", 1)["addr"].(string)
	c.waitLog("queue consumer connected", 1)
	reload := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/admin/reload", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	published := 0
	consumed := func() {
		t.Helper()
		published++
		q.publish(t, published, published, func(int) bool { return false })
		key := fmt.Sprintf("orders-amqp:%d", published)
		waitFor(t, "the effect of order "+strconv.Itoa(published), func() bool { return dest.counts()[key] == 1 })
	}
	consumed()

	natsFile := fmt.Sprintf(sharedQueueWorkflow, "orders-nats", "nats: {stream: "+q.stream+"}", "orders-nats", "orders-nats")
	for _, tc := range []struct {
		what, want string
		change     func()
	}{
		{"prefetch changed", "the queue: settings of workflow orders-amqp changed", func() { write("orders-amqp.yaml", amqpFile(20)) }},
		{"file removed", "workflow orders-amqp no longer consumes its queue", func() {
			if err := os.Remove(filepath.Join(dir, "orders-amqp.yaml")); err != nil {
				t.Fatal(err)
			}
		}},
		{"queue added", "workflow orders-nats now consumes a queue", func() { write("orders-nats.yaml", natsFile) }},
	} {
		tc.change()
		code, body := reload()
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, tc.want) || !strings.Contains(body, "restart") {
			t.Errorf("%s: reload answered %d %s; want 422 saying %q and to restart", tc.what, code, body, tc.want)
		}
		// Undo the change: the old consumer keeps consuming.
		_ = os.Remove(filepath.Join(dir, "orders-nats.yaml"))
		write("orders-amqp.yaml", amqpFile(10))
		consumed()
	}
	if code, body := reload(); code != http.StatusOK {
		t.Fatalf("reload of the files as they were started: %d %s", code, body)
	}
}
