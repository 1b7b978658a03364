// Package amqpstep implements the "amqp" step kind: one message published to a RabbitMQ
// (AMQP 0-9-1) exchange with publisher confirms.
//
// The message's message_id property is the step's effect key, identical on every attempt.
// A broker confirm completes the step. A confirm that never arrives (the connection
// dropped, the wait timed out) leaves the outcome unknown: the broker may hold the
// message. AMQP brokers do not deduplicate, so the retry that follows may deliver the
// message twice; consumers must deduplicate by message_id. That is the contract of amqp
// steps, and why their default on an unknown outcome is to retry under the same id
// (DefaultOnUnknown); a workflow whose consumers cannot deduplicate sets
// on_unknown: needs_review.
//
// A negative confirm (the broker did not take the message) is retried. A message no queue
// is bound to receive (mandatory publish returned) and an exchange that does not exist are
// permanent: no attempt will succeed until the broker is configured.
//
// # Routing keys
//
// A routing key is words separated by dots, and a template field's value is spliced into
// one word: a value holding a dot would add words, reaching the queues of other bindings
// of a topic exchange (or another queue through the default exchange), and a control
// character is no part of a key. Such a value is a permanent error before anything is
// sent (reason routing_key_invalid).
package amqpstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// EnvURL names the environment variable with the AMQP URL publish steps use.
const EnvURL = "ONCEFLOW_AMQP_URL"

// ReasonRoutingKeyInvalid is the review reason of a message whose routing key, rendered
// from the run's data, is not the routing key the template describes: a field's value that
// is not one word.
const ReasonRoutingKeyInvalid onceflow.Reason = "routing_key_invalid"

// wordValue checks that the value of a routing key's field is one word: a topic exchange
// reads the dots of a routing key as word boundaries (and the default exchange the whole
// key as a queue's name), so a value holding a dot would reach other bindings ("eu.vip"
// in "orders.{input.region}" matches orders.*.vip).
func wordValue(field, v string) (string, error) {
	var why string
	for _, r := range v {
		switch {
		case r == '.':
			why = "it holds a dot, which would add words to the routing key"
		case unicode.IsControl(r) || r == utf8.RuneError:
			why = "it holds a control character or bytes that are not UTF-8"
		default:
			continue
		}
		return "", &routingKeyError{fmt.Errorf("amqp routing_key: field {%s} is %q, which is not one word of a routing key: %s", field, v, why)}
	}
	return v, nil
}

// routingKeyError is a routing key value that is not one word.
type routingKeyError struct{ error }

func (e *routingKeyError) Unwrap() error { return e.error }

// DefaultOnUnknown is the unknown-outcome action amqp steps are registered with: retry
// under the same message_id, for consumers that deduplicate by it.
const DefaultOnUnknown = onceflow.RetrySameKey

// Spec describes an amqp step. Routing key, header values and the body are templates.
type Spec struct {
	// Exchange is the exchange's name ("" is the default exchange, which routes by queue
	// name).
	Exchange   string
	RoutingKey string
	Headers    map[string]string
	// Body is the message: a string is sent as it renders (text/plain), anything else as
	// JSON (application/json).
	Body any
	// Timeout bounds waiting for the confirm (default 10 s).
	Timeout time.Duration
}

// Conn is a connection to the broker made on first use and shared by the steps.
type Conn struct {
	URL  string
	mu   sync.Mutex
	conn *amqp.Connection
}

func (c *Conn) channel() (*amqp.Channel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.conn.IsClosed() {
		conn, err := amqp.DialConfig(c.URL, amqp.Config{Heartbeat: 10 * time.Second, Properties: amqp.Table{"connection_name": "onceflow"}})
		if err != nil {
			return nil, fmt.Errorf("connect to the AMQP broker (%s): %w", EnvURL, err)
		}
		c.conn = conn
	}
	return c.conn.Channel()
}

// discard forgets a connection that stopped answering and closes it in the background, so
// that the next attempt dials afresh instead of waiting on it.
func (c *Conn) discard() {
	c.mu.Lock()
	old := c.conn
	c.conn = nil
	c.mu.Unlock()
	if old != nil {
		go old.Close()
	}
}

