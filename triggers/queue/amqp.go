package queuetrigger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQPConfig names a RabbitMQ queue.
type AMQPConfig struct {
	// URL is the broker URL (from the environment).
	URL string
	// Queue must exist; onceflow does not declare it.
	Queue string
	// Prefetch is how many unacknowledged messages the broker hands out (default 50).
	Prefetch int
}

// gatherFor is how long a consumer waits for more deliveries after the first of a batch.
const gatherFor = 5 * time.Millisecond

// AMQP is a trigger fed by a RabbitMQ queue with manual acknowledgements.
type AMQP struct {
	*Trigger
	ac AMQPConfig
}

// NewAMQP returns a trigger for cfg; Run consumes.
func NewAMQP(cfg Config, ac AMQPConfig) *AMQP {
	if ac.Prefetch <= 0 {
		ac.Prefetch = 50
	}
	if cfg.Source == "" {
		cfg.Source = "amqp:" + ac.Queue
	}
	return &AMQP{Trigger: newTrigger(cfg, "amqp"), ac: ac}
}

// Run consumes until ctx ends, reconnecting with backoff; it returns nil when ctx ends.
func (a *AMQP) Run(ctx context.Context) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		consumed, err := a.session(ctx)
		if ctx.Err() != nil {
			break
		}
		if consumed {
			attempt = 0
		}
		a.setStatus(err)
		a.cfg.Logger.Warn("queue consumer not consuming; retrying", "workflow", a.cfg.Workflow, "source", a.cfg.Source, "error", err, "in", backoff(attempt))
		_ = sleep(ctx, backoff(attempt))
	}
	return nil
}

func (a *AMQP) session(ctx context.Context) (consumed bool, err error) {
	conn, err := amqp.DialConfig(a.ac.URL, amqp.Config{Heartbeat: 10 * time.Second, Dial: amqp.DefaultDial(5 * time.Second),
		Properties: amqp.Table{"connection_name": "onceflow-" + a.cfg.Workflow}})
	if err != nil {
		return false, a.unreachable("AMQP broker", err)
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
	a.setStatus(nil)
	for {
		if err := a.waitBacklog(ctx); err != nil {
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
		in := make([]Message, len(batch))
		for i, d := range batch {
			in[i] = amqpMessage(d)
		}
		errs := a.handleAll(ctx, in)
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
			_ = sleep(ctx, time.Second) // once per batch, so that the redeliveries are not a tight loop
			for _, d := range failed {
				_ = d.Nack(false, true)
			}
		}
	}
}

func amqpMessage(d amqp.Delivery) Message {
	out := Message{ID: d.MessageId, Headers: map[string]string{}, Payload: d.Body}
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
