package onceflowhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// reviewRoutes adds the review queue, its actions, the audit answers and the key reports,
// all with the admin scope:
//
//	GET  /v1/review                          the queue (?workflow=&step=&reason=&entity=&run=&older_than=&limit=&after=)
//	GET  /v1/review/{run}/{step}             one item, with its attempts and events
//	POST /v1/review/{run}/{step}/retry       {note, send_again}
//	POST /v1/review/{run}/{step}/resolve     {note, output, it_happened}
//	POST /v1/review/{run}/{step}/abandon     {note}
//	POST /v1/review/{run}/{step}/replay      {note, merge_patch | input, plan_digest}   ?dry_run=true previews
//	POST /v1/runs/{id}/replay                {note, merge_patch | input, plan_digest}   ?dry_run=true previews
//	POST /v1/review/bulk/{action}?dry_run=true {filter, note, …}            previews, answering each item's version
//	POST /v1/review/bulk/{action}            {items, note, …}              acts on exactly the items of the preview
//	GET  /v1/audit                           ?entity=&run=&key=&workflow=&actor=&type=&since=&until=&limit=&after=&before=&order=
//	GET  /v1/keys/{key}                      the ledger row, uses and events of an effect key
func (s *Server) reviewRoutes() {
	filter := []string{"workflow", "step", "reason", "entity", "run", "older_than", "limit", "after"}
	dry := []string{"dry_run"}
	s.handleFunc("GET /v1/review", ScopeRead, filter, s.reviewList)
	s.handleFunc("GET /v1/review/{run}/{step}", ScopeRead, nil, s.reviewShow)
	s.handleFunc("POST /v1/review/{run}/{step}/{action}", ScopeAdmin, nil, s.reviewAct)
	s.handleFunc("POST /v1/review/{run}/{step}/replay", ScopeAdmin, dry, s.itemReplay)
	s.handleFunc("POST /v1/runs/{id}/replay", ScopeAdmin, dry, s.runReplay)
	s.handleFunc("POST /v1/review/bulk/{action}", ScopeAdmin, dry, s.reviewBulk)
	s.handleFunc("GET /v1/audit", ScopeRead, []string{"entity", "run", "key", "workflow", "actor", "type", "since", "until", "limit", "after", "before", "order"},
		s.audit)
	s.handleFunc("GET /v1/keys/{key...}", ScopeRead, nil, s.keyReport)
}

// reviewItemView is a review item as the API shows it: the command's --json shape, with
// links.
type reviewItemView = apiv1.ReviewItem

type itemLinks = apiv1.ItemLinks

func itemLink(runID int64, step string) string {
	return "/v1/review/" + strconv.FormatInt(runID, 10) + "/" + step
}

func itemLinksOf(runID int64, step string) itemLinks {
	return itemLinks{Self: itemLink(runID, step), Run: runLink(runID)}
}

func viewItem(it *onceflow.ReviewItem) reviewItemView {
	return apiv1.NewReviewItem(it, itemLinksOf)
}

// filterFrom reads a review filter from query parameters.
func filterFrom(q map[string][]string) (onceflow.ReviewFilter, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	f := onceflow.ReviewFilter{Workflow: get("workflow"), Step: get("step"), Reason: onceflow.Reason(get("reason")), Entity: get("entity")}
	var err error
	if f.RunID, err = positive(get("run"), "run"); err != nil {
		return f, err
	}
	if f.AfterStepID, err = positive(get("after"), "after"); err != nil {
		return f, err
	}
	if v := get("older_than"); v != "" {
		if f.OlderThan, err = duration.ParsePositive(v); err != nil {
			return f, newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "older_than: "+err.Error())
		}
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			return f, newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "limit must be between 1 and 1000")
		}
		f.Limit = n
	}
	return f, nil
}

func positive(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", name+" must be a positive integer")
	}
	return n, nil
}

