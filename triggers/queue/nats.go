package queuetrigger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSConfig names a JetStream stream and the durable consumer to pull with.
type NATSConfig struct {
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
	// most Batch × Config.MaxMessageBytes bytes (see fetchBytes).
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
func (n *NATS) fetchBytes(maxPayload int64) int {
	perMsg := int64(n.cfg.MaxMessageBytes) + msgOverhead
	return int(max(int64(n.nc.Batch)*perMsg, maxPayload+msgOverhead))
}

// NATS is a trigger fed by a JetStream durable pull consumer.
type NATS struct {
	*Trigger
	nc NATSConfig
}

// NewNATS returns a trigger for cfg; Run consumes.
func NewNATS(cfg Config, nc NATSConfig) *NATS {
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
	return &NATS{Trigger: newTrigger(cfg, "nats"), nc: nc}
}

// Run consumes until ctx ends, reconnecting with backoff; it returns nil when ctx ends.
func (n *NATS) Run(ctx context.Context) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		consumed, err := n.session(ctx)
		if ctx.Err() != nil {
			break
		}
		if consumed {
			attempt = 0
		}
		n.setStatus(err)
		n.cfg.Logger.Warn("queue consumer not consuming; retrying", "workflow", n.cfg.Workflow, "source", n.cfg.Source, "error", err, "in", backoff(attempt))
		_ = sleep(ctx, backoff(attempt))
	}
	return nil
}

// session connects, consumes until something breaks, and says why; consumed reports
// whether it got as far as consuming.
func (n *NATS) session(ctx context.Context) (consumed bool, err error) {
	// No reconnection inside the client: a lost connection ends the session, so that Run
	// reports it and connects again with its backoff. (While the client reconnected by
	// itself, fetches merely timed out and the consumer still looked connected.)
	nc, err := nats.Connect(n.nc.URL, nats.Name("onceflow-"+n.cfg.Workflow), nats.NoReconnect(), nats.Timeout(5*time.Second))
	if err != nil {
		return false, n.unreachable("NATS server", err)
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
	n.setStatus(nil)
	for ctx.Err() == nil {
		if err := n.waitBacklog(ctx); err != nil {
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
		in := make([]Message, len(msgs))
		for i, m := range msgs {
			in[i] = natsMessage(m)
		}
		errs := n.handleAll(ctx, in)
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

func natsMessage(m jetstream.Msg) Message {
	out := Message{Headers: map[string]string{}, Payload: m.Data()}
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
