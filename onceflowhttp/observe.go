package onceflowhttp

import (
	"net/http"

	"github.com/onceflow/onceflow/internal/reqlog"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
	"github.com/onceflow/onceflow/store"
)

// logRequests logs one line per request after it is answered: the method, the route
// pattern that served it (never the path, the query, a header or the body), the status and
// the duration. Health checks and metrics scrapes are logged at debug level.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return reqlog.Logger{Log: s.log, Message: "http request", CatchAll: "/", Debug: func(route string) bool {
		switch route {
		case "GET /healthz", "GET /readyz", "GET /metrics":
			return true
		}
		return false
	}}.Wrap(next)
}

// maskRun masks what GET /v1/runs/{id} shows of a run: its input, its steps' outputs and
// errors, and its attempts' errors and response excerpts. The stored run is not changed.
func (s *Server) maskRun(run *store.Run, steps []*store.Step, v *runView) {
	m := apiv1.RunMasker(s.cfg.Redact, run, steps)
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
