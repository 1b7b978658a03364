package onceflowhttp

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// auditView is an audit event as the API shows it, with the sentence that explains it.
type auditView = apiv1.AuditEntry

// audit is GET /v1/audit?entity=&run=&key=&workflow=&actor=&type=&since=&until=&limit=&after=&before=&order=:
// events in commit order (newest first with order=newest), each explained, masked by the
// client's policy.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	aq := onceflow.AuditQuery{Entity: q.Get("entity"), EffectKey: q.Get("key"), Workflow: q.Get("workflow"), Actor: q.Get("actor"), Limit: 100}
	var err error
	if aq.RunID, err = positive(q.Get("run"), "run"); err != nil {
		return err
	}
	if aq.AfterID, err = positive(q.Get("after"), "after"); err != nil {
		return err
	}
	if aq.BeforeID, err = positive(q.Get("before"), "before"); err != nil {
		return err
	}
	for name, v := range map[string]string{"workflow": aq.Workflow, "actor": aq.Actor} {
		if len(v) > 255 {
			return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", name+" must be at most 255 bytes")
		}
	}
	if aq.Types, err = eventTypes(q.Get("type")); err != nil {
		return err
	}
	switch q.Get("order") {
	case "", "oldest":
	case "newest":
		aq.Newest = true
	default:
		return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "order must be oldest (the default) or newest")
	}
	for name, dst := range map[string]*time.Time{"since": &aq.Since, "until": &aq.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", name+" must be an RFC 3339 time such as 2026-03-01T09:00:00Z")
			}
			*dst = t
		}
	}
	if !aq.Since.IsZero() && !aq.Until.IsZero() && !aq.Until.After(aq.Since) {
		return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "until must be after since")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "limit must be between 1 and 1000")
		}
		aq.Limit = n
	}
	entries, err := s.cfg.Client.Audit(r.Context(), aq)
	if err != nil {
		return err
	}
	out := struct {
		Events     []auditView `json:"events"`
		NextAfter  int64       `json:"next_after,omitempty"`
		NextBefore int64       `json:"next_before,omitempty"`
	}{Events: []auditView{}}
	for _, e := range entries {
		out.Events = append(out.Events, apiv1.NewAuditEntry(e))
	}
	if len(entries) == aq.Limit {
		if last := entries[len(entries)-1].ID; aq.Newest {
			out.NextBefore = last
		} else {
			out.NextAfter = last
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// eventTypes reads the type parameter of an audit query: types such as run.cancelled
// separated by commas; nil when none is given.
func eventTypes(v string) ([]onceflow.EventType, error) {
	var types []onceflow.EventType
	for t := range strings.SplitSeq(v, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !eventType.MatchString(t) {
			return nil, newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter",
				fmt.Sprintf("type %q is not an event type such as run.cancelled or review.retried", clip(t)))
		}
		types = append(types, onceflow.EventType(t))
	}
	if len(types) > 50 {
		return nil, newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "at most 50 types")
	}
	return types, nil
}

// eventType is the form of an audit event's type: lower-case words joined by dots.
var eventType = regexp.MustCompile(`^[a-z][a-z_]*(\.[a-z][a-z_]*)+$`)

// keyReport is GET /v1/keys/{key}: whether the effect happened, when, by which run and
// step, with which result, and the key's events. A key never seen is state free.
func (s *Server) keyReport(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if err := onceflow.ValidateKey("effect key", key); err != nil {
		return newProblem(http.StatusBadRequest, "invalid-key", "Invalid effect key", err.Error())
	}
	rep, err := s.cfg.Client.Key(r.Context(), key)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, apiv1.NewKey(rep, itemLink))
}
