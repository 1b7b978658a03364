package onceflowhttp

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// route is one route of the server: its pattern and the query parameters it takes.
type route struct {
	pattern string
	query   []string
}

// handleRoute adds the route pattern: h, behind a token of scope (none when scope is ""),
// for requests whose query holds only the parameters query names, each at most once.
// Every route is added here, so that no handler reads a parameter the route does not
// declare and no request's parameter is ignored: a misspelt ?dryrun=true is a 400 naming
// the parameters the route takes, not an action carried out for real.
func (s *Server) handleRoute(pattern string, scope Scope, query []string, h http.Handler) {
	next := s.checkQuery(query, h)
	if scope != "" {
		next = s.auth(scope, next)
	}
	s.mux.Handle(pattern, next)
	s.routes = append(s.routes, route{pattern: pattern, query: query})
}

// handleFunc is handleRoute for a handler that returns an error.
func (s *Server) handleFunc(pattern string, scope Scope, query []string, h handlerFunc) {
	s.handleRoute(pattern, scope, query, s.handle(h))
}

// checkQuery answers 400 to a request whose query does not parse, names a parameter that
// is not one of known, or gives one twice; it passes the others to next.
func (s *Server) checkQuery(known []string, next http.Handler) http.Handler {
	return s.handle(func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.RawQuery == "" {
			next.ServeHTTP(w, r)
			return nil
		}
		takes := "takes no query parameters"
		if len(known) > 0 {
			takes = "takes only the query parameters " + strings.Join(known, ", ")
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return newProblem(http.StatusBadRequest, "invalid-query", "Malformed query", fmt.Sprintf("the query string is not URL-encoded (%v); this route %s", err, takes))
		}
		names := make([]string, 0, len(q))
		for name := range q {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if !slices.Contains(known, name) {
				p := newProblem(http.StatusBadRequest, "unknown-parameter", "Unknown query parameter",
					fmt.Sprintf("%q is not a parameter of %s, which %s; nothing was done", clip(name), r.Pattern, takes))
				p.Extra = map[string]any{"parameter": clip(name), "known": append([]string{}, known...)}
				return p
			}
			if len(q[name]) > 1 {
				return newProblem(http.StatusBadRequest, "repeated-parameter", "Repeated query parameter",
					fmt.Sprintf("the query parameter %s is given %d times; give it once", name, len(q[name])))
			}
		}
		next.ServeHTTP(w, r)
		return nil
	})
}

// clip shortens a name from a request for an answer: at most 100 bytes.
func clip(s string) string {
	if len(s) <= 100 {
		return s
	}
	return strings.ToValidUTF8(s[:100], "") + "…"
}
