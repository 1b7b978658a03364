// Package httpstep implements the "http" step kind: a templated HTTP request that carries
// the step's effect key as its idempotency key, and a declarative table that classifies
// the answer as success, retryable, permanent or unknown.
//
// Defaults: 2xx is success; 408, 425, 429 and 5xx are retryable (honouring Retry-After, up
// to the step's RetryPolicy.MaxRetryAfter);
// other 4xx and unfollowed 3xx are permanent; an error before the request was written is
// retryable; an error after it was written (a timeout, a dropped connection) leaves the
// outcome unknown. When the previous attempt's outcome is unknown and a verify request is
// configured, the destination is asked whether the effect exists before acting again.
package httpstep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/limit"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/steps"
)

// ReasonDestinationBlocked is the review reason of a request the egress policy refused.
const ReasonDestinationBlocked = onceflow.ReasonDestinationBlocked

// Request is a templated HTTP request. Templates read {input.…}, {run.key}, {run.id},
// {steps.ID.output.…} and {env.NAME}; string leaves of Body that are exactly one field
// keep that field's JSON type.
type Request struct {
	Method  string
	URL     string
	Headers map[string]string
	Body    any
}

// Rule classifies responses whose status matches Status: "409", "4xx", or "500-504".
type Rule struct {
	Status string
	// Class is "success", "retryable", "permanent" or "unknown".
	Class string
}

// Spec describes an http step.
type Spec struct {
	Request
	// IdempotencyHeader carries the effect key (default "Idempotency-Key"; "-" sends none).
	IdempotencyHeader string
	// Timeout bounds one request (default 30 s).
	Timeout time.Duration
	// Classify is consulted before the default classification, first match wins.
	Classify []Rule
	// Verify asks the destination whether the effect exists after an unknown outcome: a
	// 2xx answer completes the step with its body as output, 404 means act again.
	Verify *Request
	// ExcerptBytes caps the stored response excerpt (default 1024).
	ExcerptBytes int
	// Redact lists extra JSON field name fragments whose values are masked in stored
	// excerpts, in addition to redact.DefaultNames.
	Redact []string
	// Fields lists paths of personal data ("email", "customer.name") masked in stored
	// excerpts (see package redact).
	Fields []string
	// Limiter, when set, bounds the requests to each destination: every request first
	// waits for the limits of its host (Limiter.HostKeys) and of LimitKeys, and a 429
	// with Retry-After slows all of them down, not only this step.
	Limiter steps.Limiter
	// LimitKeys are the step's own limits (limit.StepKey).
	LimitKeys []string
	// MaxRetryAfter is the step's onceflow.RetryPolicy.MaxRetryAfter (0: its default): a
	// 429 holds back the Limiter's destinations for no longer, and a request that would
	// wait longer for them is retried when the wait is over instead.
	MaxRetryAfter time.Duration
}

// Env looks up an environment variable.
type Env func(name string) (string, bool)

type compiledRequest struct {
	method  string
	url     *keytmpl.Template
	headers map[string]*keytmpl.Template
	body    any // tree with *keytmpl.Template leaves
	// secretHeaders are the headers whose templates read {env.NAME}: not sent on to
	// another origin when a redirect is followed.
	secretHeaders []string
}

type rule struct {
	lo, hi int
	class  string
}

// Step is a compiled http step.
type Step struct {
	spec    Spec
	req     compiledRequest
	verify  *compiledRequest
	rules   []rule
	env     Env
	envVars []string
	client  *http.Client
}

