// Package natsqueue is a queue consumer for NATS JetStream: a durable pull consumer with
// explicit acknowledgements on a stream, each message a run (see package queue for what
// every queue consumer guarantees). It is a triggers.Consumer; New builds one.
//
//	c, err := natsqueue.New(queue.Config{Workflow: "orders", RunKey: "{headers.Event-Id}"},
//		natsqueue.Config{URL: os.Getenv(natsqueue.EnvURL), Stream: "ORDERS"})
//	// register c.Companions(client) with the workflow, then:
//	go c.Run(ctx, client)
//
// A message is acknowledged (double-acked, so the server confirms it) only once its run is
// stored; one whose run could not be stored is negatively acknowledged with a delay and
// redelivered. A consumer that loses its connection reports it (Err) and connects again
// with backoff.
package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/queue"
)

// EnvURL is the environment variable a NATS server's URL is read from by default, as the
// nats step kind does.
const EnvURL = "ONCEFLOW_NATS_URL"

// Config names a JetStream stream and the durable consumer to pull with.
type Config struct {
	// URL is the server URL (from the environment).
	URL    string
	Stream string
	// Consumer is the durable consumer's name, created (explicit acks) if missing.
	Consumer string
	// Subject filters the stream (default: all its subjects).
	Subject string
	// AckWait is how long a message may stay unacknowledged before redelivery (default 30 s).
	AckWait time.Duration
	// Batch is how many messages one fetch pulls (default 100). A fetch also asks for at
	// most Batch × queue.Config.MaxMessageBytes bytes (see fetchBytes).
	Batch int
}

// msgOverhead is what JetStream counts for a message beyond its payload and headers
// against a fetch's byte limit: its subject and reply subject, which the server bounds by
// its max_control_line (4 KiB by default).
const msgOverhead = 8 << 10

// fetchBytes is the byte limit of one fetch: Batch messages at the limit, but never less
// than one message as large as the server lets a publisher send (max_payload). A message
// longer than a fetch's byte limit is never delivered by it, so a smaller limit would
// leave a message above the limit at the head of the stream, fetched by nothing, instead
// of kept for review.
func (n *Consumer) fetchBytes(maxPayload int64) int {
	perMsg := int64(n.cfg.MaxMessageBytes) + msgOverhead
	return int(max(int64(n.nc.Batch)*perMsg, maxPayload+msgOverhead))
}

// Consumer is a triggers.Consumer fed by a JetStream durable pull consumer.
type Consumer struct {
	*queue.Handler
	cfg queue.Config
	nc  Config
}

var (
	_ triggers.Consumer   = (*Consumer)(nil)
	_ triggers.Companions = (*Consumer)(nil)
)

// New returns a consumer of the stream nc names that starts cfg.Workflow; Run consumes.
// cfg.Source defaults to "nats:STREAM/CONSUMER", nc.Consumer to "onceflow-WORKFLOW". The
// error says what is wrong with the configuration.
func New(cfg queue.Config, nc Config) (*Consumer, error) {
	if nc.Stream == "" {
		return nil, errors.New("natsqueue: Config.Stream is required: the JetStream stream to consume")
	}
	if nc.AckWait <= 0 {
		nc.AckWait = 30 * time.Second
	}
	if nc.Batch <= 0 {
		nc.Batch = 100
	}
	if nc.Consumer == "" {
		nc.Consumer = "onceflow-" + cfg.Workflow
	}
	if cfg.Source == "" {
		cfg.Source = "nats:" + nc.Stream + "/" + nc.Consumer
	}
	h, err := queue.NewHandler(cfg, "nats")
	if err != nil {
		return nil, err
	}
	return &Consumer{Handler: h, cfg: h.Config(), nc: nc}, nil
}

// Run consumes until ctx ends, starting runs through s and reconnecting with backoff; it
// returns nil when ctx ends.
func (n *Consumer) Run(ctx context.Context, s triggers.Starter) error {
	return n.Reconnect(ctx, func(ctx context.Context) (bool, error) { return n.session(ctx, s) })
}

// session connects, consumes until something breaks, and says why; consumed reports
// whether it got as far as consuming.
func (n *Consumer) session(ctx context.Context, s triggers.Starter) (consumed bool, err error) {
	// No reconnection inside the client: a lost connection ends the session, so that Run
	// reports it and connects again with its backoff. (While the client reconnected by
	// itself, fetches merely timed out and the consumer still looked connected.)
	nc, err := nats.Connect(n.nc.URL, nats.Name("onceflow-"+n.cfg.Workflow), nats.NoReconnect(), nats.Timeout(5*time.Second))
	if err != nil {
		return false, n.Unreachable("NATS server", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false, err
	}
	stream, err := js.Stream(ctx, n.nc.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, fmt.Errorf("%s: JetStream stream %q does not exist; create it or fix queue.nats.stream", n.cfg.Source, n.nc.Stream)
	}
	if err != nil {
		return false, fmt.Errorf("%s: stream %q: %w", n.cfg.Source, n.nc.Stream, err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: n.nc.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: n.nc.AckWait,
		FilterSubject: n.nc.Subject, MaxAckPending: max(1000, 2*n.nc.Batch), DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return false, fmt.Errorf("%s: durable consumer %q: %w", n.cfg.Source, n.nc.Consumer, err)
	}
	n.SetStatus(nil)
	for ctx.Err() == nil {
		if err := n.WaitBacklog(ctx, s); err != nil {
			return true, nil
		}
		if !nc.IsConnected() {
			return true, fmt.Errorf("%s: connection to the NATS server lost: %v", n.cfg.Source, nc.LastError())
		}
		batch, err := cons.Fetch(n.nc.Batch, jetstream.FetchMaxWait(time.Second), jetstream.FetchMaxBytes(n.fetchBytes(nc.MaxPayload())))
		if err != nil {
			return true, fmt.Errorf("%s: fetch: %w", n.cfg.Source, err)
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && len(msgs) == 0 {
			// Not an empty fetch: a lost connection, a deleted consumer… Fetching again at
			// once would fail again at once; Run reports it and starts over after a backoff.
			if !nc.IsConnected() {
				return true, fmt.Errorf("%s: connection to the NATS server lost: %w", n.cfg.Source, err)
			}
			return true, fmt.Errorf("%s: fetch: %w", n.cfg.Source, err)
		}
		if len(msgs) == 0 {
			continue
		}
		in := make([]queue.Message, len(msgs))
		for i, m := range msgs {
			in[i] = natsMessage(m)
		}
		errs := n.HandleAll(ctx, s, in)
		for i, m := range msgs {
			if errs[i] != nil {
				// Nothing durable happened: let the server redeliver it later.
				n.cfg.Logger.Error("queue message not stored; it will be redelivered", "workflow", n.cfg.Workflow, "error", errs[i])
				_ = m.NakWithDelay(time.Second)
				continue
			}
			if err := m.DoubleAck(ctx); err != nil {
				// The run is stored; a redelivery will find it.
				n.cfg.Logger.Warn("queue message stored but not acknowledged; a redelivery will find its run", "workflow", n.cfg.Workflow, "error", err)
			}
		}
	}
	return true, nil
}

func natsMessage(m jetstream.Msg) queue.Message {
	out := queue.Message{Headers: map[string]string{}, Payload: m.Data()}
	for k, v := range m.Headers() {
		if len(v) > 0 {
			out.Headers[k] = v[0]
		}
	}
	out.ID = m.Headers().Get(jetstream.MsgIDHeader)
	if md, err := m.Metadata(); err == nil {
		out.Identity = "seq:" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	return out
}
