package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

// BulkAction is the action ReviewBulk applies to every item of a filter, or to the items
// of a preview.
type BulkAction string

// Bulk actions.
const (
	BulkRetry   BulkAction = "retry"
	BulkResolve BulkAction = "resolve"
	BulkAbandon BulkAction = "abandon"
	BulkReplay  BulkAction = "replay"
)

// BulkRequest applies one action to every review item Filter selects, or to exactly the
// items Items names.
//
// A preview and its confirmation are two requests: the preview (DryRun) selects items
// with Filter and reports each with its Version (and, for a replay, the digest of its
// run's plan); the confirmation names those items in Items, with what the preview said
// of each, and acts on them and only on them. An item that changed since its preview is
// refused with ErrItemChanged (a replay whose plan changed, with ErrPlanChanged), and an
// item that entered the queue since is not touched, for no filter is evaluated again.
// Filter without DryRun acts at once on what the filter selects now: a one-shot without
// preview.
type BulkRequest struct {
	Filter ReviewFilter
	// Items, when set, names the items to act on, as a preview reported them; Filter is
	// then empty but for its Workflow, which, when set, limits the items to that workflow
	// (an item of another is refused).
	Items  []BulkTarget
	Action BulkAction
	// Actor (required) and Note go into each item's audit event.
	Actor string
	Note  string
	// SendAgain, ItHappened and Output are as in ReviewAction; MergePatch corrects the
	// input of each replayed run (validated per run).
	SendAgain  bool
	ItHappened bool
	Output     any
	MergePatch json.RawMessage
	// DryRun acts on nothing: a replay is previewed, and other actions report whether
	// they would be refused.
	DryRun bool
}

// BulkTarget names one item of a confirmation as its preview reported it.
type BulkTarget struct {
	RunID int64
	Step  string
	// Version is the item's version in the preview (BulkItem.Version); required.
	Version string
	// PlanDigest is, for a replay, the digest of the plan of the item's run in the preview
	// (BulkItem.Plan.Digest); a replay is refused with ErrPlanChanged when the plan it
	// would carry out is another. Optional: without it only the item's version is checked.
	PlanDigest string
}

// BulkItem is the outcome for one item of a bulk action.
type BulkItem struct {
	RunID  int64
	Step   string
	Reason Reason
	// Version is the item's version when it was read (ReviewItem.Version): what a
	// confirmation of a preview names in BulkTarget.Version.
	Version string
	// OK is set when the action was applied (or, for a dry run, would be).
	OK bool
	// Err is why it was refused or failed; nothing was written for the item. Its text is
	// masked with the secrets and the personal data of the item's run.
	Err error
	// RunState is the run's state after the action.
	RunState State
	// Plan is, for a replay, the plan of the item's run.
	Plan *ReplayPlan
	// SameRunAs names the item whose action already replayed this item's run.
	SameRunAs string
}

// ReviewBulk applies req.Action to every review item req.Filter selects (all of them when
// Filter.Limit is 0), or to the items req.Items names, each in its own transaction, and
// reports per item: one refusal does not stop the others. A replay acts on a run once,
// for its first item; the run's other items report SameRunAs. It returns an error only
// when the request is invalid (nothing is then done) or the items cannot be listed.
func (c *Client) ReviewBulk(ctx context.Context, req BulkRequest) ([]*BulkItem, error) {
	switch req.Action {
	case BulkRetry, BulkResolve, BulkAbandon, BulkReplay:
	default:
		return nil, &ReviewError{Action: string(req.Action), Err: ErrInvalidReview,
			Problem: fmt.Sprintf("bulk action %q is not retry, resolve, abandon or replay", req.Action)}
	}
	if req.Actor == "" {
		return nil, &ReviewError{Action: string(req.Action), Err: ErrInvalidReview, Problem: "the actor is required: name who decides, for the audit trail"}
	}
	replayed := map[int64]string{} // run → the item that replayed it
	ms := c.masked().maskers(ctx)  // for the errors of refused items
	if req.Items != nil {
		return c.bulkItems(ctx, req, replayed, ms)
	}
	var out []*BulkItem
	f := req.Filter
	want := f.Limit
	for {
		page := f
		page.Limit = 100
		if want > 0 {
			page.Limit = min(100, want-len(out))
		}
		items, err := c.store.ReviewList(ctx, c.listParams(ctx, page))
		if err != nil {
			return out, fmt.Errorf("onceflow: review list: %w", err)
		}
		for _, it := range items {
			out = append(out, c.bulkOne(ctx, req, it, nil, replayed, ms))
		}
		if len(items) < page.Limit || (want > 0 && len(out) >= want) || ctx.Err() != nil {
			return out, ctx.Err()
		}
		f.AfterStepID = items[len(items)-1].StepID
	}
}

