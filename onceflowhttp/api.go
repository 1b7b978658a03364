package onceflowhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// createdRun is the answer to a start: only what never changes, so that a replay is the
// first answer, byte for byte.
type createdRun struct {
	ID        int64     `json:"id"`
	Workflow  string    `json:"workflow"`
	RunKey    string    `json:"run_key"`
	Entity    string    `json:"entity,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Links     links     `json:"links"`
}

type links struct {
	Self string `json:"self"`
}

func runLink(id int64) string { return "/v1/runs/" + strconv.FormatInt(id, 10) }

// startRun is POST /v1/workflows/{name}/runs.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	by := caller(r)
	// Before the body is read: who may start what is the client's rule, and a refusal
	// depends on nothing the request sends but its token.
	if err := s.cfg.Client.MayStart(by, name); err != nil {
		return s.startRefused(r, name, err)
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if err := s.checkBody(body); err != nil {
		return err
	}
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) > 1 {
		// Proxies and clients disagree on which of several to keep: refuse rather than
		// pick one.
		return newProblem(http.StatusBadRequest, "invalid-idempotency-key", "Invalid Idempotency-Key",
			fmt.Sprintf("the request has %d Idempotency-Key headers; send exactly one", len(keys)))
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		key, err = s.cfg.Client.DeriveRunKey(name, body)
		switch {
		case errors.Is(err, onceflow.ErrNoRunKey), errors.Is(err, onceflow.ErrWorkflowNotFound):
			return newProblem(http.StatusBadRequest, "idempotency-key-missing", "Idempotency-Key required",
				"send an Idempotency-Key header naming this business event (for example the form submission id)")
		case err != nil:
			return newProblem(http.StatusBadRequest, "idempotency-key-missing", "Idempotency-Key required",
				fmt.Sprintf("no Idempotency-Key header, and the run key could not be derived from the body: %v", err))
		}
	}
	if err := onceflow.ValidateKey("Idempotency-Key", key); err != nil {
		return newProblem(http.StatusBadRequest, "invalid-idempotency-key", "Invalid Idempotency-Key", err.Error())
	}
	if !s.claimKey(name, key) {
		p := newProblem(http.StatusConflict, "idempotency-key-in-use", "Request in progress",
			"a request with this Idempotency-Key is still being processed; retry after it has completed")
		p.RetryAfter = 1
		return p
	}
	defer s.releaseKey(name, key)

	run, err := s.cfg.Client.StartFrom(r.Context(), by, name, key, json.RawMessage(body))
	if errors.Is(err, onceflow.ErrWorkflowNotFound) || errors.Is(err, onceflow.ErrStartRefused) {
		return s.startRefused(r, name, err) // the definitions were replaced meanwhile
	}
	if err != nil {
		return startProblem(err)
	}
	if run.Duplicate {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Location", runLink(run.ID))
	return writeJSON(w, http.StatusCreated, createdRun{ID: run.ID, Workflow: run.Workflow, RunKey: run.RunKey,
		Entity: run.Entity, CreatedAt: run.CreatedAt.UTC(), Links: links{Self: runLink(run.ID)}})
}

// startProblem maps Start's errors to answers.
func startProblem(err error) error {
	var ce *onceflow.RunConflictError
	switch {
	case errors.Is(err, onceflow.ErrWorkflowNotFound):
		return newProblem(http.StatusNotFound, "workflow-not-found", "Workflow not found", err.Error())
	case errors.As(err, &ce):
		p := newProblem(http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency-Key reused with a different body",
			"this key already started a run with a different body; use a new key for a new business event")
		p.Extra = map[string]any{"run_id": ce.RunID}
		return p
	case errors.Is(err, onceflow.ErrInvalidInput):
		p := newProblem(http.StatusUnprocessableEntity, "invalid-input", "Invalid input", err.Error())
		var ie *onceflow.InputError
		if errors.As(err, &ie) && ie.Field != "" {
			p.Extra = map[string]any{"field": ie.Field}
		}
		return p
	case errors.Is(err, onceflow.ErrInvalidKey):
		return newProblem(http.StatusBadRequest, "invalid-idempotency-key", "Invalid key", err.Error())
	}
	return err
}

// runView is a run with its steps and attempts.
type runView struct {
	ID        int64           `json:"id"`
	Workflow  string          `json:"workflow"`
	RunKey    string          `json:"run_key"`
	Entity    string          `json:"entity,omitempty"`
	State     onceflow.State  `json:"state"`
	Input     json.RawMessage `json:"input,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Steps     []stepView      `json:"steps,omitempty"`
	// WaitingUntil is when a run that only waits for a delayed step goes on.
	WaitingUntil *time.Time `json:"waiting_until,omitempty"`
	Links        links      `json:"links"`
}

