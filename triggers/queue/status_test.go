package queue_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
)

type upMetrics struct{ up chan bool }

func (m upMetrics) QueueConnected(_, _ string, up bool) {
	select {
	case m.up <- up:
	default:
	}
}
func (upMetrics) QueueMessage(string, string) {}

func client(t *testing.T) (*onceflow.Client, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ordersWorkflow()); err != nil {
		t.Fatal(err)
	}
	return c, st
}

// A consumer that cannot consume says why, keeps trying, and reports itself down.
func TestConsumerReportsWhyItIsNotConsuming(t *testing.T) {
	natsURL, amqpURL := testsvc.NATS(t), testsvc.AMQP(t)
	c, _ := client(t)
	cases := []struct {
		name string
		run  func(cfg queue.Config) triggers.Consumer
		want string
	}{
		{"nats unreachable", func(cfg queue.Config) triggers.Consumer {
			return mustNATS(t, cfg, natsqueue.Config{URL: "nats://127.0.0.1:1", Stream: "ORDERS"})
		}, "cannot reach the NATS server"},
		{"nats unknown stream", func(cfg queue.Config) triggers.Consumer {
			return mustNATS(t, cfg, natsqueue.Config{URL: natsURL, Stream: "NO_SUCH_STREAM_" + strings.ToUpper(suffix())})
		}, "does not exist; create it or fix queue.nats.stream"},
		{"amqp unreachable", func(cfg queue.Config) triggers.Consumer {
			return mustAMQP(t, cfg, amqpqueue.Config{URL: "amqp://guest:guest@127.0.0.1:1/", Queue: "orders"})
		}, "cannot reach the AMQP broker"},
		{"amqp unknown queue", func(cfg queue.Config) triggers.Consumer {
			return mustAMQP(t, cfg, amqpqueue.Config{URL: amqpURL, Queue: "no-such-queue-" + suffix()})
		}, "does not exist; declare it or fix queue.amqp.queue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := upMetrics{up: make(chan bool, 8)}
			cons := tc.run(queue.Config{Workflow: "orders", Metrics: m})
			status := cons.Err
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- cons.Run(ctx, c) }()
			// Two reports of "down": it failed, and tried again.
			for range 2 {
				select {
				case up := <-m.up:
					if up {
						t.Fatal("reported up")
					}
				case <-time.After(20 * time.Second):
					t.Fatal("no second attempt")
				}
			}
			if err := status(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("status %v, want %q", err, tc.want)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// While more steps are due than MaxBacklog, the consumer pulls nothing; once workers
// catch up it goes on.
func TestBacklogPausesConsumption(t *testing.T) {
	const published, maxBacklog, batch = 50, 5, 20
	for _, mk := range []func(*testing.T) *broker{natsBroker, amqpBroker} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) {
			c, st := client(t)
			var msgs []message
			for i := range published {
				msgs = append(msgs, message{id: "m-" + strconv.Itoa(i), payload: `{"order_id": ` + strconv.Itoa(i) + `}`})
			}
			b.publish(t, msgs)
			cfg := queue.Config{Workflow: "orders", MaxBacklog: maxBacklog}
			var n interface {
				Run(context.Context, triggers.Starter) error
				Paused() bool
			}
			switch b.name {
			case "nats":
				cfg.RunKey = "{headers.Event-Id}"
				n = mustNATS(t, cfg, natsqueue.Config{URL: b.url, Stream: b.queue, Consumer: "onceflow-orders", Batch: batch})
			case "amqp":
				n = mustAMQP(t, cfg, amqpqueue.Config{URL: b.url, Queue: b.queue, Prefetch: batch})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- n.Run(ctx, c) }()
			waitFor(t, "the consumer pauses", func() bool { return n.Paused() })
			orders, _, _ := counts(t, st)
			switch b.name {
			case "nats":
				// The 50 messages were there before the first fetch of 20.
				if orders != batch {
					t.Fatalf("%d runs while paused, want the first batch of %d", orders, batch)
				}
				if ok, desc := b.settled(t); ok || !strings.Contains(desc, "pending 30, ack pending 0") {
					t.Fatalf("broker while paused: %s, want 30 messages left unpulled", desc)
				}
			case "amqp":
				// The batches end with what arrived within a few milliseconds: the consumer
				// pauses after the first batch that brings the due steps above 5, and takes
				// nothing more than the prefetch the broker has already handed it.
				if orders <= maxBacklog || orders > maxBacklog+batch {
					t.Fatalf("%d runs while paused, want more than %d and at most %d", orders, maxBacklog, maxBacklog+batch)
				}
				_, desc := b.settled(t)
				var ready int64
				if _, err := fmt.Sscanf(desc, "%d ready", &ready); err != nil {
					t.Fatal(desc, err)
				}
				if ready < published-orders-batch {
					t.Fatalf("broker while paused: %s, want at least %d messages ready (not handed to the paused consumer)", desc, published-orders-batch)
				}
				t.Logf("paused after %d runs; broker: %s", orders, desc)
			}
			// Workers catch up: consumption resumes.
			waitFor(t, "all 50 runs", func() bool {
				if _, err := c.Work(ctx); err != nil {
					t.Fatal(err)
				}
				orders, _, _ := counts(t, st)
				return orders == published
			})
			cancel()
			<-done
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling an observable condition until the deadline
	}
}
