// Package natsstep implements the "nats" step kind: one message published to a NATS
// JetStream subject, exactly once in the stream.
//
// The message carries the step's effect key as its Nats-Msg-Id header. JetStream drops a
// second message with the same id inside the stream's duplicate window (two minutes by
// default; set the stream's duplicate_window to cover the step's retries) and says so in
// its acknowledgement, so a retry after a lost acknowledgement stores nothing new: a
// PubAck flagged duplicate completes the step like a first publish.
//
// Outcomes: a connection that cannot be made is retried (nothing was sent); a subject that
// no stream captures is permanent (no stream stored it); an acknowledgement that does not
// arrive leaves the outcome unknown, and the retry under the same id is safe.
package natsstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// EnvURL names the environment variable with the NATS server URL(s) publish steps use.
const EnvURL = "ONCEFLOW_NATS_URL"

// Spec describes a nats step. Subject, header values and the body are templates over the
// step's data.
type Spec struct {
	Subject string
	Headers map[string]string
	// Body is the message: a string is sent as it renders, anything else as JSON.
	Body any
	// Timeout bounds waiting for the stream's acknowledgement (default 10 s).
	Timeout time.Duration
}

// Conn is a connection to NATS made on first use and shared by the steps that publish.
type Conn struct {
	URL string
	mu  sync.Mutex
	nc  *nats.Conn
	js  jetstream.JetStream
}

// JetStream returns the connection's JetStream context, connecting if needed.
func (c *Conn) JetStream() (jetstream.JetStream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.js != nil && !c.nc.IsClosed() {
		return c.js, nil
	}
	nc, err := nats.Connect(c.URL, nats.Name("onceflow"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS (%s): %w", EnvURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.nc, c.js = nc, js
	return js, nil
}

// Close closes the connection, if one was made.
func (c *Conn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nil {
		c.nc.Close()
	}
}

// Step is a compiled nats step.
type Step struct {
	spec    Spec
	conn    *Conn
	subject *keytmpl.Template
	msg     keytmpl.Message
}

// New compiles spec.
func New(spec Spec, conn *Conn) (*Step, error) {
	if spec.Subject == "" {
		return nil, errors.New("nats: subject is required")
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 10 * time.Second
	}
	s := &Step{spec: spec, conn: conn}
	vars := keytmpl.EnvVars{}
	var err error
	if s.subject, err = keytmpl.ParseStep(spec.Subject, vars); err != nil {
		return nil, fmt.Errorf("nats subject: %w", err)
	}
	if s.msg, err = keytmpl.CompileMessage(spec.Headers, spec.Body, vars); err != nil {
		return nil, fmt.Errorf("nats %w", err) // "nats header NAME: …", "nats body: …"
	}
	if len(vars) > 0 {
		return nil, fmt.Errorf("nats: messages may not read the environment ({env.%s}); secrets stay out of messages", vars.Names()[0])
	}
	return s, nil
}

// Output is a nats step's output.
type Output struct {
	Stream    string `json:"stream"`
	Sequence  uint64 `json:"seq"`
	MsgID     string `json:"msg_id"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// render builds the message.
func render(subject *keytmpl.Template, msg keytmpl.Message, data map[string]any) (string, map[string]string, []byte, error) {
	subj, err := subject.Render(data)
	if err != nil {
		return "", nil, nil, err
	}
	hs, v, err := msg.Render(data)
	if err != nil {
		return "", nil, nil, err
	}
	var b []byte
	switch x := v.(type) {
	case nil:
	case string:
		b = []byte(x)
	default:
		if b, err = json.Marshal(x); err != nil {
			return "", nil, nil, err
		}
	}
	return subj, hs, b, nil
}

// Do publishes the message: an onceflow.StepFunc.
func (s *Step) Do(ctx context.Context, sc *onceflow.StepContext) (any, error) {
	data, err := sc.TemplateData()
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	subj, hs, body, err := render(s.subject, s.msg, data)
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	js, err := s.conn.JetStream()
	if err != nil {
		return nil, err // nothing was sent: retryable
	}
	msg := nats.NewMsg(subj)
	msg.Data = body
	for k, v := range hs {
		msg.Header.Set(k, v)
	}
	msg.Header.Set(jetstream.MsgIDHeader, sc.EffectKey)
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	ack, err := js.PublishMsg(ctx, msg)
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return nil, onceflow.PermanentError(fmt.Errorf("no JetStream stream captures subject %q: create a stream for it, or fix the subject", subj))
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrDisconnected):
		// The request may have left before the connection went.
		return nil, onceflow.UnknownOutcomeError(fmt.Errorf("publish to %s: %w", subj, err))
	case err != nil:
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			return nil, onceflow.PermanentError(fmt.Errorf("publish to %s: the stream refused the message: %w", subj, err))
		}
		return nil, onceflow.UnknownOutcomeError(fmt.Errorf("publish to %s: no acknowledgement: %w", subj, err))
	}
	return Output{Stream: ack.Stream, Sequence: ack.Sequence, MsgID: sc.EffectKey, Duplicate: ack.Duplicate}, nil
}
