package onceflowhttp

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/onceflow/onceflow/internal/bodybudget"
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

// readBody reads at most MaxBody bytes; a larger body is a 413 before anything is parsed.
// Before it reads, it takes the body's size (MaxBody when the client does not announce
// one) from the budget of MaxBodyMemory bytes that all requests' bodies share until they
// are answered (package bodybudget); when the budget stays full, the request is answered
// 503 "server-busy" with Retry-After, its body unread. A body cut short is a 400
// "body-incomplete", logged at debug level and counted: it is the client's doing, not the
// server's.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return s.readBodyLimit(w, r, s.cfg.MaxBody)
}

// readBodyLimit is readBody with limit in place of MaxBody (at most MaxBodyMemory).
func (s *Server) readBodyLimit(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	if err := s.bodies.Take(r, limit); err != nil {
		if !errors.Is(err, bodybudget.ErrFull) {
			return nil, err // the client went away
		}
		s.log.Warn("request refused: the request bodies held in memory are at their limit", "method", r.Method, "route", r.Pattern,
			"max_body_memory", s.cfg.MaxBodyMemory)
		p := newProblem(http.StatusServiceUnavailable, "server-busy", "Server busy",
			fmt.Sprintf("the server holds as many request bodies in memory as it may (%d bytes); try again after Retry-After. Nothing was read or stored", s.cfg.MaxBodyMemory))
		p.RetryAfter = 1
		return nil, p
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
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
