package onceflowhttp

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
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
	Start string `json:"start"`
	Runs  string `json:"runs"`
}

// servedWorkflows returns the names of the workflows a request may start, sorted: those
// registered on the client, less onceflow's own (named onceflow.…, such as the
// notification channels).
func (s *Server) servedWorkflows() []string {
	var out []string
	for _, name := range s.cfg.Client.Workflows() {
		if served(name) {
			out = append(out, name)
		}
	}
	return out
}

// served reports whether requests may start a workflow of this name: the engine's own,
// named "onceflow.…" (the notification channels), are not.
func served(name string) bool { return !strings.HasPrefix(name, "onceflow.") }

// listWorkflows is GET /v1/workflows: the workflows served, with how to start them.
func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	out := struct {
		Workflows []workflowView `json:"workflows"`
	}{Workflows: []workflowView{}}
	for _, name := range s.servedWorkflows() {
		v := workflowView{Name: name, Links: workflowLinks{Start: "/v1/workflows/" + name + "/runs", Runs: "/v1/runs?workflow=" + url.QueryEscape(name)}}
		if d, ok := s.definition(name); ok {
			v.Description, v.RunKey, v.Entity, v.RequiredInput = d.Description, d.RunKey, d.Entity, d.Input.Required
			for _, st := range d.Steps {
				v.Steps = append(v.Steps, st.ID)
			}
			if h := d.Webhook; h != nil {
				v.Webhook = &webhookView{Name: h.Name, Path: "/hooks/" + h.Name, Scheme: h.Scheme, EventTypes: h.EventTypes}
			}
			if sc := d.Schedule; sc != nil {
				name := sc.Name
				if name == "" {
					name = d.Name
				}
				v.Schedule = &scheduleRef{Name: name, Cron: sc.Cron, Timezone: sc.Timezone}
			}
		}
		out.Workflows = append(out.Workflows, v)
	}
	return writeJSON(w, http.StatusOK, out)
}

// workflowNotFound is the 404 for a workflow that is not served: it names those that are.
func (s *Server) workflowNotFound(name string) *problem {
	served := s.servedWorkflows()
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

// knownWorkflow reports whether a request may start name: one served (see
// servedWorkflows).
func (s *Server) knownWorkflow(name string) bool {
	if !served(name) {
		return false
	}
	_, ok := slices.BinarySearch(s.cfg.Client.Workflows(), name)
	return ok
}
