// Package emailstep implements the "email" step kind: one e-mail message, its addresses,
// subject and body rendered from the run's data, submitted to an SMTP server.
//
// # Templates
//
// Every field of a Spec is a template over the step's TemplateData ({input.…}, {run.key},
// {run.id}, {workflow}, {step}, {steps.ID.output.…}) and the environment ({env.NAME}).
// Rendering never invents a value: a missing field, or a rendered address that does not
// parse, is a permanent error naming the field. The values of environment variables are
// treated as secrets and masked in errors and response excerpts, as is the server password.
//
// # The message
//
// The message is RFC 5322 text with a quoted-printable UTF-8 body (text/plain, or text/html
// when Spec.HTML is set) and an RFC 2047 encoded subject when it is not ASCII. In an HTML
// body each field is escaped for the HTML around it (keytmpl.HTML): a value can add no
// element, leave no attribute and make no link of another scheme; {+field} splices raw
// HTML where the template asks for it, in text. An address is used only if its envelope
// form (MAIL FROM, RCPT TO) is the address that was checked: quoted local parts, which
// SMTP carries unquoted, and domain literals are refused. Its
// Message-ID is derived only from the step's effect key,
//
//	Message-ID: <first 32 hex digits of SHA-256(effect key)@onceflow>
//
// and the key itself travels in an X-Onceflow-Effect-Key header, so every attempt of a step
// carries the same identity and a receiving system that looks can recognise a repeat.
//
// # Outcomes and deduplication
//
// A failure to connect, or a network failure before the whole message has been sent,
// leaves nothing delivered and is retryable. A 4xx reply, at any stage, is retryable and a
// 5xx reply permanent: the server refused the message, so it was not delivered. Once the
// whole message has been sent, a dropped connection, a timeout or an unexpected reply
// instead of the server's final answer leaves the outcome unknown: the message may have
// been delivered. A server the egress policy refuses is permanent (reason
// destination_blocked), as is one that cannot be used as configured (STARTTLS required but
// not offered; credentials that would travel unencrypted).
//
// SMTP servers generally cannot deduplicate: a message submitted twice is delivered twice,
// the shared Message-ID notwithstanding. The workflow layer should therefore send an
// unknown outcome to a person for review rather than retry it, unless the destination is
// known to deduplicate by Message-ID: register email steps with
// Step.OnUnknown = DefaultOnUnknown (onceflow.ReviewUnknown).
package emailstep

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
	masking "github.com/onceflow/onceflow/internal/redact"
)

// DefaultOnUnknown is the unknown-outcome action email steps should be registered with:
// SMTP servers cannot deduplicate, so a message that may have been delivered goes to
// review instead of being sent again.
const DefaultOnUnknown = onceflow.ReviewUnknown

// ReasonDestinationBlocked is the review reason of a server the egress policy refused.
const ReasonDestinationBlocked = onceflow.ReasonDestinationBlocked

// DefaultTimeout bounds one attempt when Spec.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Spec describes an email step. Every string is a template (see the package doc): write
// "{{" and "}}" for literal braces, as in the CSS of an HTML body.
type Spec struct {
	// From is the sender, one address ("Shop <noreply@example.com>"). Required.
	From string
	// To lists the recipients, separated by commas. Required.
	To string
	// Cc and ReplyTo are optional comma-separated lists.
	Cc      string
	ReplyTo string
	// Subject is a single line; line breaks in the rendered text become spaces.
	Subject string
	// Body is the message text, or HTML when HTML is set.
	Body string
	// HTML sends Body as text/html instead of text/plain. Each field of an HTML body is
	// escaped for the HTML around it (text, attribute value, URL; see keytmpl.HTML), and a
	// field written {+field} splices raw HTML, in text only. In a plain-text body, and in
	// every other field, values are text and {+field} is refused.
	HTML bool
	// AllowLists lets one template field of To, Cc or ReplyTo hold several addresses
	// ("a@x, b@y"). By default a field is one address, and a value holding more is a
	// permanent error: an input field cannot add recipients.
	AllowLists bool
	// Timeout bounds one attempt, from connecting to the server's last reply (default
	// DefaultTimeout). A deadline of the attempt's context that comes sooner wins.
	Timeout time.Duration
}

// Output is the output of a successful step.
type Output struct {
	MessageID string   `json:"message_id"`
	To        []string `json:"to"`
	Accepted  bool     `json:"accepted"`
}

