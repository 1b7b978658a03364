package onceflowhttp

import (
	"net/http"

	"github.com/onceflow/onceflow/internal/reqlog"
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

// maskProblem masks the client's secrets in a problem document's text.
func (s *Server) maskProblem(p *problem) *problem {
	mask := s.cfg.Client.MaskSecrets
	out := *p
	out.Title, out.Detail = mask(p.Title), mask(p.Detail)
	if p.Extra != nil {
		out.Extra = map[string]any{}
		for k, v := range p.Extra {
			if str, ok := v.(string); ok {
				v = mask(str)
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
