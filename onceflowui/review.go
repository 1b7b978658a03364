package onceflowui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// reviewFilter is the review queue's filter as the form holds it.
type reviewFilter struct {
	Workflow, Step, Reason, Entity, OlderThan string
}

func (f reviewFilter) query() string {
	v := url.Values{}
	for k, x := range map[string]string{"workflow": f.Workflow, "step": f.Step, "reason": f.Reason, "entity": f.Entity, "older_than": f.OlderThan} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v.Encode()
}

func readFilter(get func(string) string) (reviewFilter, onceflow.ReviewFilter, error) {
	f := reviewFilter{Workflow: get("workflow"), Step: strings.TrimSpace(get("step")), Reason: get("reason"),
		Entity: strings.TrimSpace(get("entity")), OlderThan: strings.TrimSpace(get("older_than"))}
	of := onceflow.ReviewFilter{Workflow: f.Workflow, Step: f.Step, Reason: onceflow.Reason(f.Reason), Entity: f.Entity}
	if f.OlderThan != "" {
		d, err := duration.ParsePositive(f.OlderThan)
		if err != nil {
			return f, of, &pageError{Status: http.StatusBadRequest, Title: "Invalid filter", Detail: "older than: " + err.Error()}
		}
		of.OlderThan = d
	}
	return f, of, nil
}

// reviewData is the review queue page.
type reviewData struct {
	Filter    reviewFilter
	Query     string
	Workflows []string
	Reasons   []onceflow.Reason
	Items     []itemRow
	NextAfter int64
	Error     string
	// Live is the query of the list's live region: the filter, and the page it shows.
	Live string
}

func (reviewData) title() string { return "Review queue" }

type itemRow struct {
	It        *onceflow.ReviewItem
	LastError string
	Excerpt   string
	Age       string
}

func (c *Console) review(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	d := reviewData{Workflows: c.cfg.Client.Workflows(), Reasons: onceflow.ReviewReasons(), Live: liveQuery(q)}
	f, of, err := readFilter(q.Get)
	d.Filter, d.Query = f, f.query()
	status := http.StatusOK
	if err != nil {
		d.Error, status = err.(*pageError).Detail, http.StatusBadRequest
	} else {
		of.Limit = 100
		if v := q.Get("after"); v != "" {
			of.AfterStepID, _ = strconv.ParseInt(v, 10, 64)
		}
		items, err := c.cfg.Client.ReviewList(r.Context(), of)
		if err != nil {
			return err
		}
		for _, it := range items {
			d.Items = append(d.Items, itemRow{It: it, LastError: redact.Trim(it.LastError, 160),
				Excerpt: redact.Trim(it.ResponseExcerpt, 160), Age: age(it.Age)})
		}
		if len(items) == of.Limit {
			d.NextAfter = items[len(items)-1].StepID
		}
	}
	c.render(w, r, status, "review", d)
	return nil
}

// itemData is a review item's page.
type itemData struct {
	It        *onceflow.ReviewItem
	LastError string
	Excerpt   string
	Input     string
	Attempts  []attemptRow
	Events    []apiv1.AuditEntry
	RunState  onceflow.State
	// Form holds what the person typed, to show it again after a refusal or a preview.
	Form    itemForm
	Preview *apiv1.Plan
	Error   string
	Live    bool
}

type itemForm struct {
	Note, Patch, Output string
	// PlanDigest is the digest of the replay plan a confirmation was previewed with.
	PlanDigest string
	SendAgain  bool
	ItHappened bool
}

func (d itemData) title() string { return fmt.Sprintf("Review: run %d %s", d.It.RunID, d.It.Step) }

func itemPath(r *http.Request) (int64, string, error) {
	id, err := pathID(r, "run")
	return id, r.PathValue("step"), err
}

// pathItem reads the item the path's {run} and {step} name.
func (c *Console) pathItem(r *http.Request) (*itemData, error) {
	runID, step, err := itemPath(r)
	if err != nil {
		return nil, err
	}
	return c.loadItem(r.Context(), runID, step)
}

// loadItem reads an item's page through the client, masked as the API masks GET
// /v1/review/{run}/{step}.
func (c *Console) loadItem(ctx context.Context, runID int64, step string) (*itemData, error) {
	rd, err := c.cfg.Client.ReviewDetail(ctx, runID, step)
	if err != nil {
		return nil, actionError(err)
	}
	it, run := rd.Item, rd.Run
	d := &itemData{It: it, LastError: it.LastError, Excerpt: it.ResponseExcerpt, Input: pretty(run.Input),
		RunState: run.State, Live: !finished(it.State) || !finished(run.State)}
	for _, a := range rd.Attempts {
		d.Attempts = append(d.Attempts, viewAttempt(a))
	}
	for _, e := range rd.Events {
		d.Events = append(d.Events, apiv1.NewAuditEntry(e))
	}
	return d, nil
}

