package emailstep

import (
	"context"
	"errors"
	"net"
	"net/mail"
	"reflect"
	"regexp"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/steps"
)

// KindOptions configure the email kind.
type KindOptions struct {
	// Server is the SMTP server messages are submitted to (ServerFromEnv); nil: e-mail is
	// not configured, and files are checked but no email step is built.
	Server *Server
	// Dial opens connections to the server: egress.Policy.DialContext, so that the
	// egress policy applies.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Kind is the email step kind, `kind: email` with an `email:` block. It also e-mails the
// alerts of a notify block's `email:` channel.
type Kind struct {
	srv  *Server
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewKind returns the email kind.
func NewKind(o KindOptions) *Kind {
	dial := o.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return &Kind{srv: o.Server, dial: dial}
}

var (
	_ steps.Kind    = (*Kind)(nil)
	_ steps.Alerter = (*Kind)(nil)
)

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:     "email",
		Summary:  "Submits one e-mail message, its Message-ID derived from the effect key, to an SMTP server.",
		Settings: reflect.TypeFor[Settings](),
	}
}

// Decode decodes an email block.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	c := &Settings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Settings are an email step's settings, its `email:` block.
type Settings struct {
	From    string `yaml:"from"`
	To      string `yaml:"to"`
	Cc      string `yaml:"cc"`
	ReplyTo string `yaml:"reply_to"`
	Subject string `yaml:"subject"`
	Body    string `yaml:"body"`
	HTML    bool   `yaml:"html"`
	// AllowLists lets a template value in to, cc or reply_to hold several addresses;
	// by default each is one address.
	AllowLists bool `yaml:"allow_lists"`

	kind *Kind
}

// Spec is the message the settings describe.
func (s *Settings) Spec() Spec {
	return Spec{From: s.From, To: s.To, Cc: s.Cc, ReplyTo: s.ReplyTo, Subject: s.Subject, Body: s.Body, HTML: s.HTML, AllowLists: s.AllowLists}
}

// Walk checks the required fields and reports every field as a template, which may read
// the environment; the body of an html: true message is HTML.
func (s *Settings) Walk(w block.Walker) {
	for _, f := range []struct{ name, v string }{{"to", s.To}, {"from", s.From}, {"subject", s.Subject}} {
		if f.v == "" {
			w.Problem("", "email %s is required", f.name)
		}
	}
	for _, f := range []struct{ name, src string }{{"from", s.From}, {"to", s.To}, {"cc", s.Cc}, {"reply_to", s.ReplyTo}, {"subject", s.Subject}, {"body", s.Body}} {
		if f.src == "" {
			continue
		}
		use := block.Use{Label: "email " + f.name, Env: true, Text: true, ReportParse: true}
		if f.name == "body" && s.HTML {
			use.Text, use.HTML = false, true
		}
		w.Template(f.name, f.src, use)
	}
}

// OnUnknown sends an unknown outcome to review (DefaultOnUnknown): SMTP servers do not
// deduplicate.
func (s *Settings) OnUnknown() onceflow.UnknownAction { return DefaultOnUnknown }

// Build compiles the message.
func (s *Settings) Build(b *steps.Build) (onceflow.StepFunc, error) {
	if s.kind == nil || s.kind.srv == nil {
		return nil, errors.New("email steps need an SMTP server; set ONCEFLOW_SMTP_ADDR (and ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD)")
	}
	st, err := New(s.Spec(), *s.kind.srv, b.Env, s.kind.dial)
	if err != nil {
		return nil, err
	}
	return st.Do, nil
}

// AlertBlock is the notify field of the channel the kind carries.
func (k *Kind) AlertBlock() string { return "email" }

// AlertChannel decodes a notify block's email channel: {to: "ops@example.com", from:
// "onceflow@example.com"}, either of which may read {env.NAME}. Each alert is a message
// of its subject and text; one whose delivery cannot be confirmed waits for review rather
// than going out twice.
func (k *Kind) AlertChannel(s block.Settings) (steps.Channel, error) {
	c := &Channel{kind: k}
	if err := s.Decode(c); err != nil {
		return steps.Channel{}, err
	}
	return steps.Channel{Config: c, Label: c.To, Identity: "email\x00" + c.To + "\x00" + c.From}, nil
}

// Channel is a notify block's email channel.
type Channel struct {
	// To lists the recipients, separated by commas; From is the sender. Either may read
	// {env.NAME}.
	To   string `yaml:"to"`
	From string `yaml:"from"`

	kind *Kind
}

// Spec is the message each alert is sent as.
func (c *Channel) Spec() Spec {
	return Spec{From: c.From, To: c.To, Subject: "{input.subject}", Body: "{input.text}"}
}

var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// Walk checks the addresses: required, read from the environment or written out, and
// address lists when written out.
func (c *Channel) Walk(w block.Walker) {
	for _, f := range []struct{ name, v string }{{"to", c.To}, {"from", c.From}} {
		if f.v == "" {
			w.Problem("", "email %s is required", f.name)
			continue
		}
		w.Template(f.name, f.v, block.Use{Label: "email " + f.name, EnvOnly: true, ReportParse: true})
		if !envOnly(f.v) {
			continue // the walker reports it
		}
		if !strings.Contains(f.v, "{") {
			if _, err := mail.ParseAddressList(f.v); err != nil {
				w.Problem(f.name, "email %s %q is not an address list: %v", f.name, f.v, err)
			}
		}
	}
}

// envOnly reports whether src parses and reads nothing but {env.NAME}.
func envOnly(src string) bool {
	t, err := keytmpl.Parse(src)
	if err != nil {
		return false
	}
	for _, f := range t.Fields() {
		name, ok := strings.CutPrefix(f, "env.")
		if !ok || !envNameRE.MatchString(name) {
			return false
		}
	}
	return true
}

// OnUnknown sends an unknown outcome to review: an alert is not sent twice on a guess.
func (c *Channel) OnUnknown() onceflow.UnknownAction { return DefaultOnUnknown }

// Build compiles the message.
func (c *Channel) Build(b *steps.Build) (onceflow.StepFunc, error) {
	if c.kind == nil || c.kind.srv == nil {
		return nil, errors.New("e-mail needs an SMTP server; set ONCEFLOW_SMTP_ADDR (and ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD)")
	}
	st, err := New(c.Spec(), *c.kind.srv, b.Env, c.kind.dial)
	if err != nil {
		return nil, err
	}
	return st.Do, nil
}
