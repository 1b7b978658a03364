// Package amqpqueue is a queue consumer for RabbitMQ (AMQP 0-9-1): a queue consumed with
// manual acknowledgements and a prefetch limit, each message a run (see package queue for
// what every queue consumer guarantees). It is a triggers.Consumer; New builds one.
//
//	c, err := amqpqueue.New(queue.Config{Workflow: "orders"},
//		amqpqueue.Config{URL: os.Getenv(amqpqueue.EnvURL), Queue: "orders"})
//	// register c.Companions(client) with the workflow, then:
//	go c.Run(ctx, client)
//
// A message is acknowledged only once its run is stored; the messages of a batch whose
// runs could not be stored are negatively acknowledged with requeue, after a pause. The
// queue must exist: onceflow does not declare it. Several consumers, in one process or
// many, may share a queue: the broker hands each message to one of them.
package amqpqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/queue"
)

// EnvURL is the environment variable a RabbitMQ broker's URL is read from by default, as
// the amqp step kind does.
const EnvURL = "ONCEFLOW_AMQP_URL"

// Config names a RabbitMQ queue.
type Config struct {
	// URL is the broker URL (from the environment).
	URL string
	// Queue must exist; onceflow does not declare it.
	Queue string
	// Prefetch is how many unacknowledged messages the broker hands out (default 50).
	Prefetch int
}

// gatherFor is how long a consumer waits for more deliveries after the first of a batch.
const gatherFor = 5 * time.Millisecond

// Consumer is a triggers.Consumer fed by a RabbitMQ queue with manual acknowledgements.
type Consumer struct {
	*queue.Handler
	cfg queue.Config
	ac  Config
}

var (
	_ triggers.Consumer   = (*Consumer)(nil)
	_ triggers.Companions = (*Consumer)(nil)
)

// New returns a consumer of the queue ac names that starts cfg.Workflow; Run consumes.
// cfg.Source defaults to "amqp:QUEUE". The error says what is wrong with the
// configuration.
func New(cfg queue.Config, ac Config) (*Consumer, error) {
	if ac.Queue == "" {
		return nil, errors.New("amqpqueue: Config.Queue is required: the RabbitMQ queue to consume")
	}
	if ac.Prefetch <= 0 {
		ac.Prefetch = 50
	}
	if cfg.Source == "" {
		cfg.Source = "amqp:" + ac.Queue
	}
	h, err := queue.NewHandler(cfg, "amqp")
	if err != nil {
		return nil, err
	}
	return &Consumer{Handler: h, cfg: h.Config(), ac: ac}, nil
}

// Run consumes until ctx ends, starting runs through s and reconnecting with backoff; it
// returns nil when ctx ends.
func (a *Consumer) Run(ctx context.Context, s triggers.Starter) error {
	return a.Reconnect(ctx, func(ctx context.Context) (bool, error) { return a.session(ctx, s) })
}

func (a *Consumer) session(ctx context.Context, s triggers.Starter) (consumed bool, err error) {
	conn, err := amqp.DialConfig(a.ac.URL, amqp.Config{Heartbeat: 10 * time.Second, Dial: amqp.DefaultDial(5 * time.Second),
		Properties: amqp.Table{"connection_name": "onceflow-" + a.cfg.Workflow}})
	if err != nil {
		return false, a.Unreachable("AMQP broker", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("%s: open channel: %w", a.cfg.Source, err)
	}
	if _, err := ch.QueueDeclarePassive(a.ac.Queue, true, false, false, false, nil); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return false, fmt.Errorf("%s: queue %q does not exist; declare it or fix queue.amqp.queue", a.cfg.Source, a.ac.Queue)
		}
		return false, fmt.Errorf("%s: queue %q: %w", a.cfg.Source, a.ac.Queue, err)
	}
	if err := ch.Qos(a.ac.Prefetch, 0, false); err != nil {
		return false, fmt.Errorf("%s: prefetch: %w", a.cfg.Source, err)
	}
	deliveries, err := ch.Consume(a.ac.Queue, "", false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("%s: consume: %w", a.cfg.Source, err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	a.SetStatus(nil)
	for {
		if err := a.WaitBacklog(ctx, s); err != nil {
			return true, nil
		}
		var batch []amqp.Delivery
		select {
		case <-ctx.Done():
			return true, nil
		case e := <-closed:
			return true, fmt.Errorf("%s: connection lost: %v", a.cfg.Source, e)
		case d, ok := <-deliveries:
			if !ok {
				return true, fmt.Errorf("%s: the broker stopped the consumer", a.cfg.Source)
			}
			batch = append(batch, d)
		}
		// Take what else arrives within a few milliseconds, up to the prefetch, so that the
		// batch's starts share a transaction.
		gather := time.NewTimer(gatherFor)
	more:
		for len(batch) < a.ac.Prefetch {
			select {
			case d, ok := <-deliveries:
				if !ok {
					break more
				}
				batch = append(batch, d)
			case <-gather.C:
				break more
			}
		}
		gather.Stop()
		in := make([]queue.Message, len(batch))
		for i, d := range batch {
			in[i] = amqpMessage(d)
		}
		errs := a.HandleAll(ctx, s, in)
		var failed []amqp.Delivery
		for i, d := range batch {
			if errs[i] != nil {
				a.cfg.Logger.Error("queue message not stored; it will be redelivered", "workflow", a.cfg.Workflow, "error", errs[i])
				failed = append(failed, d)
				continue
			}
			if err := d.Ack(false); err != nil {
				a.cfg.Logger.Warn("queue message stored but not acknowledged; a redelivery will find its run", "workflow", a.cfg.Workflow, "error", err)
			}
		}
		if len(failed) > 0 {
			_ = queue.Sleep(ctx, time.Second) // once per batch, so that the redeliveries are not a tight loop
			for _, d := range failed {
				_ = d.Nack(false, true)
			}
		}
	}
}

func amqpMessage(d amqp.Delivery) queue.Message {
	out := queue.Message{ID: d.MessageId, Headers: map[string]string{}, Payload: d.Body}
	for k, v := range d.Headers {
		out.Headers[k] = fmt.Sprint(v)
	}
	if out.ID == "" {
		h := sha256.New()
		h.Write(d.Body)
		fmt.Fprint(h, d.Headers, d.CorrelationId, d.Timestamp.UnixNano())
		out.Identity = "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	return out
}
