package onceflowhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/triggers"
)

// Reloader reloads the workflow definitions a server runs: it reads and validates them,
// and only if every one is valid, puts them in place of the old ones (the client's
// workflows with onceflow.Client.ReplaceDefinitions, the server's webhook receivers with
// SetReceivers). An error that is, or wraps, ReloadProblems lists what to fix; the old
// definitions then keep running.
type Reloader func(ctx context.Context) (ReloadResult, error)

// ReloadResult is what a successful reload changed.
type ReloadResult struct {
	Workflows []string `json:"workflows"`
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Replaced  []string `json:"replaced"`
}

// ReloadProblem is one problem of a workflow file that kept a reload from applying: where
// it is and what to fix.
type ReloadProblem struct {
	File    string
	Line    int
	Col     int
	Message string
}

// ReloadProblems is the error a Reloader returns when the definitions have problems: it
// lists every one, and POST /v1/admin/reload answers 422 workflows-invalid with them.
type ReloadProblems []ReloadProblem

func (ps ReloadProblems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		switch {
		case p.Line > 0:
			lines[i] = fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Message)
		default:
			lines[i] = p.File + ": " + p.Message
		}
	}
	return strings.Join(lines, "\n")
}

// SetReceivers replaces the webhook receivers the server serves. Each one's workflow must
// be registered on the client, and no two may share a name; the error says which is
// not, and the old receivers then stay. Deliveries already being handled finish with the
// receivers they found.
func (s *Server) SetReceivers(rs []triggers.Receiver) error {
	if _, err := receiverMap(s.cfg.Client, rs); err != nil {
		return err
	}
	s.setReceivers(rs)
	return nil
}

func (s *Server) setReceivers(rs []triggers.Receiver) {
	hooks := make(map[string]triggers.Receiver, len(rs))
	byWorkflow := make(map[string]triggers.Receiver, len(rs))
	for _, r := range rs {
		hooks[r.Name()] = r
		byWorkflow[r.Workflow()] = r
	}
	s.hooksMu.Lock()
	s.hooks, s.byWorkflow = hooks, byWorkflow
	s.hooksMu.Unlock()
}

// hook returns the receiver of the webhook name.
func (s *Server) hook(name string) (triggers.Receiver, bool) {
	s.hooksMu.RLock()
	defer s.hooksMu.RUnlock()
	r, ok := s.hooks[name]
	return r, ok
}

// receiverOf returns the receiver that starts workflow, if one does.
func (s *Server) receiverOf(workflow string) (triggers.Receiver, bool) {
	s.hooksMu.RLock()
	defer s.hooksMu.RUnlock()
	r, ok := s.byWorkflow[workflow]
	return r, ok
}

// brokenReceivers names the receivers that cannot verify deliveries, sorted.
func (s *Server) brokenReceivers() []string {
	s.hooksMu.RLock()
	defer s.hooksMu.RUnlock()
	var out []string
	for name, r := range s.hooks {
		if r.Err() != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (s *Server) adminRoutes() {
	s.handleFunc("POST /v1/admin/reload", ScopeAdmin, nil, s.reload)
	s.handleFunc("POST /v1/runs/{id}/cancel", ScopeAdmin, nil, s.runCancel)
	s.handleFunc("POST /v1/workflows/{name}/pause", ScopeAdmin, nil, s.workflowPause)
	s.handleFunc("POST /v1/workflows/{name}/resume", ScopeAdmin, nil, s.workflowPause)
	s.handleFunc("GET /v1/pauses", ScopeRead, nil, s.pauseList)
}

// noteBody is the body of cancel, pause and resume: an optional note for the audit trail.
type noteBody struct {
	Note string `json:"note"`
}

func (s *Server) readNote(w http.ResponseWriter, r *http.Request) (string, error) {
	raw, err := s.readBody(w, r)
	if err != nil {
		return "", err
	}
	var b noteBody
	if len(bytes.TrimSpace(raw)) == 0 {
		return "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return "", newProblem(http.StatusBadRequest, "malformed-json", "Malformed request body", `the body must be a JSON object such as {"note": "why"}: `+err.Error())
	}
	return b.Note, nil
}

// cancelView is the answer to a cancel.
type cancelView struct {
	RunID     int64             `json:"run_id"`
	RunState  onceflow.State    `json:"run_state"`
	Cancelled []string          `json:"cancelled"`
	Running   []string          `json:"running"`
	Actor     string            `json:"actor"`
	Links     map[string]string `json:"links"`
}

// runCancel is POST /v1/runs/{id}/cancel: 200 with the steps cancelled, 404 for an unknown
// run, 409 when nothing is left to cancel.
func (s *Server) runCancel(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return newProblem(http.StatusBadRequest, "invalid-id", "Invalid run ID", "a run ID is a positive integer")
	}
	note, err := s.readNote(w, r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Client.CancelRun(r.Context(), id, actor(r), note)
	switch {
	case errors.Is(err, onceflow.ErrNotFound):
		return newProblem(http.StatusNotFound, "run-not-found", "Run not found", fmt.Sprintf("there is no run %d", id))
	case errors.Is(err, onceflow.ErrRunFinished):
		return newProblem(http.StatusConflict, "run-finished", "Nothing to cancel", fmt.Sprintf("every step of run %d has finished", id))
	case err != nil:
		return err
	}
	return writeJSON(w, http.StatusOK, cancelView{RunID: id, RunState: res.Run.State, Cancelled: orEmpty(res.Cancelled), Running: orEmpty(res.Running),
		Actor: actor(r), Links: map[string]string{"run": runLink(id)}})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// pauseView is a workflow's pause state.
type pauseView struct {
	Workflow string     `json:"workflow"`
	Paused   bool       `json:"paused"`
	Changed  bool       `json:"changed,omitempty"`
	Since    *time.Time `json:"since,omitempty"`
	Actor    string     `json:"actor,omitempty"`
	Note     string     `json:"note,omitempty"`
}

// workflowPause is POST /v1/workflows/{name}/pause and …/resume: 200 with the new state;
// changed is false when it already was so; 404 for a name that is not registered, has no
// runs and is not paused.
func (s *Server) workflowPause(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	note, err := s.readNote(w, r)
	if err != nil {
		return err
	}
	pause := strings.HasSuffix(r.URL.Path, "/pause")
	do := s.cfg.Client.ResumeWorkflow
	if pause {
		do = s.cfg.Client.PauseWorkflow
	}
	changed, err := do(r.Context(), name, actor(r), note)
	var de *onceflow.DefinitionError
	switch {
	case errors.As(err, &de):
		return newProblem(http.StatusBadRequest, "invalid-workflow-name", "Invalid workflow name", fmt.Sprintf("%q is not a workflow name", name))
	case errors.Is(err, onceflow.ErrWorkflowNotFound):
		return newProblem(http.StatusNotFound, "workflow-not-found", "Workflow not found",
			fmt.Sprintf("no workflow %q is registered, has runs or is paused; nothing was changed", name))
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, pauseView{Workflow: name, Paused: pause, Changed: changed})
}

// pauseList is GET /v1/pauses: the paused workflows.
func (s *Server) pauseList(w http.ResponseWriter, r *http.Request) error {
	list, err := s.cfg.Client.PausedWorkflows(r.Context())
	if err != nil {
		return err
	}
	out := make([]pauseView, len(list))
	for i, wp := range list {
		out[i] = pauseView{Workflow: wp.Workflow, Paused: true, Since: &wp.Since, Actor: wp.Actor, Note: wp.Note}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"paused": out})
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
	var ps ReloadProblems
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
