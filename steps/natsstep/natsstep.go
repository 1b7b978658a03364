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
//
// # Subjects
//
// A subject is tokens separated by dots, and a template field's value is spliced into one
// token: a value holding a dot would add tokens (another subject, which another stream or
// consumer may take), one holding "*" or ">" would be a wildcard, and white space or a
// control character is no subject at all. Such a value is a permanent error before
// anything is sent (reason subject_invalid), as is a message the client refuses before
// sending it (too large for the server, a subject it does not accept): nothing was sent,
// so the outcome is never unknown.
package natsstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// EnvURL names the environment variable with the NATS server URL(s) publish steps use.
const EnvURL = "ONCEFLOW_NATS_URL"

// ReasonSubjectInvalid is the review reason of a message whose subject, rendered from the
// run's data, is not the subject the template describes (a value that is not one token).
const ReasonSubjectInvalid onceflow.Reason = "subject_invalid"

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

// errNoConn is the error of a step compiled without a connection.
var errNoConn = errors.New("nats: the step has no connection (New was given a nil *Conn, which only checks the spec); build it with a Conn, or through the kind")

// Step is a compiled nats step.
type Step struct {
	spec    Spec
	conn    *Conn
	subject *keytmpl.Template
	msg     keytmpl.Message
}

// New compiles spec. With a nil conn the spec is only checked: the step refuses to run,
// with a permanent error that says so, instead of publishing nowhere.
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
	// The subject's own text, each field standing for one plain token.
	if err := checkSubject(s.subject.Shape("x")); err != nil {
		return nil, fmt.Errorf("nats subject %q: %w", spec.Subject, err)
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

// checkSubject reports what makes subj no subject to publish to: an empty token, a
// wildcard, white space or a control character.
func checkSubject(subj string) error {
	for _, tok := range strings.Split(subj, ".") {
		if tok == "" {
			return errors.New("a subject is tokens separated by single dots, none of them empty")
		}
		if err := checkToken(tok); err != nil {
			return err
		}
	}
	return nil
}

// checkToken reports what makes tok no token of a subject to publish to.
func checkToken(tok string) error {
	for _, r := range tok {
		switch {
		case r == '*' || r == '>':
			return fmt.Errorf("%q is a wildcard, which a message cannot be published to", r)
		case unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError:
			return fmt.Errorf("%q is white space or a control character, which a subject cannot hold", r)
		}
	}
	return nil
}

// tokenValue checks that the value of a subject's field is one token.
func tokenValue(field, v string) (string, error) {
	err := checkToken(v)
	if err == nil && strings.Contains(v, ".") {
		err = errors.New("it holds a dot, which would add tokens to the subject")
	}
	if err != nil {
		return "", &subjectError{fmt.Errorf("nats subject: field {%s} is %q, which is not one subject token: %w", field, v, err)}
	}
	return v, nil
}

// subjectError is a subject value that is not one token.
type subjectError struct{ error }

func (e *subjectError) Unwrap() error { return e.error }

// render builds the message.
func render(subject *keytmpl.Template, msg keytmpl.Message, data map[string]any) (string, map[string]string, []byte, error) {
	subj, err := subject.RenderFunc(data, tokenValue)
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
		var se *subjectError
		if errors.As(err, &se) {
			return nil, &onceflow.StepError{Class: onceflow.Permanent, Reason: ReasonSubjectInvalid, Err: err}
		}
		return nil, onceflow.PermanentError(err)
	}
	if s.conn == nil {
		return nil, onceflow.PermanentError(errNoConn)
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
	case errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrHeadersNotSupported),
		errors.Is(err, nats.ErrBadHeaderMsg), errors.Is(err, nats.ErrInvalidMsg):
		// The client refused the message before sending it.
		return nil, onceflow.PermanentError(fmt.Errorf("publish to %s: not sent: %w", subj, err))
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
