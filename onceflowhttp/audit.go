package onceflowhttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// auditView is an audit event as the API shows it, with the sentence that explains it.
type auditView = apiv1.AuditEntry

// audit is GET /v1/audit?entity=&run=&key=&since=&until=&limit=&after=: events in commit
// order, each explained, masked by the client's policy.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	aq := onceflow.AuditQuery{Entity: q.Get("entity"), EffectKey: q.Get("key"), Limit: 100}
	var err error
	if aq.RunID, err = positive(q.Get("run"), "run"); err != nil {
		return err
	}
	if aq.AfterID, err = positive(q.Get("after"), "after"); err != nil {
		return err
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
		Events    []auditView `json:"events"`
		NextAfter int64       `json:"next_after,omitempty"`
	}{Events: []auditView{}}
	for _, e := range entries {
		out.Events = append(out.Events, apiv1.NewAuditEntry(e))
	}
	if len(entries) == aq.Limit {
		out.NextAfter = entries[len(entries)-1].ID
	}
	return writeJSON(w, http.StatusOK, out)
}

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