type stepView struct {
	Name      string          `json:"name"`
	State     onceflow.State  `json:"state"`
	EffectKey string          `json:"effect_key,omitempty"`
	Needs     []string        `json:"needs,omitempty"`
	Attempt   int             `json:"attempts"`
	Reason    string          `json:"reason,omitempty"`
	LastError string          `json:"last_error,omitempty"`
	NextAt    *time.Time      `json:"next_at,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Tries     []apiv1.Attempt `json:"attempt_log,omitempty"`
}

func viewRun(r *onceflow.Run) runView {
	return runView{ID: r.ID, Workflow: r.Workflow, RunKey: r.RunKey, Entity: r.Entity, State: r.State,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Links: links{Self: runLink(r.ID)}}
}

// getRun is GET /v1/runs/{id}: the run, its steps with their effect keys, and attempts,
// masked by the client's policy.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return newProblem(http.StatusBadRequest, "invalid-id", "Invalid run ID", "a run ID is a positive integer")
	}
	d, err := s.cfg.Client.RunGet(r.Context(), id)
	if errors.Is(err, onceflow.ErrNotFound) {
		return newProblem(http.StatusNotFound, "run-not-found", "Run not found", fmt.Sprintf("run %d does not exist", id))
	}
	if err != nil {
		return err
	}
	v := viewRun(d.Run)
	v.Input = d.Run.Input
	for _, st := range d.Steps {
		sv := stepView{Name: st.Name, State: st.State, EffectKey: st.EffectKey, Needs: st.Needs, Attempt: st.Attempt,
			Reason: string(st.Reason), LastError: st.LastError, Output: st.Output}
		if st.State == onceflow.StateRetrying || (st.State == onceflow.StatePending && !st.NextAt.IsZero()) {
			t := st.NextAt
			sv.NextAt = &t
		}
		for _, a := range d.Attempts {
			if a.StepID == st.ID {
				sv.Tries = append(sv.Tries, apiv1.NewAttempt(a))
			}
		}
		v.Steps = append(v.Steps, sv)
	}
	if due := d.WaitingUntil; !due.IsZero() {
		v.WaitingUntil = &due
	}
	return writeJSON(w, http.StatusOK, v)
}

// listRuns is GET /v1/runs?workflow=&state=&entity=&key=&limit=&before=.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := onceflow.RunFilter{Workflow: q.Get("workflow"), Entity: q.Get("entity"), RunKey: q.Get("key"), Limit: 50}
	if st := q.Get("state"); st != "" {
		if !onceflow.State(st).Valid() {
			return newProblem(http.StatusBadRequest, "invalid-state", "Invalid state", fmt.Sprintf("state %q is not one of %v", st, onceflow.States()))
		}
		p.State = onceflow.State(st)
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "before must be a positive integer")
		}
		p.BeforeID = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 500 {
			return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "limit must be between 1 and 500")
		}
		p.Limit = n
	}
	runs, err := s.cfg.Client.RunList(r.Context(), p)
	if err != nil {
		return err
	}
	out := struct {
		Runs       []runView `json:"runs"`
		NextBefore int64     `json:"next_before,omitempty"`
	}{Runs: []runView{}}
	for _, run := range runs {
		out.Runs = append(out.Runs, viewRun(run))
	}
	if len(runs) == p.Limit {
		out.NextBefore = runs[len(runs)-1].ID
	}
	return writeJSON(w, http.StatusOK, out)
}
