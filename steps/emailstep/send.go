package emailstep

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/smtp"
	"net/textproto"
	"os"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// stage is how far an SMTP transaction got; it decides what a failure means.
type stage int

const (
	// stageSession: the message has not been sent in full, so it cannot be delivered.
	stageSession stage = iota
	// stageSent: the whole message, end-of-data marker included, was sent; the server's
	// final reply decides, and without one the outcome is unknown.
	stageSent
)

// quitWait bounds the polite QUIT after the message was accepted.
const quitWait = 2 * time.Second

// localName is the name given in EHLO.
const localName = "localhost"

// send performs one SMTP transaction and returns the server's final reply text.
func (s *Step) send(ctx context.Context, m *message, sec secrets) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	st := stageSession
	fail := func(what string, err error) error { return s.classify(ctx, st, what, err, sec) }

	raw, err := s.dial(ctx, "tcp", s.srv.Addr)
	if err != nil {
		return "", fail("connect", err)
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := raw.SetDeadline(dl); err != nil {
			return "", fail("connect", err)
		}
	}
	// Cancelling ctx interrupts whatever read or write is blocked.
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	conn := raw
	if s.srv.TLS == TLSImplicit {
		tc := tls.Client(raw, s.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			return "", fail("TLS handshake", err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, s.host) // reads the greeting
	if err != nil {
		return "", fail("greeting", err)
	}
	defer c.Close()
	if err := c.Hello(localName); err != nil {
		return "", fail("EHLO", err)
	}
	if s.srv.TLS == TLSAuto || s.srv.TLS == TLSStartTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(s.tlsConfig()); err != nil {
				return "", fail("STARTTLS", err)
			}
		} else if s.srv.TLS == TLSStartTLS {
			return "", s.refuse(fmt.Errorf("smtp %s: the server does not offer STARTTLS, which the server's TLS setting %q requires", s.srv.Addr, TLSStartTLS))
		}
	}
	if s.srv.Username != "" {
		if _, isTLS := c.TLSConnectionState(); !isTLS && !isLocalhost(s.host) {
			return "", s.refuse(fmt.Errorf("smtp %s: refusing to send credentials over an unencrypted connection: the server offered no STARTTLS", s.srv.Addr))
		}
		if ok, _ := c.Extension("AUTH"); !ok {
			return "", s.refuse(fmt.Errorf("smtp %s: credentials are configured but the server does not offer AUTH", s.srv.Addr))
		}
		if err := c.Auth(smtp.PlainAuth("", s.srv.Username, s.srv.Password, s.host)); err != nil {
			return "", fail("AUTH", err)
		}
	}
	if err := c.Mail(m.from); err != nil {
		return "", fail("MAIL FROM:<"+m.from+">", err)
	}
	for _, r := range m.rcpt {
		if err := c.Rcpt(r); err != nil {
			return "", fail("RCPT TO:<"+r+">", err)
		}
	}
	// DATA is spoken here rather than through Client.Data, whose Close both sends the
	// end-of-data marker and reads the reply: the two must be told apart, since only a
	// failure after the marker was sent may have delivered the message.
	if err := c.Text.PrintfLine("DATA"); err != nil {
		return "", fail("DATA", err)
	}
	if _, _, err := c.Text.ReadResponse(354); err != nil {
		return "", fail("DATA", err)
	}
	w := c.Text.DotWriter()
	if _, err := w.Write(m.data); err != nil {
		return "", fail("message body", err)
	}
	if err := w.Close(); err != nil { // writes the end-of-data marker and flushes
		return "", fail("message body", err)
	}
	st = stageSent
	_, reply, err := c.Text.ReadResponse(250)
	if err != nil {
		return "", fail("reply to the message", err)
	}
	if ctx.Err() == nil {
		wait := time.Now().Add(quitWait)
		if dl, ok := ctx.Deadline(); ok && dl.Before(wait) {
			wait = dl
		}
		_ = raw.SetDeadline(wait)
		_ = c.Quit() // the message is accepted; a failed goodbye changes nothing
	}
	return reply, nil
}

func (s *Step) tlsConfig() *tls.Config {
	return &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.srv.InsecureSkipVerify}
}

// refuse is a permanent error of configuration: the server cannot be used as configured.
func (s *Step) refuse(err error) error {
	return &onceflow.StepError{Class: onceflow.Permanent, Err: err}
}

// classify turns a failure of the SMTP transaction into a *onceflow.StepError.
//
//   - refused by the egress policy: permanent, reason destination_blocked;
//   - a 4xx reply: retryable; a 5xx reply: permanent (the server refused, whatever the
//     stage, so nothing was delivered);
//   - anything else before the whole message was sent: retryable;
//   - anything else after (a dropped connection, a timeout, an unexpected reply): unknown.
func (s *Step) classify(ctx context.Context, st stage, what string, err error, sec secrets) error {
	e := &onceflow.StepError{Class: onceflow.Retryable}
	if st == stageSent {
		e.Class = onceflow.Unknown
	}
	var tpe *textproto.Error
	switch {
	case errors.Is(err, egress.ErrBlocked):
		e.Class, e.Reason = onceflow.Permanent, ReasonDestinationBlocked
	case errors.As(err, &tpe):
		e.ResponseStatus = tpe.Code
		e.ResponseExcerpt = sec.excerpt(fmt.Sprintf("%d %s", tpe.Code, tpe.Msg))
		switch {
		case tpe.Code >= 400 && tpe.Code < 500:
			e.Class = onceflow.Retryable
		case tpe.Code >= 500 && tpe.Code < 600:
			e.Class = onceflow.Permanent
		}
	}
	// Deadlines on the connection come only from ctx: say so, so that the error matches
	// context.DeadlineExceeded even when the socket noticed before the context's timer.
	switch cerr := ctx.Err(); {
	case cerr != nil && !errors.Is(err, cerr):
		err = fmt.Errorf("%w: %w", cerr, err)
	case cerr == nil && errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	outcome := "not sent"
	switch {
	case e.Class == onceflow.Unknown:
		outcome = "message sent, but no final reply: it may have been delivered"
	case tpe != nil && st == stageSent:
		outcome = "message refused"
	case tpe != nil:
		outcome = "refused"
	}
	e.Err = redact(fmt.Errorf("smtp %s: %s: %s: %w", s.srv.Addr, what, outcome, err), sec)
	return e
}

// redact returns err with every secret masked in its text. Of its chain it keeps only
// what carries no secret text, so that errors.Is and errors.As still work on it.
func redact(err error, sec secrets) error {
	r := &redactedError{msg: sec.mask(err.Error())}
	for _, target := range []error{context.Canceled, context.DeadlineExceeded, os.ErrDeadlineExceeded, egress.ErrBlocked} {
		if errors.Is(err, target) {
			r.errs = append(r.errs, target)
		}
	}
	var tpe *textproto.Error
	if errors.As(err, &tpe) {
		r.errs = append(r.errs, &textproto.Error{Code: tpe.Code, Msg: sec.mask(tpe.Msg)})
	}
	var fe *keytmpl.FieldError
	if errors.As(err, &fe) {
		r.errs = append(r.errs, fe) // the template and the field's path, no value
	}
	return r
}
