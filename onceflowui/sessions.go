package onceflowui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/onceflow/onceflow"
)

// sessionsData is the sessions page: the active sessions and those that ended in the last
// day, with the signed-in person's own marked.
type sessionsData struct {
	Own      string
	Sessions []sessionRow
}

type sessionRow struct {
	*onceflow.ConsoleSession
	Short string
	State string
}

func (sessionsData) title() string { return "Sessions" }

// onlyAdmin refuses a session that may not act on every workflow: other people's sessions
// and addresses are for admins of all.
func onlyAdmin(s *session) error {
	if s.Admin {
		return nil
	}
	return &pageError{Status: http.StatusForbidden, Title: "Not allowed", Detail: "only an admin of every workflow may see and end sessions"}
}

// sessions is GET /ui/sessions: who is signed in, from where, since when, and who signed
// out or was signed out.
func (c *Console) sessions(w http.ResponseWriter, r *http.Request) error {
	s := sessionFrom(r)
	if err := onlyAdmin(s); err != nil {
		return err
	}
	list, err := c.cfg.Client.Sessions(r.Context(), true)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	d := sessionsData{Own: s.ID}
	for _, cs := range list {
		row := sessionRow{ConsoleSession: cs, Short: cs.Short(), State: "active"}
		switch {
		case !cs.EndedAt.IsZero():
			row.State = cs.EndReason
		case !now.Before(cs.ExpiresAt):
			row.State = onceflow.SessionExpired
		case now.Sub(cs.SeenAt) > c.cfg.SessionIdle:
			row.State = onceflow.SessionIdle
		}
		d.Sessions = append(d.Sessions, row)
	}
	c.render(w, r, http.StatusOK, "sessions", d)
	return nil
}

// sessionEnd is POST /ui/sessions/{sid}/end: the session ends in every process at once,
// and the audit trail records who ended whose session (console.session_ended).
func (c *Console) sessionEnd(w http.ResponseWriter, r *http.Request) error {
	s := sessionFrom(r)
	if err := onlyAdmin(s); err != nil {
		return err
	}
	id := r.PathValue("sid")
	ended, err := c.cfg.Client.SessionEnd(r.Context(), onceflow.SessionEndRequest{ID: id, By: s.Actor(), Reason: onceflow.SessionEndedBy})
	if errors.Is(err, onceflow.ErrNotFound) {
		return &pageError{Status: http.StatusNotFound, Title: "Session not found", Detail: "no session has this ID; nothing was changed"}
	}
	if err != nil {
		return err
	}
	done := fmt.Sprintf("Ended session %s: its cookie is refused from now on, in every process.", onceflow.ShortSession(id))
	if !ended {
		done = fmt.Sprintf("Session %s had already ended; nothing changed.", onceflow.ShortSession(id))
	}
	c.log.Info("console session ended", "session", onceflow.ShortSession(id), "actor", s.Actor(), "changed", ended)
	http.Redirect(w, r, c.cfg.Prefix+"/sessions?done="+url.QueryEscape(done), http.StatusSeeOther)
	return nil
}
