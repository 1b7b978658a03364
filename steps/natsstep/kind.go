package natsstep

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

// Kind is the nats step kind, `kind: nats` with a `nats:` block: one connection, to the
// server EnvURL names, made on first use and closed by Close.
type Kind struct {
	mu    sync.Mutex
	conns map[string]*Conn
}

// NewKind returns the nats kind.
func NewKind() *Kind { return &Kind{conns: map[string]*Conn{}} }

var _ steps.Kind = (*Kind)(nil)

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:    "nats",
		Summary: "Publishes one message to a NATS JetStream subject with the effect key as its Nats-Msg-Id.",
		Doc: `The message goes through the NATS server of ONCEFLOW_NATS_URL. Its Nats-Msg-Id header is
the effect key, so JetStream drops a second message with the same id inside the stream's
duplicate window (set it to cover the step's retries), and an acknowledgement flagged
duplicate completes the step like the first. The subject is tokens separated by dots, and
each template field's value must be one token; a value holding '.', '*', '>' or white space
is a permanent error before anything is sent (reason subject_invalid).

Outcomes: a connection that cannot be made is retried; a subject no stream captures is
permanent; an acknowledgement that does not arrive leaves the outcome unknown, and the
retry under the same id is safe.`,
		Example: `- id: notify
  kind: nats
  effect_key: "order-notify:{input.order_id}"
  nats: {subject: "orders.paid.{input.order_id}", body: {order: "{input.order_id}"}}
`,
		Schema: json.RawMessage(`{
			"type": "object",
			"required": [
				"subject"
			],
			"additionalProperties": false,
			"properties": {
				"subject": {
					"type": "string",
					"minLength": 1,
					"description": "Tokens separated by dots, without wildcards; the value of a template field must be one token: no '.', '*', '>', white space or control characters."
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

// Decode decodes a nats block.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	c := &Settings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Settings are a nats step's settings, its `nats:` block: a message published to
// JetStream with Nats-Msg-Id set to the effect key.
type Settings struct {
	Subject string            `yaml:"subject"`
	Headers map[string]string `yaml:"headers"`
	Body    any               `yaml:"body"`
	Timeout block.Duration    `yaml:"timeout"`

	kind *Kind
}

// Spec is the message the settings describe.
func (s *Settings) Spec() Spec {
	return Spec{Subject: s.Subject, Headers: s.Headers, Body: s.Body, Timeout: time.Duration(s.Timeout)}
}

// Walk checks the subject, headers and body, and reports them as templates, which never
// read the environment (New refuses it).
func (s *Settings) Walk(w block.Walker) {
	if _, err := New(s.Spec(), nil); err != nil {
		w.Problem("", "%v", err)
		return
	}
	w.Template("subject", s.Subject, block.Use{Label: "nats subject"})
	for _, k := range sortedKeys(s.Headers) {
		w.Template("headers."+k, s.Headers[k], block.Use{Label: "nats header " + k})
	}
	steps.Strings(s.Body, func(v string) { w.Template("body", v, block.Use{Label: "nats body"}) })
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// OnUnknown leaves an unknown outcome to the engine: JetStream drops the retry's message
// as a duplicate of the first.
func (s *Settings) OnUnknown() onceflow.UnknownAction { return "" }

// Build compiles the message, to be published through the connection to the server
// EnvURL names.
func (s *Settings) Build(b *steps.Build) (onceflow.StepFunc, error) {
	url, ok := b.Env(EnvURL)
	if !ok || strings.TrimSpace(url) == "" || s.kind == nil {
		return nil, fmt.Errorf("nats steps need a NATS server; set %s", EnvURL)
	}
	st, err := New(s.Spec(), s.kind.conn(url))
	if err != nil {
		return nil, err
	}
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
