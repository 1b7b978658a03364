package onceflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

// BulkAction is the action ReviewBulk applies to every item of a filter.
type BulkAction string

// Bulk actions.
const (
	BulkRetry   BulkAction = "retry"
	BulkResolve BulkAction = "resolve"
	BulkAbandon BulkAction = "abandon"
	BulkReplay  BulkAction = "replay"
)

// BulkRequest applies one action to every review item Filter selects.
type BulkRequest struct {
	Filter ReviewFilter
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

// BulkItem is the outcome for one item of a bulk action.
type BulkItem struct {
	RunID  int64
	Step   string
	Reason Reason
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
// Filter.Limit is 0), each in its own transaction, and reports per item: one refusal
// does not stop the others. A replay acts on a run once, for its first item; the run's
// other items report SameRunAs. It returns an error only when the items cannot be listed.
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
	var out []*BulkItem
	replayed := map[int64]string{} // run → the item that replayed it
	ms := c.masked().maskers(ctx)  // for the errors of refused items
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
			out = append(out, c.bulkOne(ctx, req, it, replayed, ms))
		}
		if len(items) < page.Limit || (want > 0 && len(out) >= want) || ctx.Err() != nil {
			return out, ctx.Err()
		}
		f.AfterStepID = items[len(items)-1].StepID
	}
}

// bulkOne applies req to one item; the error of a refusal is masked with the secrets and
// the personal data of the item's run (from ms).
func (c *Client) bulkOne(ctx context.Context, req BulkRequest, it *store.ReviewItem, replayed map[int64]string, ms *maskers) *BulkItem {
	bi := &BulkItem{RunID: it.RunID, Step: it.StepName, Reason: it.Reason}
	a := ReviewAction{RunID: it.RunID, Step: it.StepName, Actor: req.Actor, Note: req.Note,
		SendAgain: req.SendAgain, ItHappened: req.ItHappened, Output: req.Output}
	var res *ReviewResult
	var err error
	switch req.Action {
	case BulkReplay:
		if first, ok := replayed[it.RunID]; ok {
			bi.OK, bi.SameRunAs = true, first
			return bi
		}
		rr := ReplayRequest{RunID: it.RunID, Step: it.StepName, MergePatch: req.MergePatch, Actor: req.Actor, Note: req.Note}
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
