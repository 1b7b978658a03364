package queue_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
)

// noise is n bytes of hex digits that do not compress: PostgreSQL compresses an index
// entry before it checks its size.
func noise(n int) string {
	var b strings.Builder
	sum := sha256.Sum256([]byte("seed"))
	for b.Len() < n {
		b.WriteString(hex.EncodeToString(sum[:]))
		sum = sha256.Sum256(sum[:])
	}
	return b.String()[:n]
}

// keptInput is the input of the review item kept for the message whose run key (in the
// companion workflow) ends with suffix.
func keptInput(t *testing.T, st store.Store, suffix string) (map[string]any, *store.ReviewItem) {
	t.Helper()
	items, err := st.ReviewList(context.Background(), store.ReviewListParams{Workflow: "orders.rejected", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if !strings.HasSuffix(it.RunKey, suffix) {
			continue
		}
		run, err := st.RunGetByID(context.Background(), it.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var in map[string]any
		if err := json.Unmarshal(run.Input, &in); err != nil {
			t.Fatal(err)
		}
		return in, it
	}
	t.Fatalf("no review item for %s among %d", suffix, len(items))
	return nil, nil
}

// A message whose entity breaks the key rules — 3 KB (an index row PostgreSQL refuses),
// a NUL (a text it cannot store), a bidi override — is kept for review and acknowledged,
// on both stores: Handle does not fail (which would have the broker redeliver it forever),
// and a redelivery finds the same item.
func TestMessageWithABadEntityIsKeptForReview(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			c, trig := rejectingTrigger(t, st)
			cases := map[string]string{
				"seq:1": `{"order_id": "` + noise(3000) + `"}`,
				"seq:2": `{"order_id": "a\u0000b"}`,
				"seq:3": `{"order_id": "7\u202e"}`,
				"seq:4": `{"order_id": "8\u001b[2J"}`,
			}
			for range 2 { // the second time is a redelivery
				for id, payload := range cases {
					out, err := trig.Handle(ctx, queue.Message{Headers: map[string]string{"Event-Id": "e-" + id}, Payload: []byte(payload), Identity: id})
					if err != nil || out != queue.Rejected {
						t.Fatalf("%s: %s %v, want rejected", id, out, err)
					}
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
				if it.Reason != queue.ReasonInputInvalid || !strings.Contains(it.LastError, "entity") || !strings.Contains(it.LastError, "input.order_id") {
					t.Errorf("item %s: %s %q, want input_invalid naming the entity and input.order_id", it.RunKey, it.Reason, it.LastError)
				}
			}
		})
	}
}

// A message longer than the limit starts no run and is kept for review by its size and
// the digest of its payload, never its body, on both stores; a redelivery finds the same
// item; a message at the limit starts its run; and the limit counts headers too.
func TestMessageAboveTheLimitIsKeptByItsDigest(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			c, _ := rejectingTrigger(t, st)
			trig := natsHandler(t, c, queue.Config{Workflow: "orders", RunKey: "{headers.Event-Id}", MaxMessageBytes: 1000})
			fill := func(total int, hdr map[string]string) []byte {
				p := `{"order_id": 1, "pad": "`
				n := total - len(p) - 2 - (&queue.Message{Headers: hdr}).Size()
				return []byte(p + strings.Repeat("p", n) + `"}`)
			}
			big := queue.Message{Headers: map[string]string{"Event-Id": "e1"}, Identity: "seq:1"}
			big.Payload = fill(5000, big.Headers)
			longHeaders := queue.Message{Headers: map[string]string{"Event-Id": "e2", "X-Trace": strings.Repeat("t", 990)}, Payload: []byte(`{"order_id": 2}`), Identity: "seq:2"}
			atLimit := queue.Message{Headers: map[string]string{"Event-Id": "e3"}, Identity: "seq:3"}
			atLimit.Payload = fill(1000, atLimit.Headers)
			for range 2 { // the second time is a redelivery
				for _, m := range []queue.Message{big, longHeaders} {
					if out, err := trig.Handle(ctx, m); err != nil || out != queue.Rejected {
						t.Fatalf("%s (%d bytes): %s %v, want rejected", m.Identity, m.Size(), out, err)
					}
				}
			}
			if out, err := trig.Handle(ctx, atLimit); err != nil || out != queue.Started {
				t.Fatalf("a message of %d bytes, at the limit: %s %v, want started", atLimit.Size(), out, err)
			}
			workAll(t, c)
			runs, err := st.RunList(ctx, store.RunListParams{Workflow: "orders"})
			if err != nil || len(runs) != 1 || runs[0].RunKey != "e3" {
				var keys []string
				for _, r := range runs {
					keys = append(keys, r.RunKey)
				}
				t.Fatalf("order runs %v (%v), want only e3's", keys, err)
			}
			items, err := st.ReviewList(ctx, store.ReviewListParams{Workflow: "orders.rejected"})
			if err != nil || len(items) != 2 {
				t.Fatalf("%d review items (%v), want 2", len(items), err)
			}
			in, it := keptInput(t, st, "|seq:1")
			sum := sha256.Sum256(big.Payload)
			if it.Reason != queue.ReasonMessageTooLarge || in["size"] != float64(5000) || in["payload_bytes"] != float64(len(big.Payload)) ||
				in["payload_sha256"] != hex.EncodeToString(sum[:]) || in["payload"] != nil || in["payload_base64"] != nil {
				t.Fatalf("item of the large message: %s %v", it.Reason, in)
			}
			if !strings.Contains(it.LastError, "5000 bytes") || !strings.Contains(it.LastError, "limit is 1000") {
				t.Fatalf("the item's error does not say the size and the limit: %q", it.LastError)
			}
			if in, it := keptInput(t, st, "|seq:2"); it.Reason != queue.ReasonMessageTooLarge || in["payload"] != nil {
				t.Fatalf("item of the message with long headers: %s %v", it.Reason, in)
			}
		})
	}
}

