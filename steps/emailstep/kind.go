package emailstep

import (
	"context"
	"encoding/json"
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
		Name:    "email",
		Summary: "Submits one e-mail message, its Message-ID derived from the effect key, to an SMTP server.",
		Doc: `Every field is a template over the run's input, earlier steps' outputs and the
environment. The message goes to the SMTP server of ONCEFLOW_SMTP_ADDR (with
ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD and ONCEFLOW_SMTP_TLS); its Message-ID is
derived from the effect key alone and the key travels in an X-Onceflow-Effect-Key header,
so every attempt carries the same identity. One template value is one address unless
allow_lists: true; an html: true body escapes each field for the HTML around it.

Outcomes: a failure to connect, a 4xx reply or a network failure before the whole message
was sent is retried; a 5xx reply is permanent. Once the whole message was sent, a dropped
connection or a timeout leaves the outcome unknown. SMTP servers do not deduplicate, so an
unknown outcome waits for review by default (on_unknown: needs_review) rather than sending
the message twice.`,
		Example: `- id: welcome_email
  kind: email
  effect_key: "welcome-email:{input.submission_id}"
  email:
    from: "Acme <hello@acme.example>"
    to: "{input.email}"
    subject: "Welcome to Acme, {input.name}"
    body: "Hello {input.name}, thank you for getting in touch."
`,
		Schema: json.RawMessage(`{
			"type": "object",
			"required": [
				"from",
				"to",
				"subject"
			],
			"additionalProperties": false,
			"properties": {
				"from": {
					"$ref": "#/$defs/template"
				},
				"to": {
					"$ref": "#/$defs/template"
				},
				"cc": {
					"$ref": "#/$defs/template"
				},
				"reply_to": {
					"$ref": "#/$defs/template"
				},
				"subject": {
					"$ref": "#/$defs/template"
				},
				"body": {
					"$ref": "#/$defs/template"
				},
				"html": {
					"type": "boolean",
					"description": "Send the body as text/html: each template field is escaped for the HTML around it (text, quoted attribute value, URL); {+field} splices raw HTML, in text only."
				},
				"allow_lists": {
					"type": "boolean",
					"description": "Let one template value in to, cc or reply_to hold several comma-separated addresses (default: one address)."
				}
			}
		}`),
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

// AlertSchema is the JSON Schema of a notify block's email channel.
func (k *Kind) AlertSchema() json.RawMessage {
	return json.RawMessage(`{
			"type": "object",
			"required": [
				"to"
			],
			"additionalProperties": false,
			"properties": {
				"to": {
					"$ref": "#/$defs/template"
				},
				"from": {
					"$ref": "#/$defs/template"
				}
			}
		}`)
}

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
