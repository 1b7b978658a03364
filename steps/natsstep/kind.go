package natsstep

import (
	"fmt"
	"reflect"
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
		Name:     "nats",
		Summary:  "Publishes one message to a NATS JetStream subject with the effect key as its Nats-Msg-Id.",
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

// Walk checks the subject, headers and body.
func (s *Settings) Walk(w block.Walker) {
	if _, err := New(s.Spec(), nil); err != nil {
		w.Problem("", "%v", err)
	}
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