// New compiles spec. client must enforce the egress policy (egress.Policy.Client); a nil
// client is refused. Its error joins (errors.Join) one *SpecError for every problem of
// spec.
func New(spec Spec, client *http.Client, env Env) (*Step, error) {
	if client == nil {
		return nil, errors.New("http: New needs an HTTP client; pass one that enforces the egress policy (egress.Policy.Client)")
	}
	if spec.IdempotencyHeader == "" {
		spec.IdempotencyHeader = "Idempotency-Key"
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 30 * time.Second
	}
	if spec.ExcerptBytes <= 0 {
		spec.ExcerptBytes = 1024
	}
	s := &Step{spec: spec, client: client, env: env}
	vars := keytmpl.EnvVars{}
	// Every problem of the spec is reported, not the first one only: validate and
	// start-up show them all.
	var errs []error
	var err error
	if s.req, err = compileRequest(spec.Request, vars); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	if spec.Verify != nil {
		v, err := compileRequest(*spec.Verify, vars)
		for _, e := range unjoin(err) {
			field := "verify"
			var se *SpecError
			if errors.As(e, &se) {
				field, e = "verify."+se.Field, se.Err
			}
			errs = append(errs, &SpecError{Field: field, Err: e})
		}
		s.verify = &v
	}
	s.envVars = vars.Names()
	for _, r := range spec.Classify {
		cr, err := parseRule(r)
		if err != nil {
			errs = append(errs, &SpecError{Field: "classify", Err: err})
			continue
		}
		s.rules = append(s.rules, cr)
	}
	if _, err := redact.NewMasker(redact.Options{Fields: spec.Fields, Names: spec.Redact}); err != nil {
		errs = append(errs, &SpecError{Field: "redact", Err: err})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// SpecError is one problem of a Spec. Field says where: method, url, headers, body,
// classify or redact, or verify.method, verify.url, … for the verify request.
type SpecError struct {
	Field string
	Err   error
}

func (e *SpecError) Error() string {
	if strings.HasPrefix(e.Field, "verify") {
		return "verify: " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *SpecError) Unwrap() error { return e.Err }

// unjoin returns the errors err joins (errors.Join), err alone if it joins none, and
// nothing for nil.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// compileRequest compiles r; its error joins every problem found.
func compileRequest(r Request, envVars keytmpl.EnvVars) (compiledRequest, error) {
	c := compiledRequest{method: strings.ToUpper(r.Method), headers: map[string]*keytmpl.Template{}}
	if c.method == "" {
		c.method = http.MethodPost
	}
	var errs []error
	switch c.method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead:
	default:
		errs = append(errs, &SpecError{Field: "method", Err: fmt.Errorf("method %q is not one of GET, POST, PUT, PATCH, DELETE, HEAD", r.Method)})
	}
	var err error
	if r.URL == "" {
		errs = append(errs, &SpecError{Field: "url", Err: errors.New("url is required")})
	} else if c.url, err = keytmpl.ParseStep(r.URL, envVars); err != nil {
		errs = append(errs, &SpecError{Field: "url", Err: fmt.Errorf("url: %w", err)})
	}
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !validHeaderName(k) {
			errs = append(errs, &SpecError{Field: "headers", Err: fmt.Errorf("header name %q is not a valid HTTP header name; use letters, digits and - (such as X-Api-Key)", k)})
			continue
		}
		t, err := keytmpl.ParseStep(r.Headers[k], envVars)
		if err != nil {
			errs = append(errs, &SpecError{Field: "headers", Err: fmt.Errorf("header %s: %w", k, err)})
			continue
		}
		c.headers[k] = t
		for _, f := range t.Fields() {
			if strings.HasPrefix(f, "env.") {
				c.secretHeaders = append(c.secretHeaders, k)
				break
			}
		}
	}
	if r.Body != nil {
		if c.body, err = keytmpl.CompileTree(r.Body, envVars); err != nil {
			errs = append(errs, &SpecError{Field: "body", Err: fmt.Errorf("body: %w", err)})
		}
	}
	return c, errors.Join(errs...)
}

func parseRule(r Rule) (rule, error) {
	switch r.Class {
	case "success", "retryable", "permanent", "unknown":
	default:
		return rule{}, fmt.Errorf("classify %q: class %q is not success, retryable, permanent or unknown", r.Status, r.Class)
	}
	s := strings.ToLower(strings.TrimSpace(r.Status))
	bad := fmt.Errorf("classify: status %q is not a code (409), a class (4xx) or a range (500-504)", r.Status)
	switch {
	case len(s) == 3 && strings.HasSuffix(s, "xx") && s[0] >= '1' && s[0] <= '5':
		d := int(s[0]-'0') * 100
		return rule{d, d + 99, r.Class}, nil
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || lo < 100 || hi > 599 || lo > hi {
			return rule{}, bad
		}
		return rule{lo, hi, r.Class}, nil
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return rule{}, bad
		}
		return rule{n, n, r.Class}, nil
	}
}