// bulkItems applies req to exactly the items req.Items names, as a preview reported them.
func (c *Client) bulkItems(ctx context.Context, req BulkRequest, replayed map[int64]string, ms *maskers) ([]*BulkItem, error) {
	invalid := func(problem string) error {
		return &ReviewError{Action: string(req.Action), Err: ErrInvalidReview, Problem: problem}
	}
	if req.Filter != (ReviewFilter{Workflow: req.Filter.Workflow}) {
		return nil, invalid("give either a filter or the items of a preview, not both (with the items, a filter may name only the workflow they must belong to)")
	}
	if len(req.Items) == 0 {
		return nil, invalid("name the items to act on: the items of a preview, each with its version")
	}
	seen := map[BulkTarget]bool{}
	for _, t := range req.Items {
		if t.RunID <= 0 || t.Step == "" || t.Version == "" {
			return nil, invalid("each item names its run, its step and the version its preview reported; nothing was done")
		}
		k := BulkTarget{RunID: t.RunID, Step: t.Step}
		if seen[k] {
			return nil, invalid(fmt.Sprintf("run %d step %q is named twice; nothing was done", t.RunID, t.Step))
		}
		seen[k] = true
	}
	out := make([]*BulkItem, 0, len(req.Items))
	for _, t := range req.Items {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		it, err := c.store.ReviewGetByStep(ctx, t.RunID, t.Step)
		if err != nil {
			bi := &BulkItem{RunID: t.RunID, Step: t.Step}
			bi.Err = ms.of(t.RunID, "").Error(&ReviewError{Action: string(req.Action), RunID: t.RunID, Step: t.Step, Err: err,
				Problem: fmt.Sprintf("run %d has no step %q", t.RunID, t.Step), Hint: hintNotFound})
			if !errors.Is(err, store.ErrNotFound) {
				bi.Err = ms.of(t.RunID, "").Error(reviewError(string(req.Action), t.RunID, t.Step, err))
			}
			out = append(out, bi)
			continue
		}
		if req.Filter.Workflow != "" && it.Workflow != req.Filter.Workflow {
			bi := &BulkItem{RunID: t.RunID, Step: t.Step, Reason: it.Reason, Version: it.Version()}
			bi.Err = &ReviewError{Action: string(req.Action), RunID: t.RunID, Step: t.Step, Err: ErrInvalidReview,
				Problem: fmt.Sprintf("the item belongs to workflow %q, not to %q, which the request is limited to", it.Workflow, req.Filter.Workflow)}
			out = append(out, bi)
			continue
		}
		out = append(out, c.bulkOne(ctx, req, it, &t, replayed, ms))
	}
	return out, nil
}

// bulkOne applies req to one item, as target (nil for an item of a filter) names it; the
// error of a refusal is masked with the secrets and the personal data of the item's run
// (from ms).
func (c *Client) bulkOne(ctx context.Context, req BulkRequest, it *store.ReviewItem, target *BulkTarget, replayed map[int64]string, ms *maskers) *BulkItem {
	bi := &BulkItem{RunID: it.RunID, Step: it.StepName, Reason: it.Reason, Version: it.Version()}
	a := ReviewAction{RunID: it.RunID, Step: it.StepName, Actor: req.Actor, Note: req.Note,
		SendAgain: req.SendAgain, ItHappened: req.ItHappened, Output: req.Output}
	var res *ReviewResult
	var err error
	if target != nil {
		a.Version = target.Version
		if it.State == store.StateNeedsReview && it.Version() != target.Version {
			bi.Err = ms.of(it.RunID, it.Workflow).Error(changed(string(req.Action), it))
			return bi
		}
	}
	switch req.Action {
	case BulkReplay:
		if first, ok := replayed[it.RunID]; ok {
			bi.OK, bi.SameRunAs = true, first
			return bi
		}
		rr := ReplayRequest{RunID: it.RunID, Step: it.StepName, MergePatch: req.MergePatch, Actor: req.Actor, Note: req.Note, Version: a.Version}
		if target != nil {
			rr.PlanDigest = target.PlanDigest
		}
		if req.DryRun {
			bi.Plan, err = c.reviewPreview(ctx, rr)
		} else {
			var r *ReplayResult
			if r, err = c.reviewReplay(ctx, rr); err == nil {
				bi.Plan, bi.RunState = r.Plan, r.RunState
			}
		}
		if err == nil {
			replayed[it.RunID] = it.StepName
		}
	case BulkRetry, BulkResolve, BulkAbandon:
		if req.DryRun {
			err = c.bulkCheck(ctx, req.Action, a)
			break
		}
		switch req.Action {
		case BulkRetry:
			res, err = c.reviewRetry(ctx, a)
		case BulkResolve:
			res, err = c.reviewResolve(ctx, a)
		default:
			res, err = c.reviewAbandon(ctx, a)
		}
		if err == nil {
			bi.RunState = res.RunState
		}
	}
	bi.OK = err == nil
	if err != nil {
		bi.Err = ms.of(it.RunID, it.Workflow).Error(err)
	}
	return bi
}

// bulkCheck reports whether a dry-run action would be refused.
func (c *Client) bulkCheck(ctx context.Context, action BulkAction, a ReviewAction) error {
	it, err := c.reviewTarget(ctx, string(action), a)
	if err != nil {
		return err
	}
	switch {
	case action == BulkRetry && it.EffectMayExist() && !a.SendAgain,
		action == BulkResolve && it.EffectMayExist() && !a.ItHappened,
		action == BulkAbandon && it.EffectMayExist():
		return mayExist(string(action), it)
	}
	return nil
}
