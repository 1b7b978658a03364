package onceflowui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/store"
)

// cancellable reports whether a step in state s is still to be done or decided, so that
// cancelling its run changes it.
func cancellable(s store.State) bool {
	switch s {
	case store.StatePending, store.StateProcessing, store.StateRetrying, store.StateNeedsReview:
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
	actor := sessionFrom(r).Actor()
	res, err := c.cfg.Client.CancelRun(r.Context(), id, actor, strings.TrimSpace(r.PostForm.Get("note")))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &pageError{Status: http.StatusNotFound, Title: "Run not found", Detail: fmt.Sprintf("run %d does not exist", id)}
	case errors.Is(err, store.ErrRunFinished):
		return &pageError{Status: http.StatusConflict, Title: "Nothing to cancel", Detail: fmt.Sprintf("every step of run %d has finished", id)}
	case err != nil:
		return err
	}
	done := "Cancelled."
	if len(res.Cancelled) > 0 {
		done = fmt.Sprintf("Cancelled: %s will not run.", strings.Join(res.Cancelled, ", "))
	}
	if len(res.Running) > 0 {
		done += fmt.Sprintf(" Still running: %s; the attempt is recorded when it ends.", strings.Join(res.Running, ", "))
	}
	c.log.Info("console run cancelled", "run_id", id, "actor", actor, "cancelled", res.Cancelled, "running", res.Running)
	http.Redirect(w, r, c.cfg.Prefix+"/runs/"+strconv.FormatInt(id, 10)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
	return nil
}
