// Package reqlog logs the requests an HTTP handler answers, one line each, by route: the
// method, the route pattern that served the request (never the path, the query, a header
// or the body), the status and the duration.
package reqlog

import (
	"log/slog"
	"net/http"
	"time"
)

// Logger says how requests are logged.
type Logger struct {
	// Log receives the lines.
	Log *slog.Logger
	// Message is each line's message.
	Message string
	// CatchAll is a pattern that serves only what no other route matched ("/" for a
	// not-found handler); it is logged, like no pattern at all, as route "unmatched".
	CatchAll string
	// Debug, when set, reports the routes logged at debug level rather than info
	// (health checks, static assets).
	Debug func(route string) bool
}

// Wrap returns next, logging each request after it is answered.
func (l Logger) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := r.Pattern // set by the mux on r
		if route == "" || route == l.CatchAll {
			route = "unmatched"
		}
		level := slog.LevelInfo
		if l.Debug != nil && l.Debug(route) {
			level = slog.LevelDebug
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		l.Log.LogAttrs(r.Context(), level, l.Message, slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", status), slog.Duration("duration", time.Since(start)))
	})
}

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
