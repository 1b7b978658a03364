package queue_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("ONCEFLOW_TEST_CHILD") == "queue" {
		os.Exit(child())
	}
	goleak.VerifyTestMain(testsvc.Report(m))
}

func suffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ordersWorkflow is the workflow the messages start: one no-op step.
func ordersWorkflow() onceflow.Workflow {
	return onceflow.Workflow{Name: "orders", Entity: "order:{input.order_id}", RequiredInput: []string{"order_id"}, Steps: []onceflow.Step{
		{ID: "note", EffectKey: "note:{run.key}", Do: func(context.Context, *onceflow.StepContext) (any, error) { return map[string]any{}, nil }},
	}}
}

// startedMetrics counts the messages that started or found their run.
type startedMetrics struct{ n atomic.Int64 }

func (*startedMetrics) QueueConnected(string, string, bool) {}
func (m *startedMetrics) QueueMessage(_, outcome string) {
	if outcome != queue.Rejected {
		m.n.Add(1)
	}
}

// child consumes the queue the environment names into the SQLite file it names, executing
// steps, until SIGTERM; with ONCEFLOW_TEST_BLOCK_AT=n it stops, after storing its n-th
// batch and before acknowledging it, and says "blocked N", N being how many messages of
// that batch started or found their run, to be killed there. With
// ONCEFLOW_TEST_BLOCK_BEFORE_STORE=1 as well it stops when it received its n-th batch,
// before storing anything of it, and says "received N", N being the batch's size.
func child() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 1 }
	st, err := sqlite.Open(ctx, os.Getenv("ONCEFLOW_TEST_DB"), sqlite.Options{})
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st, LeaseFor: 2 * time.Second, ReapInterval: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err != nil {
		return fail(err)
	}
	counted := &startedMetrics{}
	cfg := queue.Config{Workflow: "orders", MaxBacklog: 500, Metrics: counted}
	if os.Getenv("ONCEFLOW_TEST_BROKER") == "nats" {
		cfg.RunKey = "{headers.Event-Id}"
	}
	if n, _ := strconv.Atoi(os.Getenv("ONCEFLOW_TEST_BLOCK_AT")); n > 0 && os.Getenv("ONCEFLOW_TEST_BLOCK_BEFORE_STORE") == "1" {
		batches := 0
		cfg.Hooks.BeforeStore = func(size int) {
			if batches++; batches == n {
				fmt.Println("received", size)
				select {}
			}
		}
	} else if n > 0 {
		batches := 0
		cfg.Hooks.AfterStored = func(int) {
			stored := counted.n.Swap(0) // the batches are handled one after another
			if batches++; batches == n {
				fmt.Println("blocked", stored)
				select {}
			}
		}
	}
	var cons triggers.Consumer
	switch os.Getenv("ONCEFLOW_TEST_BROKER") {
	case "nats":
		cons, err = natsqueue.New(cfg, natsqueue.Config{URL: os.Getenv("ONCEFLOW_TEST_URL"), Stream: os.Getenv("ONCEFLOW_TEST_QUEUE"),
			Consumer: "onceflow-orders", AckWait: 5 * time.Second, Batch: 20})
	case "amqp":
		cons, err = amqpqueue.New(cfg, amqpqueue.Config{URL: os.Getenv("ONCEFLOW_TEST_URL"), Queue: os.Getenv("ONCEFLOW_TEST_QUEUE"), Prefetch: 20})
	}
	if err != nil {
		return fail(err)
	}
	for _, w := range append([]onceflow.Workflow{ordersWorkflow()}, cons.(triggers.Companions).Companions(c)...) {
		if err := c.Register(w); err != nil {
			return fail(err)
		}
	}
	run := func(ctx context.Context) error { return cons.Run(ctx, c) }
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	fmt.Println("started")
	if err := run(ctx); err != nil {
		return fail(err)
	}
	if err := <-done; err != nil {
		return fail(err)
	}
	return 0
}

// message is one message of the acceptance scenario.
type message struct {
	id      string
	payload string
}

// scenario is 1,000 orders, 200 of them published twice, 10 messages that are not JSON
// and 10 without the required order_id, shuffled.
func scenario() (msgs []message, keys []string) {
	for i := range 1000 {
		id := fmt.Sprintf("evt-%04d", i)
		keys = append(keys, id)
		m := message{id: id, payload: fmt.Sprintf(`{"order_id": %d, "total_cents": %d}`, 5000+i, 100*i)}
		msgs = append(msgs, m)
		if i%5 == 0 {
			msgs = append(msgs, m)
		}
	}
	for i := range 10 {
		msgs = append(msgs, message{id: fmt.Sprintf("bad-json-%d", i), payload: "order=1&total=2"})
		msgs = append(msgs, message{id: fmt.Sprintf("bad-input-%d", i), payload: `{"total_cents": 1}`})
	}
	for i := len(msgs) - 1; i > 0; i-- {
		j, _ := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		msgs[i], msgs[j.Int64()] = msgs[j.Int64()], msgs[i]
	}
	return msgs, keys
}

