package onceflowhttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/onceflow/onceflow"
)

// problem is an RFC 9457 problem detail, returned as application/problem+json.
type problem struct {
	Status int    `json:"status"`
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
	// Extra members of the problem object.
	Extra map[string]any `json:"-"`
}

func (p *problem) Error() string { return p.Title + ": " + p.Detail }

// problemTypes are the "type" URIs, relative to the API's documentation.
const typeBase = "https://onceflow.dev/problems/"

func newProblem(status int, typ, title, detail string) *problem {
	return &problem{Status: status, Type: typeBase + typ, Title: title, Detail: detail}
}

// handlerFunc is an HTTP handler that returns an error; errors become problems.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// unavailableRetryAfter is the Retry-After, in seconds, of a 503 for a database that
// cannot be reached.
const unavailableRetryAfter = 5

// handle adapts h: a *problem is written as it is; a database that cannot be reached
// (onceflow.ErrUnavailable) is logged at warn level and answered 503 with Retry-After; any
// other error is logged and answered with a 500 that reveals nothing.
func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var p *problem
		if !errors.As(err, &p) {
			var mbe *http.MaxBytesError
			if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
				// The client went away: nobody reads the answer, and it is not the
				// server's fault. Nothing was acknowledged.
				s.log.Debug("request abandoned by the client", "method", r.Method, "route", r.Pattern, "error", err)
				p = newProblem(http.StatusBadRequest, "request-abandoned", "Request abandoned", "the client went away; nothing was acknowledged")
			} else if errors.As(err, &mbe) {
				p = newProblem(http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large",
					"the body is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
			} else if errors.Is(err, onceflow.ErrUnavailable) {
				// The database's condition (a restart, a lost network), not a fault of the
				// server's: the client tries again later, and a start with the same key
				// finds out whether it was stored.
				s.log.Warn("database unavailable; answered 503", "method", r.Method, "route", r.Pattern, "error", err)
				p = newProblem(http.StatusServiceUnavailable, "database-unavailable", "Database unavailable",
					"the database cannot be reached right now; nothing was acknowledged; try again after Retry-After seconds (a start is safe to repeat with the same Idempotency-Key, a webhook delivery as it is)")
				p.RetryAfter = unavailableRetryAfter
			} else {
				s.log.Error("request failed", "method", r.Method, "route", r.Pattern, "error", err)
				p = newProblem(http.StatusInternalServerError, "internal", "Internal error", "the request could not be completed; nothing was acknowledged")
			}
		}
		writeProblem(w, s.maskProblem(p))
	})
}

func writeProblem(w http.ResponseWriter, p *problem) {
	body := map[string]any{"type": p.Type, "title": p.Title, "status": p.Status}
	if p.Detail != "" {
		body["detail"] = p.Detail
	}
	for k, v := range p.Extra {
		body[k] = v
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}