// Do performs the step: it is an onceflow.StepFunc.
func (s *Step) Do(ctx context.Context, sc *onceflow.StepContext) (any, error) {
	data, err := sc.TemplateData()
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	secrets, err := keytmpl.AddEnv(data, s.envVars, s.env)
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	if s.verify != nil && sc.PreviousOutcome == onceflow.Unknown {
		out, exists, err := s.check(ctx, sc, data, secrets)
		if err != nil || exists {
			return out, err
		}
	}
	req, err := s.build(ctx, s.req, data)
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	if s.spec.IdempotencyHeader != "-" {
		req.Header.Set(s.spec.IdempotencyHeader, sc.EffectKey)
	}
	resp, body, err := s.send(ctx, req)
	if err != nil {
		return nil, err
	}
	excerpt := s.excerpt(body, secrets)
	sc.RecordResponse(resp.StatusCode, excerpt)
	class := s.classify(resp.StatusCode)
	if class == "success" {
		return output(resp.StatusCode, body), nil
	}
	e := &onceflow.StepError{
		ResponseStatus: resp.StatusCode, ResponseExcerpt: excerpt,
		Err: fmt.Errorf("%s %s answered %d", s.req.method, s.req.url, resp.StatusCode),
	}
	switch class {
	case "permanent":
		e.Class = onceflow.Permanent
	case "unknown":
		e.Class = onceflow.Unknown
	default:
		e.Class = onceflow.Retryable
		if v := resp.Header.Get("Retry-After"); v != "" {
			// The engine honours it up to the step's cap, and parks the step for review
			// beyond it: the header as written shows in the error why.
			e.RetryAfter = retryAfter(v, time.Now())
			e.Err = fmt.Errorf("%w (Retry-After: %s)", e.Err, clip(v, 64))
		}
	}
	return nil, e
}

// clip cuts a header value from a destination to at most n bytes, on a rune boundary,
// marking the cut, and replaces what is not printable with '?': it goes into an error.
func clip(s string, n int) string {
	cut := len(s) > n
	if cut {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if cut {
		s += "…"
	}
	return s
}

// check runs the verify request: exists reports that the effect is already there.
func (s *Step) check(ctx context.Context, sc *onceflow.StepContext, data map[string]any, secrets []string) (any, bool, error) {
	req, err := s.build(ctx, *s.verify, data)
	if err != nil {
		return nil, false, onceflow.PermanentError(fmt.Errorf("verify: %w", err))
	}
	resp, body, err := s.send(ctx, req)
	if err != nil {
		// Asking changes nothing, so any failure to ask is simply retryable.
		return nil, false, &onceflow.StepError{Class: onceflow.Retryable, Err: fmt.Errorf("verify: %w", err)}
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		sc.RecordResponse(resp.StatusCode, "verify: "+s.excerpt(body, secrets))
		return output(resp.StatusCode, body), true, nil
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, nil
	}
	return nil, false, &onceflow.StepError{Class: onceflow.Retryable, ResponseStatus: resp.StatusCode, ResponseExcerpt: "verify: " + s.excerpt(body, secrets),
		Err: fmt.Errorf("verify %s %s answered %d; cannot tell whether the effect exists", s.verify.method, s.verify.url, resp.StatusCode)}
}

func (s *Step) build(ctx context.Context, r compiledRequest, data map[string]any) (*http.Request, error) {
	u, err := r.url.RenderURL(data)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if r.body != nil {
		v, err := keytmpl.RenderTree(r.body, data)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(egress.WithSecretHeaders(ctx, r.secretHeaders...), r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", r.url, err) // the template, never the rendered URL
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, t := range r.headers {
		v, err := t.Render(data)
		if err != nil {
			return nil, err
		}
		if !validHeaderValue(v) {
			// Found before anything is sent: a permanent error, not a retry that would
			// fail the same way.
			return nil, fmt.Errorf("header %s: the value rendered from %q holds a line break, NUL or other control character", k, t)
		}
		req.Header.Set(k, v)
	}
	return req, nil
}

// send performs req and reads at most 1 MiB of the answer. Its errors are classified:
// refused by the egress policy → permanent (destination_blocked); failed before the
// request was written → retryable; after → unknown.
func (s *Step) send(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	var keys []string
	if l := s.spec.Limiter; l != nil {
		keys = append(l.HostKeys(req.URL.Host), s.spec.LimitKeys...)
		// Waiting for the destination's limits happens before the request is sent, and
		// within the step's time, not the request's.
		release, err := l.Acquire(req.Context(), keys...)
		if err != nil {
			se := &onceflow.StepError{Class: onceflow.Retryable,
				Err: fmt.Errorf("%s %s: not sent: waiting for the destination's limit: %w", req.Method, redactURL(req), err)}
			var we *limit.WaitError
			if errors.As(err, &we) {
				// Held back longer than the step may wait now (a 429 slowed the host
				// down): tried again when the wait is over, without holding a worker.
				se.RetryAfter = min(we.Wait, s.maxRetryAfter())
			}
			return nil, nil, se
		}
		defer release()
	}
	resp, body, err := s.sendNow(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests && len(keys) > 0 {
		// The destination asked to slow down: every request to it waits, not only ours —
		// for no longer than the step's cap, whatever it asked for.
		if d := retryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
			_ = s.spec.Limiter.Slow(context.WithoutCancel(ctx), min(d, s.maxRetryAfter()), keys...)
		}
	}
	return resp, body, err
}

// maxRetryAfter is the longest Retry-After the step honours.
func (s *Step) maxRetryAfter() time.Duration {
	return onceflow.RetryPolicy{MaxRetryAfter: s.spec.MaxRetryAfter}.RetryAfterCap()
}

// sendNow performs req, now.
func (s *Step) sendNow(req *http.Request) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(req.Context(), s.spec.Timeout)
	defer cancel()
	wrote := false
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote = true }}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	// One attempt is one request: without GetBody, net/http does not silently send a
	// request again when a reused connection breaks (it would for one that carries an
	// Idempotency-Key header), so the attempt log tells exactly what was sent.
	req.GetBody = nil
	resp, err := s.client.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err == nil {
			return resp, body, nil
		}
	}
	what := fmt.Sprintf("%s %s", req.Method, redactURL(req))
	switch {
	case errors.Is(err, egress.ErrRedirectRefused):
		return nil, nil, &onceflow.StepError{Class: onceflow.Permanent, Err: fmt.Errorf("%s: %w", what, unwrapURL(err))}
	case errors.Is(err, egress.ErrBlocked):
		return nil, nil, &onceflow.StepError{Class: onceflow.Permanent, Reason: ReasonDestinationBlocked, Err: fmt.Errorf("%s: %w", what, unwrapURL(err))}
	case !wrote:
		return nil, nil, &onceflow.StepError{Class: onceflow.Retryable, Err: fmt.Errorf("%s: not sent: %w", what, unwrapURL(err))}
	default:
		return nil, nil, &onceflow.StepError{Class: onceflow.Unknown, Err: fmt.Errorf("%s: sent, but no complete answer: %w", what, unwrapURL(err))}
	}
}