// reviewList is GET /v1/review.
func (s *Server) reviewList(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFrom(r.URL.Query())
	if err != nil {
		return err
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	items, err := s.cfg.Client.ReviewList(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Items     []reviewItemView `json:"items"`
		NextAfter int64            `json:"next_after,omitempty"`
	}{Items: []reviewItemView{}}
	for _, it := range items {
		out.Items = append(out.Items, viewItem(it))
	}
	if len(items) == f.Limit {
		out.NextAfter = items[len(items)-1].StepID
	}
	return writeJSON(w, http.StatusOK, out)
}

// itemPath reads {run} and {step}.
func itemPath(r *http.Request) (int64, string, error) {
	id, err := strconv.ParseInt(r.PathValue("run"), 10, 64)
	if err != nil || id <= 0 {
		return 0, "", newProblem(http.StatusBadRequest, "invalid-id", "Invalid run ID", "a run ID is a positive integer")
	}
	return id, r.PathValue("step"), nil
}

// reviewShow is GET /v1/review/{run}/{step}: the item, its attempts and its events.
func (s *Server) reviewShow(w http.ResponseWriter, r *http.Request) error {
	runID, step, err := itemPath(r)
	if err != nil {
		return err
	}
	d, err := s.cfg.Client.ReviewDetail(r.Context(), runID, step)
	if err != nil {
		return reviewProblem(err)
	}
	out := struct {
		Item     reviewItemView  `json:"item"`
		Attempts []apiv1.Attempt `json:"attempts"`
		Events   []auditView     `json:"events"`
	}{Item: viewItem(d.Item), Attempts: []apiv1.Attempt{}, Events: []auditView{}}
	for _, a := range d.Attempts {
		out.Attempts = append(out.Attempts, apiv1.NewAttempt(a))
	}
	for _, e := range d.Events {
		out.Events = append(out.Events, apiv1.NewAuditEntry(e))
	}
	return writeJSON(w, http.StatusOK, out)
}

// actionBody is the body of the review actions; every member is optional.
type actionBody struct {
	Note       string          `json:"note"`
	SendAgain  bool            `json:"send_again"`
	ItHappened bool            `json:"it_happened"`
	Output     json.RawMessage `json:"output"`
	MergePatch json.RawMessage `json:"merge_patch"`
	Input      json.RawMessage `json:"input"`
	// PlanDigest is, for a replay, the digest of the plan its dry run answered.
	PlanDigest string `json:"plan_digest"`
	// Filter selects the items of a bulk action's dry run; Items names the items of its
	// confirmation, as the dry run answered them.
	Filter *bulkFilter  `json:"filter"`
	Items  []bulkTarget `json:"items"`
}

// bulkTarget is one item of a bulk confirmation: what the dry run answered of it.
type bulkTarget struct {
	RunID      int64  `json:"run_id"`
	Step       string `json:"step"`
	Version    string `json:"version"`
	PlanDigest string `json:"plan_digest"`
}

type bulkFilter struct {
	Workflow  string `json:"workflow"`
	Step      string `json:"step"`
	Reason    string `json:"reason"`
	Entity    string `json:"entity"`
	Run       int64  `json:"run"`
	OlderThan string `json:"older_than"`
	Limit     int    `json:"limit"`
}

// readAction decodes an action body strictly: an unknown member is a 400, so that a typo
// (mergepatch) is not silently ignored.
func (s *Server) readAction(w http.ResponseWriter, r *http.Request) (*actionBody, error) {
	raw, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	var b actionBody
	if len(bytes.TrimSpace(raw)) == 0 {
		return &b, nil
	}
	if err := s.checkBody(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, newProblem(http.StatusBadRequest, "malformed-json", "Malformed request body", "the body must be a JSON object of the documented members: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, newProblem(http.StatusBadRequest, "malformed-json", "Malformed request body", "the body must hold one JSON object")
	}
	return &b, nil
}

func dryRun(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("dry_run"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "dry_run must be true or false")
	}
}

// resultView is the answer to an action on one item.
type resultView struct {
	RunID     int64          `json:"run_id"`
	Step      string         `json:"step"`
	Action    string         `json:"action"`
	StepState onceflow.State `json:"step_state"`
	RunState  onceflow.State `json:"run_state"`
	Ledger    string         `json:"ledger,omitempty"`
	Actor     string         `json:"actor"`
	Links     itemLinks      `json:"links"`
}

// reviewAct is POST /v1/review/{run}/{step}/{retry|resolve|abandon|replay}.
func (s *Server) reviewAct(w http.ResponseWriter, r *http.Request) error {
	runID, step, err := itemPath(r)
	if err != nil {
		return err
	}
	action := r.PathValue("action")
	body, err := s.readAction(w, r)
	if err != nil {
		return err
	}
	a := onceflow.ReviewAction{RunID: runID, Step: step, Actor: actor(r), Note: body.Note, SendAgain: body.SendAgain, ItHappened: body.ItHappened}
	if body.Output != nil {
		a.Output = body.Output
	}
	var res *onceflow.ReviewResult
	switch action {
	case "retry":
		res, err = s.cfg.Client.ReviewRetry(r.Context(), a)
	case "resolve":
		res, err = s.cfg.Client.ReviewResolve(r.Context(), a)
	case "abandon":
		res, err = s.cfg.Client.ReviewAbandon(r.Context(), a)
	default:
		return newProblem(http.StatusNotFound, "not-found", "Not found", fmt.Sprintf("%q is not a review action; use retry, resolve, abandon or replay", clip(action)))
	}
	if err != nil {
		return reviewProblem(err)
	}
	return writeJSON(w, http.StatusOK, resultView{RunID: res.RunID, Step: res.Step, Action: action, StepState: res.StepState, RunState: res.RunState,
		Ledger: res.Ledger, Actor: actor(r), Links: itemLinksOf(res.RunID, res.Step)})
}

// itemReplay is POST /v1/review/{run}/{step}/replay.
func (s *Server) itemReplay(w http.ResponseWriter, r *http.Request) error {
	runID, step, err := itemPath(r)
	if err != nil {
		return err
	}
	return s.replay(w, r, runID, step)
}

// runReplay is POST /v1/runs/{id}/replay.
func (s *Server) runReplay(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return newProblem(http.StatusBadRequest, "invalid-id", "Invalid run ID", "a run ID is a positive integer")
	}
	return s.replay(w, r, id, "")
}

