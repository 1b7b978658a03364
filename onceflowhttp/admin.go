package onceflowhttp

import (
	"context"
	"errors"
	"net/http"

	"github.com/onceflow/onceflow/flowfile"
)

// Reloader reloads the workflow definitions a server runs: it reads and validates them,
// and only if every one is valid, puts them in place of the old ones (the client's
// workflows with onceflow.Client.ReplaceWorkflows, the server's with SetDefinitions). An
// error that is, or wraps, flowfile.Problems lists what to fix; the old definitions then
// keep running.
type Reloader func(ctx context.Context) (ReloadResult, error)

// ReloadResult is what a successful reload changed.
type ReloadResult struct {
	Workflows []string `json:"workflows"`
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Replaced  []string `json:"replaced"`
}

// SetDefinitions replaces the workflow files the server serves (their run_key templates
// and webhooks). Requests already being handled finish with the definitions they found.
func (s *Server) SetDefinitions(defs []*flowfile.Definition) {
	byName := make(map[string]*flowfile.Definition, len(defs))
	hooks := map[string]*flowfile.Definition{}
	for _, d := range defs {
		byName[d.Name] = d
		if d.Webhook != nil {
			hooks[d.Webhook.Name] = d
		}
	}
	s.defsMu.Lock()
	s.defs, s.hooks = byName, hooks
	s.defsMu.Unlock()
}

// definition returns the served workflow file called name.
func (s *Server) definition(name string) (*flowfile.Definition, bool) {
	s.defsMu.RLock()
	defer s.defsMu.RUnlock()
	d, ok := s.defs[name]
	return d, ok
}

// hook returns the workflow file that declares the webhook name.
func (s *Server) hook(name string) (*flowfile.Definition, bool) {
	s.defsMu.RLock()
	defer s.defsMu.RUnlock()
	d, ok := s.hooks[name]
	return d, ok
}

func (s *Server) adminRoutes() {
	admin := func(h handlerFunc) http.Handler { return s.auth(ScopeAdmin, s.handle(h)) }
	s.mux.Handle("POST /v1/admin/reload", admin(s.reload))
}

// problemView is one problem of a workflow file, as the API shows it.
type problemView struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Message string `json:"message"`
}

// reload is POST /v1/admin/reload: 200 with what changed, or 422 with every problem found,
// the old definitions still running.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Reload == nil {
		return newProblem(http.StatusNotImplemented, "reload-unavailable", "Reload unavailable",
			"this server was started without a way to reload its workflows")
	}
	res, err := s.cfg.Reload(r.Context())
	var ps flowfile.Problems
	switch {
	case errors.As(err, &ps):
		views := make([]problemView, len(ps))
		for i, p := range ps {
			views[i] = problemView{File: p.File, Line: p.Line, Col: p.Col, Message: p.Message}
		}
		p := newProblem(http.StatusUnprocessableEntity, "workflows-invalid", "Workflows not reloaded",
			"the workflow files have problems; the definitions loaded before keep running")
		p.Extra = map[string]any{"problems": views}
		return p
	case err != nil:
		return err
	}
	for _, l := range []*[]string{&res.Workflows, &res.Added, &res.Removed, &res.Replaced} {
		if *l == nil {
			*l = []string{}
		}
	}
	s.log.Info("workflows reloaded", "actor", actor(r), "workflows", res.Workflows, "added", res.Added, "removed", res.Removed)
	return writeJSON(w, http.StatusOK, res)
}