// redactURL names a request by scheme, host and path: query strings may carry secrets.
func redactURL(req *http.Request) string {
	return req.URL.Scheme + "://" + req.URL.Host + req.URL.Path
}

// unwrapURL drops *url.Error's copy of the full URL, which may carry secrets.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (s *Step) classify(status int) string {
	for _, r := range s.rules {
		if status >= r.lo && status <= r.hi {
			return r.class
		}
	}
	switch {
	case status >= 200 && status < 300:
		return "success"
	case status == 408 || status == 425 || status == 429 || status >= 500:
		return "retryable"
	}
	return "permanent"
}

// output is the step's output: the parsed JSON answer, or the status and text.
func output(status int, body []byte) any {
	if len(bytes.TrimSpace(body)) > 0 && json.Valid(body) {
		return json.RawMessage(body)
	}
	return map[string]any{"status": status}
}

// retryAfter parses a Retry-After header (RFC 9110 section 10.2.3): delay-seconds, one or
// more digits, or an HTTP date. It returns 0 for anything else (absent, negative, signed,
// fractional, garbage, a date in the past): the backoff decides. A delay too large for a
// time.Duration — 9223372037 seconds and up, a date in year 9999 — is the longest
// Duration, never one that wraps round to a short or negative delay: it is longer than
// any cap, so the step goes to review.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(math.MaxInt64/time.Second) {
			return math.MaxInt64 // out of range: digits only, so too large
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now) // saturates at the longest Duration
	}
	return 0
}

// excerpt returns at most ExcerptBytes of body with secret-looking JSON fields, the
// personal-data fields and the values of environment secrets masked.
func (s *Step) excerpt(body []byte, secrets []string) string {
	m, _ := redact.NewMasker(redact.Options{Values: secrets, Fields: s.spec.Fields, Names: s.spec.Redact}) // checked by New
	return m.Excerpt(body, s.spec.ExcerptBytes)
}

// validHeaderName reports whether name is an HTTP token (RFC 9110 section 5.1).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHeaderValue reports whether v can be sent as a header value: no control character
// but tab, so no CR, LF or NUL.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
