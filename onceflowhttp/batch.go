package onceflowhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/onceflow/onceflow"
)

// Limits of POST /v1/workflows/{name}/runs:batch, when Options leaves them zero.
const (
	// DefaultMaxBatchItems is the most items one batch request may hold.
	DefaultMaxBatchItems = 1000
	// DefaultMaxBatchBody is the largest body of a batch request, in bytes.
	DefaultMaxBatchBody = 16 << 20
)

// batchItem is one item of a batch request.
type batchItem struct {
	// IdempotencyKey names the item's business event, as the Idempotency-Key header of a
	// single start does; without it the workflow's run_key template derives it from Input.
	IdempotencyKey *string         `json:"idempotency_key"`
	Input          json.RawMessage `json:"input"`
}

// batchResult is the answer for one item: the run (created, duplicate) or the problem
// (conflict, invalid).
type batchResult struct {
	Index   int                  `json:"index"`
	Status  onceflow.StartStatus `json:"status"`
	Run     *createdRun          `json:"run,omitempty"`
	Problem map[string]any       `json:"problem,omitempty"`
}

// batchCounts counts the items by status.
type batchCounts struct {
	Created   int `json:"created"`
	Duplicate int `json:"duplicate"`
	Conflict  int `json:"conflict"`
	Invalid   int `json:"invalid"`
}