// planView is a replay plan as the API shows it, with a link to its run.
type planView struct {
	apiv1.Plan
	Links map[string]string `json:"links"`
}

func viewPlan(p *onceflow.ReplayPlan) planView {
	return planView{Plan: apiv1.NewPlan(p), Links: map[string]string{"run": runLink(p.RunID)}}
}

// replay previews (?dry_run=true) or performs the replay of a run, for one item if step is
// set.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, runID int64, step string) error {
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	body, err := s.readAction(w, r)
	if err != nil {
		return err
	}
	req := onceflow.ReplayRequest{RunID: runID, Step: step, MergePatch: body.MergePatch, Input: body.Input, Actor: actor(r), Note: body.Note,
		PlanDigest: body.PlanDigest}
	out := struct {
		DryRun   bool           `json:"dry_run"`
		Plan     planView       `json:"plan"`
		Revision int            `json:"revision,omitempty"`
		Reset    []string       `json:"reset,omitempty"`
		RunState onceflow.State `json:"run_state,omitempty"`
		Actor    string         `json:"actor,omitempty"`
	}{DryRun: dry}
	if dry {
		plan, err := s.cfg.Client.ReviewPreview(r.Context(), req)
		if err != nil {
			return reviewProblem(err)
		}
		out.Plan = viewPlan(plan)
		return writeJSON(w, http.StatusOK, out)
	}
	res, err := s.cfg.Client.ReviewReplay(r.Context(), req)
	if err != nil {
		return reviewProblem(err)
	}
	out.Plan = viewPlan(res.Plan)
	out.Revision, out.Reset, out.RunState, out.Actor = res.Revision, res.Reset, res.RunState, actor(r)
	return writeJSON(w, http.StatusOK, out)
}

