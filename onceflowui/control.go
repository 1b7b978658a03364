package onceflowui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow"
)

// cancellable reports whether a step in state s is still to be done or decided, so that
// cancelling its run changes it.
func cancellable(s onceflow.State) bool {
	switch s {
	case onceflow.StatePending, onceflow.StateProcessing, onceflow.StateRetrying, onceflow.StateNeedsReview:
		return true
	}
	return false
}

// runCancel is POST /ui/runs/{id}/cancel: the run's steps that are pending, retrying or
// waiting for review are cancelled, a running attempt finishes and is recorded, and the
// audit trail records the signed-in token's name as the actor, with the note.
func (c *Console) runCancel(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if !confirmed(r) {
		d, err := c.loadRun(r.Context(), id)
		if err != nil {
			return err
		}
		return c.confirmCancel(w, r, d, note)
	}
	actor := sessionFrom(r).Actor()
	res, err := c.cfg.Client.CancelRun(r.Context(), id, actor, note)
	switch {
	case errors.Is(err, onceflow.ErrNotFound):
		return &pageError{Status: http.StatusNotFound, Title: "Run not found", Detail: fmt.Sprintf("run %d does not exist", id)}
	case errors.Is(err, onceflow.ErrRunFinished):
		return &pageError{Status: http.StatusConflict, Title: "Nothing to cancel", Detail: fmt.Sprintf("every step of run %d has finished", id)}
	case err != nil:
		return err
	}
	c.log.Info("console run cancelled", "run_id", id, "actor", actor, "cancelled", res.Cancelled, "running", res.Running)
	http.Redirect(w, r, doneURL(c.cfg.Prefix+"/runs/"+strconv.FormatInt(id, 10), doneCancelled), http.StatusSeeOther)
	return nil
}

// workflowPause returns the handler of POST /ui/workflows/{name}/pause (pause set) and
// …/resume: the workflow's steps stop being claimed, in every process, until it is resumed
// (steps already running finish), as Client.PauseWorkflow and ResumeWorkflow do; the audit
// trail records the signed-in token's name as the actor, with the note. Pausing a paused
// workflow, or resuming one that is not paused, changes and records nothing, and says so.
// A workflow the console does not show — not registered, without runs and not paused — is
// not found (the client's pause refuses it).
func (c *Console) workflowPause(pause bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ctx := r.Context()
		name := r.PathValue("name")
		actor := sessionFrom(r).Actor()
		note := strings.TrimSpace(r.PostForm.Get("note"))
		if pause && !confirmed(r) {
			return c.confirmPause(ctx, w, r, name, note)
		}
		do, verb := c.cfg.Client.ResumeWorkflow, "resumed"
		if pause {
			do, verb = c.cfg.Client.PauseWorkflow, "paused"
		}
		changed, err := do(ctx, name, actor, note)
		var de *onceflow.DefinitionError
		switch {
		case errors.As(err, &de):
			return &pageError{Status: http.StatusBadRequest, Title: "Invalid workflow name", Detail: fmt.Sprintf("%q is not a workflow name", name)}
		case errors.Is(err, onceflow.ErrWorkflowNotFound):
			return &pageError{Status: http.StatusNotFound, Title: "Workflow not found",
				Detail: fmt.Sprintf("no workflow %q is registered, has runs or is paused; nothing was changed", name)}
		}
		if err != nil {
			return err
		}
		var done bannerCode
		switch {
		case !changed && pause:
			done = doneAlreadyPaused
		case !changed:
			done = doneNotPaused
		case pause:
			done = donePaused
		default:
			done = doneResumed
		}
		c.log.Info("console workflow "+verb, "workflow", name, "actor", actor, "changed", changed)
		http.Redirect(w, r, doneURL(c.cfg.Prefix+"/", done, "workflow", name), http.StatusSeeOther)
		return nil
	}
}
