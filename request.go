package onceflow

import (
	"encoding/json"
	"net/url"
	"sort"
	"strings"

	"github.com/onceflow/onceflow/internal/redact"
)

// Request is what an attempt sent to its destination, as its step recorded it with
// StepContext.RecordRequest (or StepError.Request): so that "what did we send the CRM?"
// is answered beside the destination's answer, per attempt, without searching logs. The
// engine masks it before it is stored — the values of headers whose names say they are
// credentials (Authorization, Cookie, X-Api-Key, anything with token, secret, password,
// signature, session or auth in its name) and of such URL parameters, a URL's password,
// the client's secrets and the run's personal data wherever they appear, the body as a
// response excerpt is masked — and bounds it: at most MaxRequestHeaders headers of
// MaxRequestValue bytes, a URL of MaxRequestURL bytes, a body of MaxRequestBody bytes and
// MaxRequestArgs arguments, each cut marked with "…".
type Request struct {
	// Method is the HTTP method, or what a step of another kind did: SMTP, SQL, PUBLISH.
	Method string `json:"method,omitempty"`
	// URL is where it went: the URL, smtp://host:port, nats:SUBJECT, amqp:EXCHANGE/KEY, the
	// database (never its DSN).
	URL string `json:"url,omitempty"`
	// Headers are the request's headers, or a message's (From, To, Subject, Message-ID).
	Headers map[string][]string `json:"headers,omitempty"`
	// Body is what was sent as the body, or a sql step's statement.
	Body string `json:"body,omitempty"`
	// Args are a statement's arguments, as text.
	Args []string `json:"args,omitempty"`
}

// Bounds of a recorded Request.
const (
	MaxRequestURL     = 2048
	MaxRequestHeaders = 32
	MaxRequestValue   = 256
	MaxRequestBody    = 4096
	MaxRequestArgs    = 20
)

// RecordRequest records what this attempt sends, to be stored with the attempt (masked and
// bounded, see Request) whatever its outcome. Call it before sending: an attempt that
// fails or whose outcome is unknown keeps what it tried. A *StepError's Request takes
// precedence.
func (sc *StepContext) RecordRequest(r Request) { sc.request = &r }

// RecordedRequest returns what RecordRequest recorded, as given (nil: nothing), for the
// tests of a step kind.
func (sc *StepContext) RecordedRequest() *Request { return sc.request }

// credentialNames are fragments of header and URL parameter names whose values are never
// stored, compared in lower case.
var credentialNames = append([]string{"auth", "cookie", "signature", "session", "credential", "api-key", "x-api"}, redact.DefaultNames...)

// credential reports whether a header or parameter named name carries a credential. An
// idempotency key names the effect and is shown.
func credential(name string) bool {
	n := strings.ToLower(name)
	if n == "idempotency-key" || n == "idempotency_key" {
		return false
	}
	for _, f := range credentialNames {
		if strings.Contains(n, f) {
			return true
		}
	}
	return n == "key" || n == "sig" || strings.HasSuffix(n, "_key") || strings.HasSuffix(n, "-key")
}

// maskRequest returns r masked with m (nil: only the credentials by name) and bounded.
func maskRequest(m *redact.Masker, r *Request) *Request {
	if r == nil {
		return nil
	}
	out := &Request{Method: redact.Trim(m.Text(r.Method), 32), URL: redact.Trim(m.Text(maskURL(r.URL)), MaxRequestURL)}
	if len(r.Headers) > 0 {
		names := make([]string, 0, len(r.Headers))
		for k := range r.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		out.Headers = map[string][]string{}
		for i, k := range names {
			if i == MaxRequestHeaders {
				out.Headers["…"] = []string{"more headers not recorded"}
				break
			}
			vals := r.Headers[k]
			if len(vals) > 4 {
				vals = vals[:4]
			}
			for _, v := range vals {
				if credential(k) {
					v = redact.Mask
				}
				out.Headers[redact.Trim(k, 64)] = append(out.Headers[redact.Trim(k, 64)], redact.Trim(m.Text(v), MaxRequestValue))
			}
		}
	}
	if r.Body != "" {
		out.Body = m.Excerpt([]byte(r.Body), MaxRequestBody)
	}
	for i, a := range r.Args {
		if i == MaxRequestArgs {
			out.Args = append(out.Args, "…")
			break
		}
		out.Args = append(out.Args, redact.Trim(m.Text(a), MaxRequestValue))
	}
	return out
}

// maskURL masks a URL's password and the values of its credential parameters; text that
// is not a URL with a scheme is returned as it is (for the masker's values to mask).
func maskURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redact.Mask)
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = redact.Mask
		} else {
			masked := false
			for k, vs := range q {
				if credential(k) {
					for i := range vs {
						vs[i] = redact.Mask
					}
					masked = true
				}
			}
			if masked {
				u.RawQuery = q.Encode()
			}
		}
	}
	out := u.String()
	return strings.ReplaceAll(out, url.QueryEscape(redact.Mask), redact.Mask)
}

// encodeRequest is r as the attempt row stores it; "" for none.
func encodeRequest(r *Request) string {
	if r == nil {
		return ""
	}
	b, err := json.Marshal(r)
	if err != nil {
		return ""
	}
	return string(b)
}

// requestView decodes a stored request and masks it with m for a reader; nil for none.
func requestView(stored string, m *redact.Masker) *Request {
	if stored == "" {
		return nil
	}
	var r Request
	if err := json.Unmarshal([]byte(stored), &r); err != nil {
		return nil
	}
	if m == nil {
		return &r
	}
	v := &Request{Method: m.Text(r.Method), URL: m.Text(r.URL), Body: r.Body}
	if r.Body != "" {
		v.Body = m.Excerpt([]byte(r.Body), 0)
	}
	if len(r.Headers) > 0 {
		v.Headers = map[string][]string{}
		for k, vals := range r.Headers {
			for _, x := range vals {
				v.Headers[k] = append(v.Headers[k], m.Text(x))
			}
		}
	}
	for _, a := range r.Args {
		v.Args = append(v.Args, m.Text(a))
	}
	return v
}