func (c *Console) item(w http.ResponseWriter, r *http.Request) error {
	d, err := c.pathItem(r)
	if err != nil {
		return err
	}
	d.Form.Patch = "{\n  \n}"
	c.render(w, r, http.StatusOK, "item", d)
	return nil
}

// itemLive is GET /ui/review/{run}/{step}/live: the part of the item's page that changes.
func (c *Console) itemLive(w http.ResponseWriter, r *http.Request) error {
	d, err := c.pathItem(r)
	if err != nil {
		return err
	}
	return c.renderFragment(w, r, "item", "live", d)
}

func readForm(r *http.Request) itemForm {
	return itemForm{Note: strings.TrimSpace(r.PostForm.Get("note")), Patch: r.PostForm.Get("merge_patch"), Output: r.PostForm.Get("output"),
		PlanDigest: strings.TrimSpace(r.PostForm.Get("plan_digest")),
		SendAgain:  r.PostForm.Get("send_again") != "", ItHappened: r.PostForm.Get("it_happened") != ""}
}

// jsonField reads an optional JSON document typed into a form.
func jsonField(name, v string) (json.RawMessage, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	if !json.Valid([]byte(v)) {
		return nil, &pageError{Status: http.StatusUnprocessableEntity, Title: "Invalid JSON", Detail: name + " is not valid JSON; fix it and try again. Nothing was changed."}
	}
	return json.RawMessage(v), nil
}

// refuse shows the item's page again with the error, what was typed and the error's
// status.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, runID int64, step string, f itemForm, err error) error {
	var pe *pageError
	if !errors.As(actionError(err), &pe) {
		return err
	}
	d, lerr := c.loadItem(r.Context(), runID, step)
	if lerr != nil {
		return pe
	}
	d.Form, d.Error = f, pe.Title+": "+pe.Detail // the client masked the error it answered with
	c.render(w, r, pe.Status, "item", d)
	return nil
}

// replayPreview is POST /ui/review/{run}/{step}/preview: the engine's replay plan for the
// correction typed, shown with a button that confirms it. Nothing is changed.
func (c *Console) replayPreview(w http.ResponseWriter, r *http.Request) error {
	runID, step, err := itemPath(r)
	if err != nil {
		return err
	}
	f := readForm(r)
	patch, err := jsonField("The correction", f.Patch)
	if err != nil {
		return c.refuse(w, r, runID, step, f, err)
	}
	plan, err := c.cfg.Client.ReviewPreview(r.Context(), onceflow.ReplayRequest{RunID: runID, Step: step, MergePatch: patch,
		Actor: sessionFrom(r).Actor(), Note: f.Note})
	if err != nil {
		return c.refuse(w, r, runID, step, f, err)
	}
	d, err := c.loadItem(r.Context(), runID, step)
	if err != nil {
		return err
	}
	v := apiv1.NewPlan(plan)
	d.Form, d.Preview = f, &v
	c.render(w, r, http.StatusOK, "item", d)
	return nil
}