// startBatch is POST /v1/workflows/{name}/runs:batch: one run per item, each with its own
// key and its own answer, all in one 200 that is sent once every created item is durably
// stored. What a single start answers with a status, an item answers in its result: a
// repeated key with the same input is a duplicate (the first run, as a replay), with
// another input a conflict (the problem of a 422, with run_id), a bad key or input invalid
// (the problem of a 400 or 422). An item never fails the others. The request as a whole is
// refused, and nothing is written, when the token may not start the workflow, the body is
// not a JSON object {"items": [...]} (or is malformed, nests too deeply or repeats a
// member anywhere), holds no items or more than MaxBatchItems, is larger than
// MaxBatchBody, or comes with an Idempotency-Key header (keys go in the items).
func (s *Server) startBatch(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	by := caller(r)
	if err := s.cfg.Client.MayStart(by, name); err != nil {
		return s.startRefused(r, name, err)
	}
	if len(r.Header.Values("Idempotency-Key")) > 0 {
		return newProblem(http.StatusBadRequest, "invalid-idempotency-key", "Idempotency-Key on a batch",
			"a batch takes one key per item (idempotency_key in each item); send no Idempotency-Key header; nothing was started")
	}
	body, err := s.readBodyLimit(w, r, s.cfg.MaxBatchBody)
	if err != nil {
		return err
	}
	// The items' inputs are held three levels down: {"items": [{"input": …}]}.
	if err := checkJSON(body, s.cfg.MaxDepth+3); err != nil {
		return err
	}
	items, err := s.batchItems(body)
	if err != nil {
		return err
	}
	out := struct {
		Results []batchResult `json:"results"`
		Counts  batchCounts   `json:"counts"`
	}{Results: make([]batchResult, len(items))}
	var starts []onceflow.StartItem
	var which []int // the items sent to the client, by index
	for i, it := range items {
		out.Results[i].Index = i
		var key string
		var p *problem
		if int64(len(it.Input)) > s.cfg.MaxBody {
			p = newProblem(http.StatusRequestEntityTooLarge, "body-too-large", "Input too large",
				fmt.Sprintf("the item's input is %d bytes; the limit is %d, as for the body of a single start", len(it.Input), s.cfg.MaxBody))
		} else {
			key, p = s.batchKey(name, it)
		}
		if p != nil {
			out.Results[i].Status, out.Results[i].Problem = onceflow.StartInvalid, s.itemProblem(p)
			continue
		}
		starts, which = append(starts, onceflow.StartItem{RunKey: key, Input: it.Input}), append(which, i)
	}
	if len(starts) > 0 {
		res, err := s.cfg.Client.StartManyFrom(r.Context(), by, name, starts)
		switch {
		case errors.Is(err, onceflow.ErrWorkflowNotFound) || errors.Is(err, onceflow.ErrStartRefused):
			return s.startRefused(r, name, err) // the definitions were replaced meanwhile
		case errors.Is(err, onceflow.ErrTooManyItems):
			return newProblem(http.StatusRequestEntityTooLarge, "too-many-items", "Too many items", err.Error()+"; nothing was started")
		case err != nil:
			return err
		}
		for j, i := range which {
			br := &out.Results[i]
			br.Status = res[j].Status
			if run := res[j].Run; run != nil {
				br.Run = &createdRun{ID: run.ID, Workflow: run.Workflow, RunKey: run.RunKey, Entity: run.Entity,
					CreatedAt: run.CreatedAt.UTC(), Links: links{Self: runLink(run.ID)}}
			}
			if res[j].Err != nil {
				var p *problem
				if !errors.As(startProblem(res[j].Err), &p) {
					return res[j].Err
				}
				br.Problem = s.itemProblem(p)
			}
		}
	}
	for _, br := range out.Results {
		switch br.Status {
		case onceflow.StartCreated:
			out.Counts.Created++
		case onceflow.StartDuplicate:
			out.Counts.Duplicate++
		case onceflow.StartConflict:
			out.Counts.Conflict++
		default:
			out.Counts.Invalid++
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// batchItems reads the items of a batch body, refusing one that is not {"items": [...]}
// with between 1 and MaxBatchItems items of known members.
func (s *Server) batchItems(body []byte) ([]batchItem, error) {
	bad := func(detail string) error {
		return newProblem(http.StatusBadRequest, "invalid-batch", "Invalid batch", detail+`; send {"items": [{"idempotency_key": "…", "input": {…}}, …]}; nothing was started`)
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, bad("the body is not a JSON object")
	}
	var env struct {
		Items []batchItem `json:"items"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, bad(fmt.Sprintf("the body does not read as a batch (%v)", err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("the body holds more than one JSON value")
	}
	switch {
	case len(env.Items) == 0:
		return nil, bad("the batch has no items")
	case len(env.Items) > s.cfg.MaxBatchItems:
		return nil, newProblem(http.StatusRequestEntityTooLarge, "too-many-items", "Too many items",
			fmt.Sprintf("the batch has %d items; at most %d in one request, split it; nothing was started", len(env.Items), s.cfg.MaxBatchItems))
	}
	return env.Items, nil
}

// batchKey returns an item's run key: its idempotency_key, or the one the workflow's
// run_key template derives from its input; or the item's problem.
func (s *Server) batchKey(workflow string, it batchItem) (string, *problem) {
	if len(it.Input) == 0 || string(it.Input) == "null" {
		return "", newProblem(http.StatusUnprocessableEntity, "invalid-input", "Invalid input", "the item has no input; give it an input object")
	}
	var key string
	switch {
	case it.IdempotencyKey != nil:
		key = *it.IdempotencyKey
	default:
		k, err := s.cfg.Client.DeriveRunKey(workflow, it.Input)
		switch {
		case errors.Is(err, onceflow.ErrNoRunKey), errors.Is(err, onceflow.ErrWorkflowNotFound):
			return "", newProblem(http.StatusBadRequest, "idempotency-key-missing", "Idempotency key required",
				"the item has no idempotency_key, and the workflow has no run_key template to derive one from its input")
		case err != nil:
			return "", newProblem(http.StatusBadRequest, "idempotency-key-missing", "Idempotency key required",
				fmt.Sprintf("the item has no idempotency_key, and the run key could not be derived from its input: %v", err))
		}
		key = k
	}
	if err := onceflow.ValidateKey("idempotency_key", key); err != nil {
		return "", newProblem(http.StatusBadRequest, "invalid-idempotency-key", "Invalid idempotency key", err.Error())
	}
	return key, nil
}

// itemProblem is p as an item's problem member, masked as problem documents are.
func (s *Server) itemProblem(p *problem) map[string]any {
	p = s.maskProblem(p)
	out := map[string]any{"type": p.Type, "title": p.Title, "status": p.Status}
	if p.Detail != "" {
		out["detail"] = p.Detail
	}
	for k, v := range p.Extra {
		out[k] = v
	}
	return out
}
