package onceflowhttp

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/onceflow/onceflow/store"
)

// logRequests logs one line per request after it is answered: the method, the route
// pattern that served it (never the path, the query, a header or the body), the status and
// the duration. Health checks and metrics scrapes are logged at debug level.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := r.Pattern // set by the mux on r
		if route == "" || route == "/" {
			route = "unmatched"
		}
		level := slog.LevelInfo
		switch route {
		case "GET /healthz", "GET /readyz", "GET /metrics":
			level = slog.LevelDebug
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.log.LogAttrs(r.Context(), level, "http request", slog.String("method", r.Method), slog.String("route", route),
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

// maskRun masks what GET /v1/runs/{id} shows of a run: its input, its steps' outputs and
// errors, and its attempts' errors and response excerpts. The stored run is not changed.
func (s *Server) maskRun(run *store.Run, steps []*store.Step, v *runView) {
	docs := [][]byte{run.Input}
	for _, st := range steps {
		if len(st.Output) > 0 {
			docs = append(docs, st.Output)
		}
	}
	m := s.cfg.Redact.ForRun(run.Workflow, docs...)
	if len(v.Input) > 0 {
		v.Input = m.JSON(v.Input)
	}
	for i := range v.Steps {
		sv := &v.Steps[i]
		if len(sv.Output) > 0 {
			sv.Output = m.JSON(sv.Output)
		}
		sv.LastError = m.Text(sv.LastError)
		for j := range sv.Tries {
			a := &sv.Tries[j]
			a.Error = m.Text(a.Error)
			a.ResponseExcerpt = m.Excerpt([]byte(a.ResponseExcerpt), 0)
		}
	}
}

// maskProblem masks secrets in a problem document's text.
func (s *Server) maskProblem(p *problem) *problem {
	m := s.cfg.Redact.Secrets()
	if m.Empty() {
		return p
	}
	out := *p
	out.Title, out.Detail = m.Text(p.Title), m.Text(p.Detail)
	if p.Extra != nil {
		out.Extra = map[string]any{}
		for k, v := range p.Extra {
			if str, ok := v.(string); ok {
				v = m.Text(str)
			}
			out.Extra[k] = v
		}
	}
	return &out
}

// delivered counts a webhook delivery to workflow.
func (s *Server) delivered(workflow, outcome string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.WebhookDelivery(workflow, outcome)
	}
}