// broker is one side of the acceptance test.
type broker struct {
	name, url, queue string
	// subject is the subject the NATS stream captures.
	subject string
	publish func(t *testing.T, msgs []message)
	// settled reports whether every message was acknowledged, with a description.
	settled func(t *testing.T) (bool, string)
	// detached waits until the broker has seen every consumer go, so that it has put back
	// what they left unacknowledged.
	detached func(t *testing.T)
}

func natsBroker(t *testing.T) *broker {
	url := testsvc.NATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sfx := suffix()
	name, subject := "ORDERS_"+strings.ToUpper(sfx), "orders."+sfx
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return &broker{name: "nats", url: url, queue: name, subject: subject,
		publish: func(t *testing.T, msgs []message) {
			for _, m := range msgs {
				msg := nats.NewMsg(subject)
				msg.Data = []byte(m.payload)
				msg.Header.Set("Event-Id", m.id) // the run key; no Nats-Msg-Id, so both copies reach the stream
				if _, err := js.PublishMsg(ctx, msg); err != nil {
					t.Fatal(err)
				}
			}
		},
		settled: func(t *testing.T) (bool, string) {
			c, err := js.Consumer(ctx, name, "onceflow-orders")
			if err != nil {
				return false, err.Error()
			}
			info, err := c.Info(ctx)
			if err != nil {
				return false, err.Error()
			}
			return info.NumPending == 0 && info.NumAckPending == 0, fmt.Sprintf("pending %d, ack pending %d, redelivered %d", info.NumPending, info.NumAckPending, info.NumRedelivered)
		},
		// JetStream counts unacknowledged messages as ack pending until they are
		// acknowledged or redelivered, whether or not their consumer is still there.
		detached: func(*testing.T) {},
	}
}

func amqpBroker(t *testing.T) *broker {
	url := testsvc.AMQP(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := "onceflow-orders-" + suffix()
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(q, false, false, false) })
	return &broker{name: "amqp", url: url, queue: q,
		publish: func(t *testing.T, msgs []message) {
			for _, m := range msgs {
				if err := ch.PublishWithContext(context.Background(), "", q, false, false,
					amqp.Publishing{MessageId: m.id, Body: []byte(m.payload), DeliveryMode: amqp.Persistent}); err != nil {
					t.Fatal(err)
				}
			}
		},
		settled: func(t *testing.T) (bool, string) {
			info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Unacknowledged messages are not counted as ready; the caller checks again after
			// the consumer has gone, when they would be ready again.
			return info.Messages == 0, fmt.Sprintf("%d ready, %d consumers", info.Messages, info.Consumers)
		},
		detached: func(t *testing.T) {
			waitFor(t, "the broker to see the consumer gone", func() bool {
				info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				return info.Consumers == 0
			})
		},
	}
}

// proc is a running child.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, b *broker, db string, blockAt int, beforeStore bool) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ONCEFLOW_TEST_CHILD=queue", "ONCEFLOW_TEST_DB="+db, "ONCEFLOW_TEST_BROKER="+b.name,
		"ONCEFLOW_TEST_URL="+b.url, "ONCEFLOW_TEST_QUEUE="+b.queue, "ONCEFLOW_TEST_BLOCK_AT="+strconv.Itoa(blockAt))
	if beforeStore {
		cmd.Env = append(cmd.Env, "ONCEFLOW_TEST_BLOCK_BEFORE_STORE=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		close(p.lines)
	}()
	return p
}

// waitLine waits for the child to print a line that is word or begins with word and a
// space, and returns the rest of the line.
func (p *proc) waitLine(t *testing.T, word string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				_ = p.cmd.Wait()
				t.Fatalf("the child exited before saying %q", word)
			}
			if l == word {
				return ""
			}
			if rest, ok := strings.CutPrefix(l, word+" "); ok {
				return rest
			}
		case <-timeout:
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			t.Fatalf("the child never said %q", word)
		}
	}
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatal("the child did not die by SIGKILL")
	}
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("the child did not stop cleanly: %v", err)
	}
}