// A message above the limit is digested, never copied or decoded: handling a 10 MB one
// allocates a small fraction of its size.
func TestMessageAboveTheLimitIsNotCopied(t *testing.T) {
	st := backends(t)["sqlite"](t)
	c, _ := rejectingTrigger(t, st)
	trig := natsHandler(t, c, queue.Config{Workflow: "orders", RunKey: "{headers.Event-Id}"})
	payload := []byte(`{"order_id": 1, "pad": "` + strings.Repeat("p", 10<<20) + `"}`)
	m := queue.Message{Headers: map[string]string{"Event-Id": "e1"}, Payload: payload, Identity: "seq:1"}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := trig.Handle(context.Background(), m)
	runtime.ReadMemStats(&after)
	if err != nil || out != queue.Rejected {
		t.Fatalf("%s %v, want rejected", out, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("handling a message of %d bytes above the limit allocated %d bytes", len(payload), alloc)
	}
}

// The default limit is the API's default body limit.
func TestDefaultMessageLimitIsTheAPIBodyLimit(t *testing.T) {
	if queue.DefaultMaxMessageBytes != 1<<20 {
		t.Fatalf("DefaultMaxMessageBytes %d, want 1 MiB", queue.DefaultMaxMessageBytes)
	}
}

// outcomes counts the messages a trigger handled, by outcome.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (*outcomes) QueueConnected(string, string, bool) {}
func (o *outcomes) QueueMessage(_, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
}

func (o *outcomes) get() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for k, v := range o.n {
		out[k] = v
	}
	return out
}

// Through the real brokers: a message above the limit and one whose entity holds a NUL
// are kept for review — the large one by its size and digest — and acknowledged once,
// never redelivered, and start no run, beside a good message that starts its run. On
// JetStream the fetch's byte limit (Batch × the limit, far below the large message) does
// not leave the large message at the head of the stream: the fetch asks for at least one
// message of the server's max_payload.
func TestLargeMessageThroughTheBroker(t *testing.T) {
	for _, mk := range []func(*testing.T) *broker{natsBroker, amqpBroker} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			c, err := onceflow.New(onceflow.Config{Store: st, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			seen := &outcomes{}
			cfg := queue.Config{Workflow: "orders", Metrics: seen, MaxMessageBytes: 2048}
			if b.name == "nats" {
				cfg.RunKey = "{headers.Event-Id}"
			}
			var cons triggers.Consumer
			if b.name == "nats" {
				cons = mustNATS(t, cfg, natsqueue.Config{URL: b.url, Stream: b.queue, Consumer: "onceflow-orders", Batch: 2})
			} else {
				cons = mustAMQP(t, cfg, amqpqueue.Config{URL: b.url, Queue: b.queue, Prefetch: 2})
			}
			for _, w := range append([]onceflow.Workflow{ordersWorkflow()}, cons.(triggers.Companions).Companions(c)...) {
				if err := c.Register(w); err != nil {
					t.Fatal(err)
				}
			}
			large := message{id: "large-1", payload: `{"order_id": 1, "pad": "` + strings.Repeat("p", 300<<10) + `"}`}
			b.publish(t, []message{large, {id: "nul-2", payload: `{"order_id": "a\u0000b"}`}, {id: "ok-3", payload: `{"order_id": 3}`}})

			done := make(chan error, 2)
			go func() { done <- cons.Run(ctx, c) }()
			go func() { done <- c.Serve(ctx) }()
			var orders, rejects, reviews int64
			for deadline := time.Now().Add(60 * time.Second); ; {
				orders, rejects, reviews = counts(t, st)
				if ok, _ := b.settled(t); ok && orders+rejects == 3 && reviews == 2 {
					break
				}
				if time.Now().After(deadline) {
					_, desc := b.settled(t)
					t.Fatalf("not settled: %d order runs, %d kept, %d in review, handled %v; broker: %s", orders, rejects, reviews, seen.get(), desc)
				}
				time.Sleep(20 * time.Millisecond) // polling observable state until the deadline
			}
			cancel()
			for range 2 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			b.detached(t)
			if ok, desc := b.settled(t); !ok {
				t.Fatalf("after the consumer stopped, a message was not acknowledged: %s", desc)
			}
			if got := seen.get(); got[queue.Started] != 1 || got[queue.Rejected] != 2 || len(got) != 2 {
				t.Fatalf("handled %v, want each message once: 1 started, 2 rejected", got)
			}
			if orders != 1 {
				t.Fatalf("%d order runs, want 1", orders)
			}
			suffix := "|large-1"
			size := len(large.payload)
			if b.name == "nats" {
				suffix, size = "|seq:1", size+len("Event-Id")+len(large.id)
			}
			in, it := keptInput(t, st, suffix)
			sum := sha256.Sum256([]byte(large.payload))
			if it.Reason != queue.ReasonMessageTooLarge || in["size"] != float64(size) || in["payload_sha256"] != hex.EncodeToString(sum[:]) || in["payload"] != nil {
				t.Fatalf("item of the large message: %s, input %s", it.Reason, fmt.Sprint(in))
			}
		})
	}
}