// itemAct is POST /ui/review/{run}/{step}/{retry|resolve|abandon|replay}.
func (c *Console) itemAct(w http.ResponseWriter, r *http.Request) error {
	runID, step, err := itemPath(r)
	if err != nil {
		return err
	}
	f := readForm(r)
	ctx := r.Context()
	actor := sessionFrom(r).Actor()
	a := onceflow.ReviewAction{RunID: runID, Step: step, Actor: actor, Note: f.Note, SendAgain: f.SendAgain, ItHappened: f.ItHappened}
	var done bannerCode
	switch action := r.PathValue("action"); action {
	case "retry":
		if _, err = c.cfg.Client.ReviewRetry(ctx, a); err == nil {
			done = doneRetried
		}
	case "resolve":
		var out json.RawMessage
		if out, err = jsonField("The output", f.Output); err == nil {
			if out != nil {
				a.Output = out
			}
			var res *onceflow.ReviewResult
			if res, err = c.cfg.Client.ReviewResolve(ctx, a); err == nil {
				switch res.Ledger { // ReviewResult.Ledger: completed, kept or none
				case "kept":
					done = doneResolvedKept
				case "none":
					done = doneResolvedNoKey
				default:
					done = doneResolved
				}
			}
		}
	case "abandon":
		if !confirmed(r) {
			it, err := c.cfg.Client.ReviewGet(ctx, runID, step)
			if err != nil {
				return c.refuse(w, r, runID, step, f, err)
			}
			if it.State == onceflow.StateNeedsReview && !it.EffectMayExist {
				return c.confirmAbandon(w, r, runID, step, f.Note)
			}
			// Otherwise the abandon is refused, with its reason, and nothing is written.
		}
		if _, err = c.cfg.Client.ReviewAbandon(ctx, a); err == nil {
			done = doneAbandoned
		}
	case "replay":
		// A replay is confirmed from its preview, and carries the digest of the plan shown:
		// the engine refuses it if the plan it would carry out now is another.
		if f.PlanDigest == "" {
			return c.refuse(w, r, runID, step, f, &onceflow.ReviewError{Action: "replay", RunID: runID, Step: step, Err: onceflow.ErrInvalidReview,
				Problem: "a replay is confirmed from its preview", Hint: "preview the replay, then confirm the plan it shows; nothing was changed"})
		}
		var patch json.RawMessage
		if patch, err = jsonField("The correction", f.Patch); err == nil {
			if _, err = c.cfg.Client.ReviewReplay(ctx, onceflow.ReplayRequest{RunID: runID, Step: step, MergePatch: patch, Actor: actor, Note: f.Note,
				PlanDigest: f.PlanDigest}); err == nil {
				done = doneReplayed
			}
		}
	default:
		return &pageError{Status: http.StatusNotFound, Title: "Not found", Detail: fmt.Sprintf("%q is not a review action; use retry, resolve, abandon or replay", action)}
	}
	if err != nil {
		return c.refuse(w, r, runID, step, f, err)
	}
	c.log.Info("console review action", "action", r.PathValue("action"), "run_id", runID, "step", step, "actor", actor)
	http.Redirect(w, r, doneURL(c.cfg.Prefix+"/review/"+strconv.FormatInt(runID, 10)+"/"+url.PathEscape(step), done), http.StatusSeeOther)
	return nil
}

// bulkData is the report of a bulk action, or its preview.
type bulkData struct {
	Filter  reviewFilter
	Action  string
	Form    itemForm
	DryRun  bool
	Items   []bulkRow
	OK      int
	Refused int
	Error   string
}

func (d bulkData) title() string { return "Bulk " + d.Action }

type bulkRow struct {
	It      *onceflow.BulkItem
	Error   string
	Plan    *apiv1.Plan
	ItemURL string
	// Confirm is, for an item the preview would act on, how the confirmation names it
	// (confirmItem).
	Confirm string
}

// confirmItem is how a bulk confirmation's form names an item of its preview: run,
// version, plan digest and step, separated by colons (the step last, as the only part
// that may hold one).
func confirmItem(it *onceflow.BulkItem) string {
	digest := ""
	if it.Plan != nil {
		digest = it.Plan.Digest
	}
	return strconv.FormatInt(it.RunID, 10) + ":" + it.Version + ":" + digest + ":" + it.Step
}

// readItems reads the items a bulk confirmation names.
func readItems(values []string) ([]onceflow.BulkTarget, error) {
	var out []onceflow.BulkTarget
	for _, v := range values {
		parts := strings.SplitN(v, ":", 4)
		var id int64
		var err error
		if len(parts) == 4 {
			id, err = strconv.ParseInt(parts[0], 10, 64)
		}
		if len(parts) != 4 || err != nil || id <= 0 || parts[1] == "" || parts[3] == "" {
			return nil, &pageError{Status: http.StatusBadRequest, Title: "Invalid confirmation",
				Detail: "the confirmation does not name the items of a preview; preview the action again. Nothing was changed."}
		}
		out = append(out, onceflow.BulkTarget{RunID: id, Version: parts[1], PlanDigest: parts[2], Step: parts[3]})
	}
	return out, nil
}