// reviewBulk is POST /v1/review/bulk/{action}.
func (s *Server) reviewBulk(w http.ResponseWriter, r *http.Request) error {
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	body, err := s.readAction(w, r)
	if err != nil {
		return err
	}
	req := onceflow.BulkRequest{Action: onceflow.BulkAction(r.PathValue("action")), Actor: actor(r), Note: body.Note,
		SendAgain: body.SendAgain, ItHappened: body.ItHappened, MergePatch: body.MergePatch, DryRun: dry}
	switch {
	case body.Filter != nil && body.Items != nil:
		return newProblem(http.StatusBadRequest, "invalid-review-request", "Invalid review request",
			`give either "filter" (a dry run) or "items" (the confirmation of a dry run), not both; nothing was done`)
	case body.Items != nil:
		if len(body.Items) == 0 {
			return newProblem(http.StatusBadRequest, "items-required", "Items required",
				`"items" is empty: name the items of the dry run to act on, each with its run_id, step and version; nothing was done`)
		}
		for _, t := range body.Items {
			req.Items = append(req.Items, onceflow.BulkTarget{RunID: t.RunID, Step: t.Step, Version: t.Version, PlanDigest: t.PlanDigest})
		}
	case !dry:
		return newProblem(http.StatusBadRequest, "items-required", "Items required",
			`a bulk action acts on the items of its dry run: POST with ?dry_run=true and a "filter", then POST the "items" it answered `+
				`(run_id, step, version, and plan_digest for a replay); an item that changed since is refused, one that appeared since is not touched; nothing was done`)
	case body.Filter == nil:
		return newProblem(http.StatusBadRequest, "filter-required", "Filter required",
			`a bulk dry run needs a "filter" object (workflow, step, reason, entity, run, older_than, limit); {} selects every item`)
	default:
		f := onceflow.ReviewFilter{Workflow: body.Filter.Workflow, Step: body.Filter.Step, Reason: onceflow.Reason(body.Filter.Reason), Entity: body.Filter.Entity,
			RunID: body.Filter.Run, Limit: body.Filter.Limit}
		if body.Filter.OlderThan != "" {
			if f.OlderThan, err = duration.ParsePositive(body.Filter.OlderThan); err != nil {
				return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "filter.older_than: "+err.Error())
			}
		}
		req.Filter = f
	}
	if body.Output != nil {
		req.Output = body.Output
	}
	items, err := s.cfg.Client.ReviewBulk(r.Context(), req)
	if err != nil && len(items) == 0 {
		return reviewProblem(err)
	}
	out := apiv1.Bulk[planView]{Action: string(req.Action), DryRun: dry, Matched: len(items), Items: []apiv1.BulkItem[planView]{}}
	if err != nil {
		out.Error = s.cfg.Client.MaskSecrets(err.Error())
	}
	for _, it := range items {
		v := apiv1.NewBulkItem[planView](it)
		if it.Err != nil {
			v.Error = it.Err.Error() // masked by the client
			if p, ok := reviewProblem(it.Err).(*problem); ok {
				v.Problem = p.Type
			}
			out.Refused++
		} else {
			out.OK++
		}
		if it.Plan != nil {
			pv := viewPlan(it.Plan)
			v.Plan = &pv
		}
		out.Items = append(out.Items, v)
	}
	return writeJSON(w, http.StatusOK, out)
}

// reviewProblem maps the errors of the review actions to problem documents.
func reviewProblem(err error) error {
	var ie *onceflow.InputError
	p := func(status int, typ, title string) *problem { return newProblem(status, typ, title, err.Error()) }
	switch {
	case errors.As(err, &ie):
		return p(http.StatusUnprocessableEntity, "invalid-input", "Invalid corrected input")
	case errors.Is(err, onceflow.ErrInvalidPatch):
		return p(http.StatusUnprocessableEntity, "invalid-merge-patch", "Invalid merge patch")
	case errors.Is(err, onceflow.ErrInvalidReview):
		return p(http.StatusBadRequest, "invalid-review-request", "Invalid review request")
	case errors.Is(err, onceflow.ErrWorkflowNotFound):
		return p(http.StatusConflict, "workflow-not-loaded", "Workflow not loaded")
	case errors.Is(err, onceflow.ErrNotFound):
		return p(http.StatusNotFound, "review-item-not-found", "Run or step not found")
	case errors.Is(err, onceflow.ErrNotInReview):
		return p(http.StatusConflict, "not-in-review", "Step not in review")
	case errors.Is(err, onceflow.ErrEffectMayExist):
		pr := p(http.StatusConflict, "outcome-unknown", "Decide whether the effect happened")
		pr.Extra = map[string]any{"choices": []string{"resolve with it_happened: true", "retry with send_again: true"}}
		return pr
	case errors.Is(err, onceflow.ErrReviewConflict):
		return p(http.StatusConflict, "review-conflict", "The run changed")
	case errors.Is(err, onceflow.ErrNothingToReplay):
		return p(http.StatusConflict, "nothing-to-replay", "Nothing to replay")
	case errors.Is(err, onceflow.ErrItemChanged):
		return p(http.StatusConflict, "item-changed", "The item changed since its preview")
	case errors.Is(err, onceflow.ErrPlanChanged):
		return p(http.StatusConflict, "plan-changed", "The plan changed since its preview")
	}
	return err
}
