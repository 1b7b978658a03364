package queue_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
)

// cutter forwards TCP connections to a broker until cut, which closes them all and closes
// every connection made afterwards at once, until mend.
type cutter struct {
	ln   net.Listener
	down atomic.Bool
	mu   sync.Mutex
	open []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			if c.down.Load() {
				in.Close()
				continue
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.open = append(c.open, in, out)
			c.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		c.cut()
		wg.Wait()
	})
	return c
}

// cut drops every connection and refuses new ones.
func (c *cutter) cut() {
	c.down.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.open {
		conn.Close()
	}
	c.open = nil
}

// mend lets connections through again.
func (c *cutter) mend() { c.down.Store(false) }

// via is u with its host replaced by the cutter's address.
func (c *cutter) via(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.Host = c.ln.Addr().String()
	return p.String()
}

// connMetrics records every connection report, with the consumer's status at that moment.
type connMetrics struct {
	reports chan connReport
	status  func() error
}

type connReport struct {
	up  bool
	err error
}

func (m *connMetrics) QueueConnected(_, _ string, up bool) {
	select {
	case m.reports <- connReport{up, m.status()}:
	default:
	}
}
func (*connMetrics) QueueMessage(string, string) {}

// await waits for a report of up and returns the status reported with it.
func (m *connMetrics) await(t *testing.T, up bool) error {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case r := <-m.reports:
			if r.up == up {
				return r.err
			}
		case <-timeout:
			t.Fatalf("the consumer never reported connected=%v", up)
		}
	}
}

// A connection lost while consuming is reported (status and metrics), retried until the
// broker can be reached again, and consumption goes on where it stopped; without a run_key
// template the message id (Nats-Msg-Id, AMQP message_id) is the run key.
func TestConsumerReconnectsAfterLostConnection(t *testing.T) {
	for _, mk := range []func(*testing.T) *broker{natsBroker, amqpBroker} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) {
			c, st := client(t)
			u, err := url.Parse(b.url)
			if err != nil {
				t.Fatal(err)
			}
			cut := newCutter(t, u.Host)
			m := &connMetrics{reports: make(chan connReport, 4096)}
			cfg := queue.Config{Workflow: "orders", Metrics: m}
			var cons triggers.Consumer
			switch b.name {
			case "nats":
				cons = mustNATS(t, cfg, natsqueue.Config{URL: cut.via(t, b.url), Stream: b.queue, Consumer: "onceflow-orders"})
			case "amqp":
				cons = mustAMQP(t, cfg, amqpqueue.Config{URL: cut.via(t, b.url), Queue: b.queue})
			}
			m.status = cons.Err
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- cons.Run(ctx, c) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()

			publishWithID(t, b, "evt-before", `{"order_id": 1}`)
			m.await(t, true)
			waitFor(t, "the first message's run", func() bool { _, err := st.RunGetByKey(ctx, "orders", "evt-before"); return err == nil })

			cut.cut()
			lost := m.await(t, false)
			if lost == nil || !strings.Contains(lost.Error(), "connection") || !strings.Contains(lost.Error(), "lost") {
				t.Fatalf("status when the connection was cut: %v, want it lost", lost)
			}
			retried := m.await(t, false) // the next attempt, after a backoff, cannot connect
			if retried == nil || !strings.Contains(retried.Error(), "cannot reach") {
				t.Fatalf("status of the next attempt: %v, want cannot reach", retried)
			}
			t.Logf("status when cut: %v; then: %v", lost, retried)
			publishWithID(t, b, "evt-during", `{"order_id": 2}`)

			cut.mend()
			m.await(t, true)
			waitFor(t, "the run of the message published while the connection was cut", func() bool {
				_, err := st.RunGetByKey(ctx, "orders", "evt-during")
				return err == nil
			})
			waitFor(t, "status connected", func() bool { return m.status() == nil })
			orders, _, _ := counts(t, st)
			if orders != 2 {
				t.Fatalf("%d runs, want 2", orders)
			}
		})
	}
}

// publishWithID publishes payload with the broker's own message id set to id, on a
// connection of its own (not through the cutter).
func publishWithID(t *testing.T, b *broker, id, payload string) {
	t.Helper()
	ctx := context.Background()
	switch b.name {
	case "nats":
		nc, err := nats.Connect(b.url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(b.subject)
		msg.Data = []byte(payload)
		msg.Header.Set(jetstream.MsgIDHeader, id)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	case "amqp":
		conn, err := amqp.Dial(b.url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.PublishWithContext(ctx, "", b.queue, false, false,
			amqp.Publishing{MessageId: id, Body: []byte(payload), DeliveryMode: amqp.Persistent}); err != nil {
			t.Fatal(err)
		}
	}
}