// Close closes the connection, if one was made.
func (c *Conn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// errNoConn is the error of a step compiled without a connection.
var errNoConn = errors.New("amqp: the step has no connection (New was given a nil *Conn, which only checks the spec); build it with a Conn, or through the kind")

// Step is a compiled amqp step.
type Step struct {
	// Hooks are the step's signals for tests; set them before the step runs.
	Hooks Hooks

	spec Spec
	conn *Conn
	key  *keytmpl.Template
	msg  keytmpl.Message
	json bool
}

// New compiles spec. With a nil conn the spec is only checked: the step refuses to run,
// with a permanent error that says so, instead of publishing nowhere.
func New(spec Spec, conn *Conn) (*Step, error) {
	if spec.Timeout <= 0 {
		spec.Timeout = 10 * time.Second
	}
	if spec.Exchange == "" && spec.RoutingKey == "" {
		return nil, errors.New("amqp: routing_key is required with the default exchange (it names the queue)")
	}
	s := &Step{spec: spec, conn: conn}
	vars := keytmpl.EnvVars{}
	var err error
	if s.key, err = keytmpl.ParseStep(spec.RoutingKey, vars); err != nil {
		return nil, fmt.Errorf("amqp routing_key: %w", err)
	}
	if s.msg, err = keytmpl.CompileMessage(spec.Headers, spec.Body, vars); err != nil {
		return nil, fmt.Errorf("amqp %w", err) // "amqp header NAME: …", "amqp body: …"
	}
	_, isString := spec.Body.(string)
	s.json = !isString
	if len(vars) > 0 {
		return nil, fmt.Errorf("amqp: messages may not read the environment ({env.%s}); secrets stay out of messages", vars.Names()[0])
	}
	return s, nil
}

// Output is an amqp step's output.
type Output struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
	MessageID  string `json:"message_id"`
}

// Hooks are signals for tests: functions a step calls at points of an attempt where a
// test breaks something. Each step has its own (Step.Hooks, KindOptions.Hooks).
type Hooks struct {
	// BeforePublish, when set, is called with the channel ready, just before the message
	// is published: where a test loses the confirm on the way back.
	BeforePublish func()
}

// Do publishes the message and waits for the broker's confirm: an onceflow.StepFunc.
func (s *Step) Do(ctx context.Context, sc *onceflow.StepContext) (any, error) {
	data, err := sc.TemplateData()
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	rk, err := s.key.RenderFunc(data, wordValue)
	var we *routingKeyError
	switch {
	case errors.As(err, &we):
		return nil, &onceflow.StepError{Class: onceflow.Permanent, Reason: ReasonRoutingKeyInvalid, Err: err}
	case err != nil && s.spec.RoutingKey != "":
		return nil, onceflow.PermanentError(err)
	}
	pub := amqp.Publishing{MessageId: sc.EffectKey, DeliveryMode: amqp.Persistent, Timestamp: sc.Now(), ContentType: "text/plain"}
	hs, body, err := s.msg.Render(data)
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	if len(hs) > 0 {
		pub.Headers = amqp.Table{}
		for k, v := range hs {
			pub.Headers[k] = v
		}
	}
	if s.json {
		if pub.Body, err = json.Marshal(body); err != nil {
			return nil, onceflow.PermanentError(err)
		}
		pub.ContentType = "application/json"
	} else if body != nil {
		pub.Body = []byte(fmt.Sprint(body))
	}

	if s.conn == nil {
		return nil, onceflow.PermanentError(errNoConn)
	}
	ch, err := s.conn.channel()
	if err != nil {
		return nil, err // nothing was sent: retryable
	}
	healthy := true
	defer func() {
		if healthy {
			_ = ch.Close()
		}
	}()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	returned := ch.NotifyReturn(make(chan amqp.Return, 1))
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("amqp: enable publisher confirms: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	if s.Hooks.BeforePublish != nil {
		s.Hooks.BeforePublish()
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, s.spec.Exchange, rk, true, false, pub)
	if err != nil {
		// The frames may have been written in part or in full.
		return nil, onceflow.UnknownOutcomeError(fmt.Errorf("amqp publish to exchange %q: %w", s.spec.Exchange, err))
	}
	var ok bool
	select {
	case <-dc.Done():
		ok = dc.Acked()
	case e := <-closed:
		if e != nil && e.Code == amqp.NotFound {
			return nil, onceflow.PermanentError(fmt.Errorf("amqp: %s; declare exchange %q or fix the step", e.Reason, s.spec.Exchange))
		}
		return nil, onceflow.UnknownOutcomeError(fmt.Errorf("amqp publish to exchange %q: the channel closed before the confirm (%v); the message may have been delivered, consumers deduplicate by message_id", s.spec.Exchange, e))
	case <-ctx.Done():
		healthy = false
		s.conn.discard()
		return nil, onceflow.UnknownOutcomeError(fmt.Errorf("amqp publish to exchange %q: no confirm from the broker: %w; the message may have been delivered, consumers deduplicate by message_id", s.spec.Exchange, ctx.Err()))
	}
	// A return arrives before the confirm of the same message.
	select {
	case r, got := <-returned:
		if got {
			return nil, onceflow.PermanentError(fmt.Errorf("amqp: the broker returned the message: %d %s (no queue is bound to exchange %q with routing key %q)", r.ReplyCode, r.ReplyText, s.spec.Exchange, rk))
		}
	default:
	}
	if !ok && ch.IsClosed() {
		return nil, onceflow.UnknownOutcomeError(fmt.Errorf("amqp publish to exchange %q: the channel closed before the confirm; the message may have been delivered, consumers deduplicate by message_id", s.spec.Exchange))
	}
	if !ok {
		return nil, fmt.Errorf("amqp publish to exchange %q: the broker refused the message (nack)", s.spec.Exchange)
	}
	return Output{Exchange: s.spec.Exchange, RoutingKey: rk, MessageID: sc.EffectKey}, nil
}
