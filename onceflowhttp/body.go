package onceflowhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/onceflow/onceflow/internal/jsondoc"
)

// DefaultMaxDepth is how deeply a request body's JSON may nest when Config.MaxDepth is
// zero: objects and lists inside each other, the outermost counting 1.
const DefaultMaxDepth = jsondoc.DefaultMaxDepth

// AbortMetrics is implemented by a Config.Metrics that also counts requests whose body
// was cut short (the client announced more than it sent, stalled, or went away).
type AbortMetrics interface {
	// RequestAborted counts one such request on route, the pattern that served it.
	RequestAborted(route string)
}

// errBodyIncomplete marks a body the client did not finish sending.
var errBodyIncomplete = errors.New("request body incomplete")

// bodyWait is how long a request waits for room in the body budget before it is answered
// 503.
const bodyWait = time.Second

// bodyHold is the part of the body budget one request holds, released when its handler
// returns (holdBodies): what is parsed from a body lives as long as the handler.
type bodyHold struct {
	n int64
}

type bodyHoldKey struct{}

// holdBodies gives every request a bodyHold and releases what readBody took for it when
// the request has been answered.
func (s *Server) holdBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := &bodyHold{}
		defer func() {
			if h.n > 0 {
				s.bodies.Release(h.n)
			}
		}()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyHoldKey{}, h)))
	})
}

// readBody reads at most MaxBody bytes; a larger body is a 413 before anything is parsed.
// Before it reads, it takes the body's size (MaxBody when the client does not announce
// one) from the budget of MaxBodyMemory bytes that all requests' bodies share until they
// are answered; when the budget stays full for bodyWait, the request is answered 503
// "server-busy" with Retry-After, its body unread. A body cut short is a 400
// "body-incomplete", logged at debug level and counted: it is the client's doing, not the
// server's.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.cfg.MaxBody {
		return nil, &http.MaxBytesError{Limit: s.cfg.MaxBody}
	}
	if h, ok := r.Context().Value(bodyHoldKey{}).(*bodyHold); ok && r.ContentLength != 0 {
		n := r.ContentLength
		if n < 0 {
			n = s.cfg.MaxBody
		}
		if err := s.waitForBody(r, n); err != nil {
			if r.Context().Err() != nil {
				return nil, r.Context().Err()
			}
			s.log.Warn("request refused: the request bodies held in memory are at their limit", "method", r.Method, "route", r.Pattern,
				"max_body_memory", s.cfg.MaxBodyMemory)
			p := newProblem(http.StatusServiceUnavailable, "server-busy", "Server busy",
				fmt.Sprintf("the server holds as many request bodies in memory as it may (%d bytes); try again after Retry-After. Nothing was read or stored", s.cfg.MaxBodyMemory))
			p.RetryAfter = 1
			return nil, p
		}
		h.n += n
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err == nil {
		return body, nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, err
	}
	s.log.Debug("request body incomplete", "method", r.Method, "route", r.Pattern, "error", err)
	if am, ok := s.cfg.Metrics.(AbortMetrics); ok {
		am.RequestAborted(r.Pattern)
	}
	p := newProblem(http.StatusBadRequest, "body-incomplete", "Request body incomplete",
		"the body ended before the length the request announced, or the client stopped sending; nothing was accepted")
	return nil, p
}

// waitForBody takes n bytes of the body budget, waiting up to bodyWait for them.
func (s *Server) waitForBody(r *http.Request, n int64) error {
	if s.bodies.TryAcquire(n) {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), bodyWait)
	defer cancel()
	return s.bodies.Acquire(ctx, n)
}

// checkJSON refuses a body that two JSON parsers could read differently, or that costs far
// more to handle than its size (jsondoc.Check), as a 400 problem that says why.
func checkJSON(body []byte, maxDepth int) error {
	err := jsondoc.Check(body, maxDepth, "the body")
	var de *jsondoc.Error
	if !errors.As(err, &de) {
		return err
	}
	switch de.Kind {
	case jsondoc.InvalidUTF8:
		return newProblem(http.StatusBadRequest, "invalid-utf8", "Invalid UTF-8", de.Detail)
	case jsondoc.LoneSurrogate:
		return newProblem(http.StatusBadRequest, "invalid-utf8", "Invalid UTF-16 escape", de.Detail)
	case jsondoc.DuplicateMember:
		return newProblem(http.StatusBadRequest, "duplicate-member", "Duplicate JSON member", de.Detail)
	case jsondoc.TooDeep:
		return newProblem(http.StatusBadRequest, "json-too-deep", "JSON nested too deeply", de.Detail)
	}
	return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", de.Detail)
}

// checkBody applies checkJSON with the server's depth limit.
func (s *Server) checkBody(body []byte) error { return checkJSON(body, s.cfg.MaxDepth) }