// Step is a compiled email step.
type Step struct {
	spec    Spec
	srv     Server
	host    string
	tmpl    templates
	env     func(string) (string, bool)
	envVars []string
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	now     func() time.Time
}

type templates struct {
	from, to, cc, replyTo, subject, body *keytmpl.Template
	html                                 *keytmpl.HTML // the body, compiled for HTML when Spec.HTML is set
}

// New compiles spec for sending through srv. env looks up the variables that {env.NAME}
// fields read (it may be nil when no template reads one). dial opens connections to the
// server: pass egress.Policy.DialContext so that the egress policy applies, or a
// net.Dialer's DialContext where none does. New checks the templates, the server settings
// and every address that contains no template field.
func New(spec Spec, srv Server, env func(string) (string, bool), dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Step, error) {
	if spec.Timeout <= 0 {
		spec.Timeout = DefaultTimeout
	}
	if err := srv.check(); err != nil {
		return nil, fmt.Errorf("email: %w", err)
	}
	if dial == nil {
		return nil, errors.New("email: dial is required: pass egress.Policy.DialContext, or a net.Dialer's DialContext where no egress policy applies")
	}
	host, _, _ := net.SplitHostPort(srv.Addr)
	s := &Step{spec: spec, srv: srv, host: host, env: env, dial: dial, now: time.Now}

	vars := keytmpl.EnvVars{}
	fields := []struct {
		name     string
		src      string
		dst      **keytmpl.Template
		required bool
		check    func(string) error // validates a value without template fields
	}{
		{"from", spec.From, &s.tmpl.from, true, func(v string) error { _, err := parseAddress("from", v); return err }},
		{"to", spec.To, &s.tmpl.to, true, func(v string) error { _, err := parseList("to", v); return err }},
		{"cc", spec.Cc, &s.tmpl.cc, false, func(v string) error { _, err := parseList("cc", v); return err }},
		{"reply_to", spec.ReplyTo, &s.tmpl.replyTo, false, func(v string) error { _, err := parseList("reply_to", v); return err }},
		{"subject", spec.Subject, &s.tmpl.subject, false, nil},
		{"body", spec.Body, &s.tmpl.body, false, nil},
	}
	for _, f := range fields {
		if strings.TrimSpace(f.src) == "" {
			if f.required {
				return nil, fmt.Errorf("email: %s is required", f.name)
			}
			continue
		}
		t, err := keytmpl.ParseStep(f.src, vars)
		if err != nil {
			return nil, fmt.Errorf("email %s: %w", f.name, err)
		}
		if t.Raw() && !(f.name == "body" && spec.HTML) {
			return nil, fmt.Errorf("email %s: {+field} splices raw HTML, which only the body of an html: true message may hold; elsewhere values are shown as they are: write {field}", f.name)
		}
		if f.check != nil && len(t.Fields()) == 0 {
			if err := f.check(f.src); err != nil {
				return nil, fmt.Errorf("email: %w", err)
			}
		}
		*f.dst = t
	}
	if spec.HTML && s.tmpl.body != nil {
		h, err := s.tmpl.body.HTML()
		if err != nil {
			return nil, fmt.Errorf("email body: %w", err)
		}
		s.tmpl.html = h
	}
	s.envVars = vars.Names()
	if len(s.envVars) > 0 && env == nil {
		return nil, fmt.Errorf("email: the templates read {env.%s} but no environment lookup was given", s.envVars[0])
	}
	return s, nil
}

// Do sends the message: it is an onceflow.StepFunc.
func (s *Step) Do(ctx context.Context, sc *onceflow.StepContext) (any, error) {
	data, err := sc.TemplateData()
	if err != nil {
		return nil, onceflow.PermanentError(fmt.Errorf("email: %w", err))
	}
	secrets, err := s.addEnv(data)
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	m, err := s.compose(data, sc.EffectKey)
	if err != nil {
		return nil, onceflow.PermanentError(redact(err, secrets))
	}
	reply, err := s.send(ctx, m, secrets)
	if err != nil {
		return nil, err
	}
	sc.RecordResponse(250, secrets.excerpt(reply))
	return Output{MessageID: m.id, To: m.toAddrs, Accepted: true}, nil
}