func counts(t *testing.T, st *sqlite.Store) (orders, rejects, reviews int64) {
	t.Helper()
	s, err := st.StatsGet(context.Background(), store.StatsGetParams{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Runs {
		switch r.Workflow {
		case "orders":
			orders += r.Count
		case "orders.rejected":
			rejects += r.Count
		}
	}
	for _, r := range s.Review {
		if r.Workflow == "orders.rejected" {
			reviews += r.Count
		}
	}
	return
}

// The acceptance scenario against a real broker: 1,000 orders, 200 published twice, 20
// bad messages; the consuming process is SIGKILLed five times before acknowledging a
// batch: three times after storing it, twice before. In the end every order has exactly
// one run, every message was acknowledged, the stored messages of the killed batches were
// redelivered and found their runs, and the bad ones wait in review with their reasons.
func TestConsumeExactlyOneRunPerMessage(t *testing.T) {
	for _, mk := range []func(*testing.T) *broker{natsBroker, amqpBroker} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			db := filepath.Join(t.TempDir(), "onceflow.db")
			st, err := sqlite.Open(ctx, db, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			msgs, keys := scenario()
			b.publish(t, msgs)

			// Kills 1, 3 and 5 come after a batch was stored and before it was acknowledged;
			// unacked counts the deliveries they left stored (a run started or found) and
			// unacknowledged: each comes again and finds its run. Kills 2 and 4 come when a
			// batch was received and nothing of it stored: a consumer that acknowledged
			// before storing would lose those messages.
			var unacked int64
			for kill := 1; kill <= 5; kill++ {
				beforeStore := kill%2 == 0
				p := startChild(t, b, db, 2+kill%3, beforeStore)
				if beforeStore {
					n := p.waitLine(t, "received")
					p.kill(t)
					orders, _, _ := counts(t, st)
					t.Logf("kill %d: %d order runs stored; killed holding a batch of %s messages received and not stored", kill, orders, n)
					continue
				}
				n, err := strconv.ParseInt(p.waitLine(t, "blocked"), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				p.kill(t)
				unacked += n
				orders, _, _ := counts(t, st)
				t.Logf("kill %d: %d order runs stored, %d stored messages of the last batch not acknowledged", kill, orders, n)
			}
			if unacked == 0 {
				t.Fatal("no stored message was left unacknowledged by the kills")
			}

			// A last consumer runs until every message is acknowledged. A message still in
			// its hands when it is stopped goes back to the queue; then another one runs.
			var orders, rejects, reviews int64
			for round := 1; ; round++ {
				p := startChild(t, b, db, 0, false)
				p.waitLine(t, "started")
				deadline := time.Now().Add(90 * time.Second)
				var ok bool
				var desc string
				for {
					orders, rejects, reviews = counts(t, st)
					ok, desc = b.settled(t)
					if ok && orders == 1000 && rejects == 20 && reviews == 20 {
						break
					}
					if time.Now().After(deadline) {
						p.stop(t)
						t.Fatalf("not settled: %d order runs, %d rejected, %d in review; broker: %s", orders, rejects, reviews, desc)
					}
					time.Sleep(50 * time.Millisecond) // polling observable state until the deadline
				}
				p.stop(t)
				b.detached(t)
				if ok, desc := b.settled(t); ok {
					break
				} else if round == 3 {
					t.Fatalf("after the consumer stopped, not every message was acknowledged: %s", desc)
				}
			}

			for _, k := range keys {
				if _, err := st.RunGetByKey(ctx, "orders", k); err != nil {
					t.Fatalf("message %s has no run: %v", k, err)
				}
			}
			items, err := st.ReviewList(ctx, store.ReviewListParams{Workflow: "orders.rejected", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			reasons := map[onceflow.Reason]int{}
			for _, it := range items {
				reasons[it.Reason]++
				run, err := st.RunGetByID(ctx, it.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(run.Input), `"payload"`) || !strings.Contains(string(run.Input), `"reason"`) {
					t.Fatalf("rejected item without its raw message: %s", run.Input)
				}
			}
			if reasons[queue.ReasonInputNotJSON] != 10 || reasons[queue.ReasonInputInvalid] != 10 {
				t.Fatalf("review reasons %v, want 10 %s and 10 %s", reasons, queue.ReasonInputNotJSON, queue.ReasonInputInvalid)
			}
			evs, err := st.EventList(ctx, store.EventListParams{Limit: 100000})
			if err != nil {
				t.Fatal(err)
			}
			dups := 0
			for _, e := range evs {
				if e.Type == "run.deduplicated" && e.Workflow == "orders" {
					dups++
				}
			}
			// Every delivery that started no run found one: the second copies of the 200
			// messages published twice, and at least the redeliveries of the messages the
			// killed processes stored without acknowledging.
			if int64(dups) < 200+unacked {
				t.Fatalf("%d deliveries found their run, want at least 200 published twice + %d redelivered after a kill", dups, unacked)
			}
			t.Logf("%d order runs, %d rejected messages in review, %d deliveries found their run (at least 200 second copies + %d stored, not acknowledged and redelivered after a SIGKILL)", orders, rejects, dups, unacked)
		})
	}
}
