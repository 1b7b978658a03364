package onceflowui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow"
)

// A destructive action — cancelling a run, abandoning a review item, pausing a workflow —
// takes two requests: the first (its button) shows what will happen and changes nothing;
// only the confirmation, whose form says confirmed=1, acts. No script is needed, so the
// Content-Security-Policy stays as strict as it is.

// confirmData is the page that asks for the confirmation of a destructive action.
type confirmData struct {
	Heading string
	// Lead says what the action does; Lines what it will change, one consequence each.
	Lead  string
	Lines []string
	// Action is where the confirmation is posted, Back the page to return to.
	Action, Back string
	Note         string
	Button       string
}

func (d confirmData) title() string { return d.Heading }

// confirmed reports whether the form is the confirmation of its action.
func confirmed(r *http.Request) bool { return r.PostForm.Get("confirmed") == "1" }

// confirmCancel asks for the confirmation of the cancellation of the run d.
func (c *Console) confirmCancel(w http.ResponseWriter, r *http.Request, d *runData, note string) error {
	cd := confirmData{Heading: fmt.Sprintf("Cancel run %d?", d.Run.ID), Note: note, Button: "Yes, cancel the run",
		Action: c.cfg.Prefix + "/runs/" + strconv.FormatInt(d.Run.ID, 10) + "/cancel", Back: c.cfg.Prefix + "/runs/" + strconv.FormatInt(d.Run.ID, 10),
		Lead: fmt.Sprintf("Run %d of %s (run key %s) will end cancelled. Its steps that are still to be done or decided will never run:", d.Run.ID, d.Run.Workflow, d.Run.RunKey)}
	for _, s := range d.Steps {
		switch s.Step.State {
		case onceflow.StateProcessing:
			cd.Lines = append(cd.Lines, fmt.Sprintf("%s is running now: its attempt finishes and is recorded, and the step stays cancelled", s.Step.Name))
		case onceflow.StatePending, onceflow.StateRetrying, onceflow.StateNeedsReview:
			cd.Lines = append(cd.Lines, fmt.Sprintf("%s (%s) is cancelled", s.Step.Name, s.Step.State))
		}
	}
	if len(cd.Lines) == 0 {
		return &pageError{Status: http.StatusConflict, Title: "Nothing to cancel", Detail: fmt.Sprintf("every step of run %d has finished", d.Run.ID)}
	}
	c.render(w, r, http.StatusOK, "confirm", cd)
	return nil
}

// confirmAbandon asks for the confirmation of the abandon of run runID's step.
func (c *Console) confirmAbandon(w http.ResponseWriter, r *http.Request, runID int64, step, note string) error {
	d, err := c.loadRun(r.Context(), runID)
	if err != nil {
		return err
	}
	item := c.cfg.Prefix + "/review/" + strconv.FormatInt(runID, 10) + "/" + url.PathEscape(step)
	cd := confirmData{Heading: fmt.Sprintf("Abandon run %d step %s?", runID, step), Note: note, Button: "Yes, abandon the step",
		Action: item + "/abandon", Back: item,
		Lead: fmt.Sprintf("Step %s of run %d (%s) will end failed: onceflow gives up on it, and it is not tried again unless the run is replayed.", step, runID, d.Run.Workflow)}
	needs := map[string][]string{} // step → the steps that need it
	for _, s := range d.Steps {
		for _, n := range s.Step.Needs {
			needs[n] = append(needs[n], s.Step.Name)
		}
	}
	var after []string
	queue := []string{step}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range needs[n] {
			if !slices.Contains(after, m) {
				after = append(after, m)
				queue = append(queue, m)
			}
		}
	}
	state := map[string]onceflow.State{}
	for _, s := range d.Steps {
		state[s.Step.Name] = s.Step.State
	}
	var cancelled []string
	for _, n := range after {
		if !finished(state[n]) || state[n] == onceflow.StateNeedsReview {
			cancelled = append(cancelled, n)
		}
	}
	if len(cancelled) > 0 {
		cd.Lines = append(cd.Lines, "the steps that need it are cancelled: "+strings.Join(cancelled, ", "))
	}
	cd.Lines = append(cd.Lines, "the run ends failed once nothing else of it is active or waiting for review")
	c.render(w, r, http.StatusOK, "confirm", cd)
	return nil
}

// confirmPause asks for the confirmation of the pause of workflow name.
func (c *Console) confirmPause(ctx context.Context, w http.ResponseWriter, r *http.Request, name, note string) error {
	cd := confirmData{Heading: fmt.Sprintf("Pause %s?", name), Note: note, Button: "Yes, pause the workflow",
		Action: c.cfg.Prefix + "/workflows/" + url.PathEscape(name) + "/pause", Back: c.cfg.Prefix + "/",
		Lead: fmt.Sprintf("No process claims a step of %s until it is resumed:", name),
		Lines: []string{"runs are still accepted and stored, and their steps wait",
			"steps already running finish and are recorded"}}
	st, err := c.cfg.Client.Stats(ctx)
	if err != nil {
		return err
	}
	known := slices.Contains(c.cfg.Client.Workflows(), name)
	for _, rc := range st.Runs {
		known = known || rc.Workflow == name
	}
	if !known { // a paused workflow is not paused again: the pause itself says so
		paused, err := c.cfg.Client.PausedWorkflows(ctx)
		if err != nil {
			return err
		}
		for _, wp := range paused {
			known = known || wp.Workflow == name
		}
	}
	if !known {
		return &pageError{Status: http.StatusNotFound, Title: "Workflow not found",
			Detail: fmt.Sprintf("no workflow %q is registered, has runs or is paused; nothing was changed", name)}
	}
	for _, dc := range st.Due {
		if dc.Workflow == name && dc.Count > 0 {
			cd.Lines = append(cd.Lines, fmt.Sprintf("%d steps due now wait until the resume", dc.Count))
		}
	}
	c.render(w, r, http.StatusOK, "confirm", cd)
	return nil
}