// addEnv adds the environment variables the templates read to data and returns the
// secrets to mask: their values and the server's credentials.
func (s *Step) addEnv(data map[string]any) (secrets, error) {
	values, err := keytmpl.AddEnv(data, s.envVars, s.env)
	if err != nil {
		return nil, fmt.Errorf("email: %w", err)
	}
	sec := s.srv.secrets()
	for _, v := range values {
		if len(v) >= 4 {
			sec = append(sec, v)
		}
	}
	sort.Slice(sec, func(i, j int) bool { return len(sec[i]) > len(sec[j]) })
	return sec, nil
}

// parseAddress parses the single address of the field called name.
func parseAddress(name, v string) (*mail.Address, error) {
	a, err := mail.ParseAddress(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a valid e-mail address: %v", name, v, trimMail(err))
	}
	if err := checkEnvelope(name, a); err != nil {
		return nil, err
	}
	return a, nil
}

// parseList parses the comma-separated addresses of the field called name.
func parseList(name, v string) ([]*mail.Address, error) {
	list, err := mail.ParseAddressList(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a valid list of e-mail addresses: %v", name, v, trimMail(err))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: %q holds no e-mail address", name, v)
	}
	for _, a := range list {
		if err := checkEnvelope(name, a); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// checkEnvelope refuses an address whose SMTP envelope form — the bare local@domain of
// MAIL FROM and RCPT TO, a.Address — is not the address that was checked: a quoted local
// part, which net/mail unquotes ("victim@corp.example"@evil.example would be sent as
// RCPT TO:<victim@corp.example@evil.example>, which a server may route to corp.example),
// and a domain literal (a@[127.0.0.1], which names a host instead of a mail domain). The
// local part must be a dot-atom (letters, digits, !#$%&'*+-/=?^_`{|}~ and non-ASCII
// letters, in dot-separated runs) and the domain a host name, so that the envelope
// carries exactly what the header names.
func checkEnvelope(name string, a *mail.Address) error {
	at := strings.LastIndexByte(a.Address, '@')
	if at < 0 {
		return fmt.Errorf("%s: %q has no domain", name, a.Address)
	}
	local, domain := a.Address[:at], a.Address[at+1:]
	switch {
	case !dotAtom(local):
		return fmt.Errorf("%s: %q has a quoted local part (%q), which is not accepted: SMTP would carry it without its quotes, to another address", name, a.Address, local)
	case strings.HasPrefix(domain, "["):
		return fmt.Errorf("%s: %q names a host by its address (a domain literal), which is not accepted: write a mail domain", name, a.Address)
	case !hostName(domain):
		return fmt.Errorf("%s: %q: %q is not a host name", name, a.Address, domain)
	case len(local) > 64 || len(a.Address) > 254:
		return fmt.Errorf("%s: %q is longer than an e-mail address may be (64 bytes before the @, 254 in all)", name, a.Address)
	}
	return nil
}

// dotAtom reports whether s is an RFC 5322 dot-atom (with RFC 6532's UTF-8): what a local
// part may be without quotes.
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r >= 0x80 && unicode.IsPrint(r) && !unicode.IsSpace(r):
		case strings.ContainsRune(".!#$%&'*+-/=?^_`{|}~", r):
		default:
			return false
		}
	}
	return true
}

// hostName reports whether s is a host name: labels of letters, digits and hyphens (or
// non-ASCII letters, for an internationalised name) separated by dots.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r >= 0x80 && unicode.IsLetter(r) || r >= 0x80 && unicode.IsMark(r)) {
				return false
			}
		}
	}
	return true
}

func trimMail(err error) string { return strings.TrimPrefix(err.Error(), "mail: ") }

// secrets are strings that must not appear in errors or excerpts, longest first.
type secrets []string

func (sec secrets) mask(s string) string {
	m, _ := masking.NewMasker(masking.Options{Values: sec})
	return m.Text(s)
}

// excerptBytes caps a stored server reply.
const excerptBytes = 512

// excerpt returns the masked, trimmed text of a server reply.
func (sec secrets) excerpt(reply string) string {
	return masking.Trim(strings.TrimSpace(strings.ToValidUTF8(sec.mask(reply), "\uFFFD")), excerptBytes)
}

// redactedError carries an error text from which secrets were removed, and only the parts
// of the original chain that carry no secret text.
type redactedError struct {
	msg  string
	errs []error
}

func (e *redactedError) Error() string   { return e.msg }
func (e *redactedError) Unwrap() []error { return e.errs }
