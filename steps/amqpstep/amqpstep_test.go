package amqpstep_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/steps/amqpstep"
)

// queue declares a queue of its own on the real broker, deleted when the test ends.
func queue(t *testing.T) (url, name string, ch *amqp.Channel) {
	t.Helper()
	url = testsvc.AMQP(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err = conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name = "onceflow-test-" + testsvc.Suffix()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(name, false, false, false) })
	return url, name, ch
}

func sc(key string) *onceflow.StepContext {
	return &onceflow.StepContext{RunID: 3, RunKey: "evt", Workflow: "order-events", Step: "warehouse", EffectKey: key, Attempt: 1,
		Input: json.RawMessage(`{"order_id": 1001}`)}
}

func count(t *testing.T, ch *amqp.Channel, q string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if info.Messages == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s holds %d messages, want %d", q, info.Messages, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the broker's count until the deadline
	}
}

func TestPublishConfirmedWithMessageID(t *testing.T) {
	url, q, ch := queue(t)
	conn := &amqpstep.Conn{URL: url}
	t.Cleanup(conn.Close)
	st, err := amqpstep.New(amqpstep.Spec{RoutingKey: q, Body: map[string]any{"order_id": "{input.order_id}"}, Headers: map[string]string{"order": "{input.order_id}"}}, conn)
	if err != nil {
		t.Fatal(err)
	}
	key := "warehouse:1001:" + testsvc.Suffix()
	out, err := st.Do(context.Background(), sc(key))
	if err != nil {
		t.Fatal(err)
	}
	if o := out.(amqpstep.Output); o.MessageID != key || o.RoutingKey != q {
		t.Fatalf("%+v", o)
	}
	count(t, ch, q, 1)
	d, ok, err := ch.Get(q, true)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if d.MessageId != key || string(d.Body) != `{"order_id":1001}` || d.ContentType != "application/json" || d.Headers["order"] != "1001" || d.DeliveryMode != amqp.Persistent {
		t.Fatalf("delivery %+v", d)
	}
}

func TestUnroutableAndUnknownExchangeArePermanent(t *testing.T) {
	url, _, _ := queue(t)
	conn := &amqpstep.Conn{URL: url}
	t.Cleanup(conn.Close)
	for name, spec := range map[string]amqpstep.Spec{
		"returned":  {RoutingKey: "no-such-queue-" + testsvc.Suffix(), Body: "x"},
		"not found": {Exchange: "no-such-exchange-" + testsvc.Suffix(), RoutingKey: "x", Body: "x"},
	} {
		st, err := amqpstep.New(spec, conn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Do(context.Background(), sc("k-"+testsvc.Suffix()))
		var se *onceflow.StepError
		if !errors.As(err, &se) || se.Class != onceflow.Permanent {
			t.Errorf("%s: %v, want permanent", name, err)
		}
	}
}

// proxy forwards TCP to the broker; once drop is set it swallows what the broker sends.
type proxy struct {
	ln   net.Listener
	drop atomic.Bool
	wg   sync.WaitGroup
	mu   sync.Mutex
	open []net.Conn
}

// kill cuts every connection through the proxy.
func (p *proxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.open {
		c.Close()
	}
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.open = append(p.open, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				defer p.wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && !p.drop.Load() {
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

// A confirm lost on the way back leaves the outcome unknown — the broker holds the
// message — and the step's default is to retry under the same message_id.
func TestLostConfirmIsUnknown(t *testing.T) {
	url, q, ch := queue(t)
	host := strings.TrimSuffix(strings.SplitN(url, "@", 2)[1], "/")
	p := newProxy(t, host)
	conn := &amqpstep.Conn{URL: strings.Replace(url, host, p.ln.Addr().String(), 1)}
	t.Cleanup(conn.Close)
	t.Cleanup(p.kill) // first: the connection cannot close politely without answers
	st, err := amqpstep.New(amqpstep.Spec{RoutingKey: q, Body: "pick 1001", Timeout: time.Second}, conn)
	if err != nil {
		t.Fatal(err)
	}
	st.Hooks.BeforePublish = func() { p.drop.Store(true) }
	_, err = st.Do(context.Background(), sc("k-"+testsvc.Suffix()))
	if onceflow.ClassOf(err) != onceflow.Unknown || !strings.Contains(err.Error(), "consumers deduplicate by message_id") {
		t.Fatalf("%v (%s), want unknown", err, onceflow.ClassOf(err))
	}
	count(t, ch, q, 1) // it did arrive
	if amqpstep.DefaultOnUnknown != onceflow.RetrySameKey {
		t.Fatal("amqp steps retry an unknown outcome under the same message_id by default")
	}
}

// A routing key's field is one word: a value with a dot would reach the queues of other
// bindings of a topic exchange, so it is refused before anything is published.
func TestRoutingKeyValueIsOneWord(t *testing.T) {
	url, eu, ch := queue(t)
	_, vip, _ := queue(t)
	exchange := "onceflow-test-topic-" + testsvc.Suffix()
	if err := ch.ExchangeDeclare(exchange, "topic", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	for q, binding := range map[string]string{eu: "orders.eu", vip: "orders.*.vip"} {
		if err := ch.QueueBind(q, binding, exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	conn := &amqpstep.Conn{URL: url}
	t.Cleanup(conn.Close)
	st, err := amqpstep.New(amqpstep.Spec{Exchange: exchange, RoutingKey: "orders.{input.region}", Body: "pick {input.order_id}"}, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, region := range []string{"eu.vip", "eu\x00", "eu"} {
		c := sc("k-" + testsvc.Suffix())
		c.Input = json.RawMessage(`{"order_id": 1001, "region": ` + strconvQuote(region) + `}`)
		_, err := st.Do(context.Background(), c)
		var se *onceflow.StepError
		switch {
		case region == "eu":
			if err != nil {
				t.Fatalf("region eu: %v", err)
			}
		case !errors.As(err, &se) || se.Class != onceflow.Permanent || se.Reason != amqpstep.ReasonRoutingKeyInvalid || !strings.Contains(err.Error(), "not one word"):
			t.Fatalf("region %q: %v, want a permanent %s", region, err, amqpstep.ReasonRoutingKeyInvalid)
		}
	}
	count(t, ch, eu, 1)
	count(t, ch, vip, 0)
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A step compiled without a connection only checks its spec: run, it refuses for good
// with what to fix, and publishes nothing.
func TestStepWithoutConnRefusesToRun(t *testing.T) {
	st, err := amqpstep.New(amqpstep.Spec{RoutingKey: "orders", Body: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Do(context.Background(), sc("k"))
	if onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "no connection") {
		t.Fatalf("Do without a connection = %v (%s), want a permanent error naming the missing connection", err, onceflow.ClassOf(err))
	}
}