// bulk is POST /ui/review/bulk: with dry_run, the preview of an action on every item the
// filter selects; without, the confirmation, which acts on exactly the items the preview
// showed (its form names each with its version and, for a replay, its plan's digest):
// an item that changed since is refused with its reason, one that appeared since is not
// touched. Each item reports on its own.
func (c *Console) bulk(w http.ResponseWriter, r *http.Request) error {
	f, of, err := readFilter(r.PostForm.Get)
	if err != nil {
		return err
	}
	form := readForm(r)
	d := bulkData{Filter: f, Action: r.PostForm.Get("action"), Form: form, DryRun: r.PostForm.Get("dry_run") != ""}
	req := onceflow.BulkRequest{Action: onceflow.BulkAction(d.Action), Actor: sessionFrom(r).Actor(), Note: form.Note,
		SendAgain: form.SendAgain, ItHappened: form.ItHappened, DryRun: d.DryRun}
	switch req.Action {
	case onceflow.BulkRetry, onceflow.BulkResolve, onceflow.BulkAbandon, onceflow.BulkReplay:
	default:
		return &pageError{Status: http.StatusBadRequest, Title: "Invalid action", Detail: "choose retry, resolve, abandon or replay"}
	}
	if d.DryRun {
		req.Filter = of
	} else {
		// The items are those of a preview of the filter; they must be of its workflow,
		// which is what a person who administers some workflows only was allowed to act on.
		req.Filter = onceflow.ReviewFilter{Workflow: of.Workflow}
		if req.Items, err = readItems(r.PostForm["item"]); err != nil {
			return err
		}
		if len(req.Items) == 0 {
			return &pageError{Status: http.StatusBadRequest, Title: "Preview first",
				Detail: "a bulk action acts on the items of its preview: preview it, then confirm. Nothing was changed."}
		}
	}
	if req.MergePatch, err = jsonField("The correction", form.Patch); err != nil {
		return err
	}
	out, err := jsonField("The output", form.Output)
	if err != nil {
		return err
	}
	if out != nil {
		req.Output = out
	}
	items, err := c.cfg.Client.ReviewBulk(r.Context(), req)
	if err != nil && len(items) == 0 {
		return actionError(err)
	}
	if err != nil {
		d.Error = c.cfg.Client.MaskSecrets(err.Error())
	}
	for _, it := range items {
		row := bulkRow{It: it, ItemURL: c.cfg.Prefix + "/review/" + strconv.FormatInt(it.RunID, 10) + "/" + url.PathEscape(it.Step)}
		if it.Err != nil {
			row.Error = it.Err.Error() // masked by the client
			d.Refused++
		} else {
			d.OK++
			row.Confirm = confirmItem(it)
		}
		if it.Plan != nil {
			p := apiv1.NewPlan(it.Plan)
			row.Plan = &p
		}
		d.Items = append(d.Items, row)
	}
	if !d.DryRun {
		c.log.Info("console bulk action", "action", d.Action, "matched", len(items), "ok", d.OK, "refused", d.Refused, "actor", req.Actor)
	}
	c.render(w, r, http.StatusOK, "bulk", d)
	return nil
}

// actionError maps the errors of the review actions to pages, with the statuses the API
// answers with.
func actionError(err error) error {
	var ie *onceflow.InputError
	p := func(status int, title string) *pageError {
		return &pageError{Status: status, Title: title, Detail: err.Error()}
	}
	switch {
	case errors.As(err, &ie):
		return p(http.StatusUnprocessableEntity, "Invalid corrected input")
	case errors.Is(err, onceflow.ErrInvalidPatch):
		return p(http.StatusUnprocessableEntity, "Invalid merge patch")
	case errors.Is(err, onceflow.ErrInvalidReview):
		return p(http.StatusBadRequest, "Invalid review request")
	case errors.Is(err, onceflow.ErrWorkflowNotFound):
		return p(http.StatusConflict, "Workflow not loaded")
	case errors.Is(err, onceflow.ErrNotFound):
		return p(http.StatusNotFound, "Run or step not found")
	case errors.Is(err, onceflow.ErrNotInReview):
		return p(http.StatusConflict, "Step not in review")
	case errors.Is(err, onceflow.ErrEffectMayExist):
		return p(http.StatusConflict, "Decide whether the effect happened (resolve with “it happened”, or retry with “send again”)")
	case errors.Is(err, onceflow.ErrReviewConflict):
		return p(http.StatusConflict, "The run changed")
	case errors.Is(err, onceflow.ErrNothingToReplay):
		return p(http.StatusConflict, "Nothing to replay")
	case errors.Is(err, onceflow.ErrItemChanged):
		return p(http.StatusConflict, "The item changed since its preview")
	case errors.Is(err, onceflow.ErrPlanChanged):
		return p(http.StatusConflict, "The plan changed since its preview: preview again")
	}
	return err
}
