package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// auditView is an audit event as the API shows it, with the sentence that explains it.
type auditView struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Type      string          `json:"type"`
	RunID     int64           `json:"run_id,omitempty"`
	Workflow  string          `json:"workflow,omitempty"`
	Entity    string          `json:"entity,omitempty"`
	Step      string          `json:"step,omitempty"`
	EffectKey string          `json:"effect_key,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	Actor     string          `json:"actor"`
	Reason    string          `json:"reason,omitempty"`
	Why       string          `json:"why"`
	Detail    json.RawMessage `json:"detail"`
}

func viewAudit(e *onceflow.AuditEntry, m *redact.Masker) auditView {
	d := e.Detail
	if len(d) == 0 {
		d = json.RawMessage(`{}`)
	}
	return auditView{ID: e.ID, At: e.At, Type: e.Type, RunID: e.RunID, Workflow: e.Workflow, Entity: e.Entity, Step: e.StepName,
		EffectKey: e.EffectKey, Attempt: e.Attempt, Actor: e.Actor, Reason: e.Reason, Why: m.Text(e.Why), Detail: m.JSON(d)}
}

// maskers caches one masker per run for an answer about many runs.
type maskers struct {
	s    *Server
	r    *http.Request
	runs map[int64]*redact.Masker
}

func (m *maskers) of(runID int64, workflow string) *redact.Masker {
	if mk, ok := m.runs[runID]; ok {
		return mk
	}
	mk := m.s.runMasker(m.r, runID, workflow)
	m.runs[runID] = mk
	return mk
}

// audit is GET /v1/audit?entity=&run=&key=&since=&until=&limit=&after=: events in commit
// order, each explained.
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
	ms := &maskers{s: s, r: r, runs: map[int64]*redact.Masker{}}
	for _, e := range entries {
		out.Events = append(out.Events, viewAudit(e, ms.of(e.RunID, e.Workflow)))
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
	type effectView struct {
		State       store.EffectState `json:"state"`
		RunID       int64             `json:"run_id"`
		Workflow    string            `json:"workflow"`
		Step        string            `json:"step"`
		Result      json.RawMessage   `json:"result,omitempty"`
		CreatedAt   time.Time         `json:"created_at"`
		CompletedAt *time.Time        `json:"completed_at,omitempty"`
	}
	type useView struct {
		RunID    int64  `json:"run_id"`
		Workflow string `json:"workflow"`
		Entity   string `json:"entity,omitempty"`
		Step     string `json:"step"`
		Last     string `json:"last_event"`
		Link     string `json:"link"`
	}
	out := struct {
		Key    string      `json:"key"`
		State  string      `json:"state"`
		Effect *effectView `json:"effect,omitempty"`
		Uses   []useView   `json:"uses"`
		Events []auditView `json:"events"`
	}{Key: rep.Key, State: rep.State, Uses: []useView{}, Events: []auditView{}}
	ms := &maskers{s: s, r: r, runs: map[int64]*redact.Masker{}}
	if e := rep.Effect; e != nil {
		ev := &effectView{State: e.State, RunID: e.RunID, Workflow: e.Workflow, Step: e.StepName, CreatedAt: e.CreatedAt}
		if len(e.Result) > 0 {
			ev.Result = ms.of(e.RunID, e.Workflow).JSON(e.Result)
		}
		if !e.CompletedAt.IsZero() {
			t := e.CompletedAt
			ev.CompletedAt = &t
		}
		out.Effect = ev
	}
	for _, u := range rep.Uses {
		out.Uses = append(out.Uses, useView{RunID: u.RunID, Workflow: u.Workflow, Entity: u.Entity, Step: u.Step, Last: u.Last, Link: itemLink(u.RunID, u.Step)})
	}
	for _, e := range rep.Events {
		out.Events = append(out.Events, viewAudit(e, ms.of(e.RunID, e.Workflow)))
	}
	return writeJSON(w, http.StatusOK, out)
}
