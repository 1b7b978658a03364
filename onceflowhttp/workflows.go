package onceflowhttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/onceflow/onceflow"
)

// workflowView is a served workflow as GET /v1/workflows lists it.
type workflowView struct {
	Name          string       `json:"name"`
	Description   string       `json:"description,omitempty"`
	RunKey        string       `json:"run_key,omitempty"`
	Entity        string       `json:"entity,omitempty"`
	RequiredInput []string     `json:"required_input,omitempty"`
	Steps         []string     `json:"steps,omitempty"`
	Webhook       *webhookView `json:"webhook,omitempty"`
	// Schedule, when the file has one, says when the workflow starts on the clock (GET
	// /v1/schedules has its next ticks).
	Schedule *scheduleRef  `json:"schedule,omitempty"`
	Links    workflowLinks `json:"links"`
}

type scheduleRef struct {
	Name     string `json:"name"`
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
}

type webhookView struct {
	Name       string   `json:"name"`
	Path       string   `json:"path"`
	Scheme     string   `json:"scheme"`
	EventTypes []string `json:"event_types,omitempty"`
}

type workflowLinks struct {
	// Start is where the token starts a run; absent when a schedule or a queue feeds the
	// workflow and its file does not open it to tokens (api: true).
	Start string `json:"start,omitempty"`
	Runs  string `json:"runs"`
}

// servedWorkflows returns the names of the workflows the request's token may start,
// sorted (onceflow.Client.StartableBy): never the engine's own, nor those its list or
// their access rules keep from it.
func (s *Server) servedWorkflows(r *http.Request) []string {
	return s.cfg.Client.StartableBy(caller(r))
}

// listWorkflows is GET /v1/workflows: the workflows the token may know of, with how to
// start those it may start. The engine's own are not listed, nor those the token's list
// or the workflow's api.tokens keep from it.
func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	out := struct {
		Workflows []workflowView `json:"workflows"`
	}{Workflows: []workflowView{}}
	by := caller(r)
	schedules := map[string]onceflow.Schedule{}
	for _, sc := range s.cfg.Client.ScheduleDefinitions() {
		if _, ok := schedules[sc.Workflow]; !ok {
			schedules[sc.Workflow] = sc
		}
	}
	for _, name := range s.cfg.Client.Workflows() {
		err := s.cfg.Client.MayStart(by, name)
		var re *onceflow.StartRefusedError
		if err != nil && !(errors.As(err, &re) && re.Reason == onceflow.RefusedTriggered) {
			continue // the engine's own, or one the token's list or the workflow's tokens keep from it
		}
		v := workflowView{Name: name, Links: workflowLinks{Runs: "/v1/runs?workflow=" + url.QueryEscape(name)}}
		if err == nil {
			v.Links.Start = "/v1/workflows/" + name + "/runs"
		}
		if d, ok := s.cfg.Client.Workflow(name); ok {
			v.Description, v.RunKey, v.Entity, v.RequiredInput = d.Description, d.RunKey, d.Entity, d.RequiredInput
			for _, st := range d.Steps {
				v.Steps = append(v.Steps, st.ID)
			}
		}
		if rcv, ok := s.receiverOf(name); ok {
			info := rcv.Info()
			v.Webhook = &webhookView{Name: info.Name, Path: "/hooks/" + info.Name, Scheme: info.Scheme, EventTypes: info.EventTypes}
		}
		if sc, ok := schedules[name]; ok {
			v.Schedule = &scheduleRef{Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone}
		}
		out.Workflows = append(out.Workflows, v)
	}
	return writeJSON(w, http.StatusOK, out)
}

// workflowNotFound is the 404 for a workflow the request may not know of: one not
// registered, or internal. It names those the token may start, so it says the same of
// both.
func (s *Server) workflowNotFound(r *http.Request, name string) *problem {
	served := s.servedWorkflows(r)
	detail := fmt.Sprintf("no workflow named %q is served here", name)
	switch {
	case len(served) == 0:
		detail += "; none is loaded"
	default:
		detail += "; the served workflows are " + strings.Join(served, ", ")
	}
	p := newProblem(http.StatusNotFound, "workflow-not-found", "Workflow not found", detail)
	p.Extra = map[string]any{"workflows": append([]string{}, served...)}
	return p
}

// startRefused is the answer to a start the client's access rule refuses (MayStart,
// StartFrom): the 404 of an unknown workflow for one not registered or internal, else a
// 403 that says what would let the token start it.
func (s *Server) startRefused(r *http.Request, name string, err error) error {
	var re *onceflow.StartRefusedError
	switch {
	case errors.Is(err, onceflow.ErrWorkflowNotFound):
		return s.workflowNotFound(r, name)
	case !errors.As(err, &re):
		return err
	}
	where := "its onceflow.Workflow's Access"
	file := ""
	if d, ok := s.cfg.Client.Workflow(name); ok && d.File != "" {
		where, file = d.File, d.File
	}
	var detail string
	switch re.Reason {
	case onceflow.RefusedNotInList:
		detail = fmt.Sprintf("token %q may start only %s; to let it start %s, add it to the token's list in ONCEFLOW_API_TOKENS (name:scope:workflows=%s+%s:secret)",
			re.Caller.Token, strings.Join(re.Allowed, ", "), name, strings.Join(re.Allowed, "+"), name)
	case onceflow.RefusedTokenNotNamed:
		detail = fmt.Sprintf("workflow %q may be started only by the tokens %s; to let token %q start it, add the token to api.tokens in %s",
			name, strings.Join(re.Allowed, ", "), re.Caller.Token, where)
	case onceflow.RefusedTriggered:
		fix := fmt.Sprintf("to let tokens start it, add api: true (or api: {tokens: [%s]}) to %s", re.Caller.Token, where)
		if file == "" {
			fix = "to let tokens start it, set Access.API on its onceflow.Workflow"
		}
		detail = fmt.Sprintf("workflow %q is started by its %s, not by API tokens; %s", name, re.Trigger, fix)
	default:
		detail = re.Error()
	}
	p := newProblem(http.StatusForbidden, "start-refused", "Not allowed to start this workflow", detail)
	p.Extra = map[string]any{"workflow": name, "reason": string(re.Reason)}
	return p
}
