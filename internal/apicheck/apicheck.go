// Package apicheck checks HTTP requests and the answers to them against an OpenAPI 3.1
// document, for tests: wrapped around a handler, it reports every exchange the document
// does not describe — an answer whose shape, status or content type it does not list, a
// route it does not have, or a request it calls invalid that was nevertheless accepted.
//
// The tests of the API and of the command wrap their servers' handlers with it, so that
// every request a test makes is checked, including those of tests written later. Paths
// outside /v1/ and /hooks/ that the document does not describe (web pages) are not
// checked.
package apicheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Checker checks exchanges against one document. It is safe for concurrent use.
type Checker struct {
	doc    *openapi3.T
	router routers.Router

	mu       sync.Mutex
	checked  int
	problems []error
}

// New loads and validates doc, an OpenAPI document in JSON or YAML.
func New(doc []byte) (*Checker, error) {
	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("apicheck: load the document: %w", err)
	}
	if err := t.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("apicheck: the document is invalid: %w", err)
	}
	r, err := gorillamux.NewRouter(t)
	if err != nil {
		return nil, fmt.Errorf("apicheck: routes: %w", err)
	}
	return &Checker{doc: t, router: r}, nil
}

// Exchange is one request and the answer to it.
type Exchange struct {
	Request     *http.Request
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

// Check returns what the document finds wrong with x, or nil.
func (c *Checker) Check(ctx context.Context, x Exchange) error {
	c.mu.Lock()
	c.checked++
	c.mu.Unlock()
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	if len(x.RequestBody) > 0 && req.Header.Get("Content-Type") == "" {
		// onceflow reads request bodies as JSON whatever their Content-Type says, and many
		// clients send none: check such a body as the JSON it is read as.
		req.Header.Set("Content-Type", "application/json")
	}
	name := req.Method + " " + req.URL.RequestURI()
	route, params, err := c.findRoute(req)
	if err != nil {
		if !strings.HasPrefix(req.URL.Path, "/v1/") && !strings.HasPrefix(req.URL.Path, "/hooks/") {
			return nil // not the API: the web console's pages, for instance
		}
		// Not in the document: only a 404 problem or a 405 from the router may answer it.
		if x.Status == http.StatusMethodNotAllowed || (x.Status == http.StatusNotFound && mediaType(x.Header) == "application/problem+json") {
			return nil
		}
		return fmt.Errorf("%s answered %d, but the OpenAPI document has no such operation (%v)", name, x.Status, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status, Header: x.Header,
		Body: io.NopCloser(bytes.NewReader(x.Body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	var problems []error
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		problems = append(problems, fmt.Errorf("the answer %d %s does not match the document: %w", x.Status, excerpt(x.Body), err))
	}
	if reqErr != nil && (x.Status < 400 || x.Status >= 500) {
		problems = append(problems, fmt.Errorf("the request is invalid by the document (%w), yet it was answered %d", reqErr, x.Status))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %w", name, errors.Join(problems...))
	}
	return nil
}

// findRoute finds req's operation. An effect key may contain slashes, which a path
// parameter cannot: the rest of /v1/keys/… is matched as one segment.
func (c *Checker) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	route, params, err := c.router.FindRoute(req)
	if err == nil {
		return route, params, nil
	}
	if rest, ok := strings.CutPrefix(req.URL.Path, "/v1/keys/"); ok && strings.Contains(rest, "/") {
		r2 := req.Clone(req.Context())
		r2.URL = &url.URL{Path: "/v1/keys/" + strings.ReplaceAll(rest, "/", "%2F"), RawQuery: req.URL.RawQuery}
		if route, params, err2 := c.router.FindRoute(r2); err2 == nil {
			params["key"] = rest
			return route, params, nil
		}
	}
	return nil, nil, err
}

// Handler returns next wrapped: every request and its answer are checked, and what is
// wrong is passed to report (nil: kept for Problems).
func (c *Checker) Handler(next http.Handler, report func(error)) http.Handler {
	if report == nil {
		report = c.record
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// A body cut short: the handler meets the same error after the same bytes, and
			// what it answers is not an exchange the document describes.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), failingReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		x := Exchange{Request: r, RequestBody: body, Status: rec.status, Header: w.Header().Clone(), Body: rec.body.Bytes()}
		if err := c.Check(context.WithoutCancel(r.Context()), x); err != nil {
			report(err)
		}
	})
}

func (c *Checker) record(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, err)
}

// Problems returns what Handler recorded without a report function.
func (c *Checker) Problems() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.problems...)
}

// Checked returns how many exchanges were checked.
func (c *Checker) Checked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

// recorder keeps a copy of the answer while writing it through.
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func mediaType(h http.Header) string {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.TrimSpace(ct)
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// failingReader returns err from every Read.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }
