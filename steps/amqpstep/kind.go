package amqpstep

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
)

// KindOptions configure the amqp kind.
type KindOptions struct {
	// Hooks are given to every step of the kind: signals for tests.
	Hooks Hooks
}

// Kind is the amqp step kind, `kind: amqp` with an `amqp:` block: one connection, to the
// broker EnvURL names, made on first use and closed by Close.
type Kind struct {
	mu    sync.Mutex
	conns map[string]*Conn
	hooks Hooks
}

// NewKind returns the amqp kind.
func NewKind(o KindOptions) *Kind { return &Kind{conns: map[string]*Conn{}, hooks: o.Hooks} }

var _ steps.Kind = (*Kind)(nil)

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:    "amqp",
		Summary: "Publishes one message to a RabbitMQ exchange with publisher confirms and the effect key as its message_id.",
		Doc: `The message goes through the broker of ONCEFLOW_AMQP_URL, to exchange with routing_key
(the default exchange routes by queue name), as a mandatory publish with publisher
confirms; its message_id is the effect key on every attempt. A confirm completes the step.

AMQP brokers do not deduplicate: a confirm that never arrives leaves the outcome unknown,
and the retry that follows may deliver the message twice, so consumers must deduplicate by
message_id. That is the contract of amqp steps and why an unknown outcome is retried under
the same message_id by default; a workflow whose consumers cannot deduplicate sets
on_unknown: needs_review. A negative confirm is retried; a message no queue is bound to
receive, and an exchange that does not exist, are permanent. The routing key is words
separated by dots, and each template field's value must be one word: a value holding a dot
(which would reach other bindings of a topic exchange) is a permanent error before anything
is sent (reason routing_key_invalid).`,
		Example: `- id: warehouse
  kind: amqp
  effect_key: "pick:{input.order_id}"
  amqp: {exchange: warehouse, routing_key: pick, body: {order: "{input.order_id}"}}
`,
		Schema: json.RawMessage(`{
			"type": "object",
			"additionalProperties": false,
			"properties": {
				"exchange": {
					"type": "string"
				},
				"routing_key": {
					"type": "string",
					"description": "Words separated by dots; the value of a template field must be one word: no '.' or control characters."
				},
				"headers": {
					"type": "object",
					"additionalProperties": {
						"$ref": "#/$defs/template"
					}
				},
				"body": {
					"description": "The message: text or JSON whose strings may be templates."
				},
				"timeout": {
					"$ref": "#/$defs/duration"
				}
			}
		}`),
		Settings: reflect.TypeFor[Settings](),
	}
}

// Decode decodes an amqp block.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	c := &Settings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Settings are an amqp step's settings, its `amqp:` block: a message published with
// publisher confirms and message_id set to the effect key. Consumers must deduplicate by
// message_id.
type Settings struct {
	Exchange   string            `yaml:"exchange"`
	RoutingKey string            `yaml:"routing_key"`
	Headers    map[string]string `yaml:"headers"`
	Body       any               `yaml:"body"`
	Timeout    block.Duration    `yaml:"timeout"`

	kind *Kind
}

// Spec is the message the settings describe.
func (s *Settings) Spec() Spec {
	return Spec{Exchange: s.Exchange, RoutingKey: s.RoutingKey, Headers: s.Headers, Body: s.Body, Timeout: time.Duration(s.Timeout)}
}

// Walk checks the routing key, headers and body, and reports them as templates, which
// never read the environment (New refuses it).
func (s *Settings) Walk(w block.Walker) {
	if _, err := New(s.Spec(), nil); err != nil {
		w.Problem("", "%v", err)
		return
	}
	w.Template("routing_key", s.RoutingKey, block.Use{Label: "amqp routing_key"})
	keys := make([]string, 0, len(s.Headers))
	for k := range s.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.Template("headers."+k, s.Headers[k], block.Use{Label: "amqp header " + k})
	}
	steps.Strings(s.Body, func(v string) { w.Template("body", v, block.Use{Label: "amqp body"}) })
}

// OnUnknown retries an unknown outcome under the same message_id (DefaultOnUnknown), for
// consumers that deduplicate by it.
func (s *Settings) OnUnknown() onceflow.UnknownAction { return DefaultOnUnknown }

// Build compiles the message, to be published through the connection to the broker
// EnvURL names.
func (s *Settings) Build(b *steps.Build) (onceflow.StepFunc, error) {
	url, ok := b.Env(EnvURL)
	if !ok || strings.TrimSpace(url) == "" || s.kind == nil {
		return nil, fmt.Errorf("amqp steps need a broker; set %s", EnvURL)
	}
	st, err := New(s.Spec(), s.kind.conn(url))
	if err != nil {
		return nil, err
	}
	st.Hooks = s.kind.hooks
	return st.Do, nil
}

func (k *Kind) conn(url string) *Conn {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.conns[url]
	if !ok {
		c = &Conn{URL: url}
		k.conns[url] = c
	}
	return c
}

// Close closes the connections the kind's steps made.
func (k *Kind) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for url, c := range k.conns {
		c.Close()
		delete(k.conns, url)
	}
	return nil
}
