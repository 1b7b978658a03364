package onceflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// Errors of the review actions; the *ReviewError of every failed action matches one of
// them (or ErrNotFound, ErrInvalidInput) with errors.Is. What an error says is masked with
// the secrets and the personal data of its run.
var (
	// ErrNotInReview: the step is not in needs_review; only a parked step can be acted on.
	ErrNotInReview = store.ErrNotInReview
	// ErrEffectMayExist: the step's effect may have happened (its outcome is unknown), so
	// the action is refused until a person decides: it happened (ReviewResolve with
	// ItHappened) or send it again (ReviewRetry with SendAgain).
	ErrEffectMayExist = store.ErrEffectMayExist
	// ErrReviewConflict: the run changed in a way that forbids the action now; nothing was
	// written.
	ErrReviewConflict = store.ErrReviewConflict
	// ErrNothingToReplay: the run has no step that a replay would run again.
	ErrNothingToReplay = store.ErrNothingToReplay
	// ErrItemChanged: the decision names the version of the item it was taken on
	// (ReviewAction.Version, BulkTarget.Version), and the item has changed since — another
	// attempt, another decision. Nothing was written; look at the item again.
	ErrItemChanged = store.ErrItemChanged
	// ErrPlanChanged: the replay names the digest of the plan it was previewed with
	// (ReplayRequest.PlanDigest), and the plan it would carry out now is another — the
	// correction differs from the previewed one, or the run or the ledger changed. Nothing
	// was written; preview again.
	ErrPlanChanged = errors.New("the replay's plan is not the one previewed")
	// ErrInvalidPatch: a correction's JSON merge patch is not valid.
	ErrInvalidPatch = errors.New("invalid merge patch")
	// ErrInvalidReview: the request itself is incomplete or contradictory (no actor, both
	// a patch and a replacement input, an output that is not JSON).
	ErrInvalidReview = errors.New("invalid review request")
)

// ReviewError is the error of a review action: which action, on which run and step, what
// is wrong and what to do instead. Err is the cause, matching a sentinel with errors.Is.
type ReviewError struct {
	// Action is retry, resolve, abandon, replay or preview.
	Action  string
	RunID   int64
	Step    string
	Problem string
	Hint    string
	Err     error
}

func (e *ReviewError) Error() string {
	var b strings.Builder
	b.WriteString("review " + e.Action)
	switch {
	case e.RunID > 0 && e.Step != "":
		fmt.Fprintf(&b, " of run %d step %q", e.RunID, e.Step)
	case e.RunID > 0:
		fmt.Fprintf(&b, " of run %d", e.RunID)
	}
	b.WriteString(": ")
	if e.Problem != "" {
		b.WriteString(e.Problem)
	} else if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	return b.String()
}

func (e *ReviewError) Unwrap() error { return e.Err }

// Hints of the review errors.
const (
	hintMayExist = "its effect may have happened: decide explicitly — it happened (resolve with it-happened: the key is recorded completed) " +
		"or send it again (retry with send-again: the same effect key is sent, for the destination to deduplicate)"
	hintNotFound = "list the review queue to find the run and step"
	hintConflict = "nothing was changed; look at the run again and repeat the action"
	hintChanged  = "nothing was changed; look at the item again, and decide on what it is now"
)

// maskError masks err, an action's refusal about run runID, with the secrets and the
// personal data of the run: what an action says goes to people, as what the client reads
// does. The error still matches what it matched (errors.Is, errors.As).
func (c *Client) maskError(ctx context.Context, runID int64, err error) error {
	if err == nil {
		return nil
	}
	return c.masked().maskers(ctx).of(runID, "").Error(err)
}

// reviewError wraps a failure of action on (runID, step), adding the hint its cause calls
// for. A *ReviewError, *InputError or *PatchError passes through.
func reviewError(action string, runID int64, step string, err error) error {
	var re *ReviewError
	var ie *InputError
	var pe *PatchError
	if errors.As(err, &re) || errors.As(err, &ie) || errors.As(err, &pe) {
		return err
	}
	e := &ReviewError{Action: action, RunID: runID, Step: step, Err: err}
	switch {
	case errors.Is(err, ErrNotFound):
		e.Hint = hintNotFound
	case errors.Is(err, ErrEffectMayExist):
		e.Hint = hintMayExist
	case errors.Is(err, ErrReviewConflict):
		e.Hint = hintConflict
	case errors.Is(err, ErrItemChanged):
		e.Hint = hintChanged
	}
	return e
}

// PatchError says what is wrong with a correction's merge patch.
type PatchError struct {
	Problem string
}

func (e *PatchError) Error() string { return "merge patch: " + e.Problem }

// Is reports whether target is ErrInvalidPatch.
func (e *PatchError) Is(target error) bool { return target == ErrInvalidPatch }

// ReviewItem is a step waiting in needs_review for a person.
type ReviewItem struct {
	RunID    int64
	StepID   int64
	Workflow string
	Step     string
	RunKey   string
	Entity   string
	// State is needs_review for items of the queue; ReviewGet returns any step.
	State     State
	EffectKey string
	// Reason is why the step waits: permanent_error, attempts_exhausted, key_conflict,
	// outcome_unknown, invalid_key, destination_blocked, transition_invalid, …
	Reason      Reason
	LastError   string
	LastOutcome store.Outcome
	// Attempts is how many attempts the step has had; AttemptBase how many it had at the
	// last manual retry or replay (the retry policy counts only the ones after).
	Attempts    int
	AttemptBase int
	// ResponseStatus and ResponseExcerpt are the destination's answer to the last attempt.
	ResponseStatus  int
	ResponseExcerpt string
	// Since is when the step was parked; Age how long ago that is.
	Since time.Time
	Age   time.Duration
	// EffectMayExist is set when the effect may have happened (its outcome is unknown):
	// the item then needs an explicit decision, ItHappened or SendAgain, and every other
	// action on it is refused with ErrEffectMayExist.
	EffectMayExist bool
	// Version names the state the item is in (its state, attempts and when it entered
	// it): a decision taken on what was shown of the item carries it in
	// ReviewAction.Version, and is refused with ErrItemChanged once the item has changed.
	Version string
}

// reviewItem is the caller's view of it, its last error and response excerpt masked by
// m.
func (c *Client) reviewItem(it *store.ReviewItem, m *redact.Masker) *ReviewItem {
	return &ReviewItem{RunID: it.RunID, StepID: it.StepID, Workflow: it.Workflow, Step: it.StepName, RunKey: it.RunKey, Entity: it.Entity,
		State: it.State, EffectKey: it.EffectKey, Reason: it.Reason, LastError: m.Text(it.LastError), LastOutcome: it.LastOutcome,
		Attempts: it.Attempts, AttemptBase: it.AttemptBase, ResponseStatus: it.ResponseStatus, ResponseExcerpt: m.Excerpt([]byte(it.ResponseExcerpt), 0),
		Since: it.Since, Age: max(c.clock.now().Sub(it.Since), 0), EffectMayExist: it.EffectMayExist(), Version: it.Version()}
}

// ReviewFilter selects review items. Zero fields do not filter.
type ReviewFilter struct {
	Workflow string
	Step     string
	Reason   Reason
	Entity   string
	RunID    int64
	// OlderThan keeps the items parked longer ago than this.
	OlderThan time.Duration
	// AfterStepID pages: only items with a larger step ID.
	AfterStepID int64
	// Limit caps the items returned (default 100); for ReviewBulk, 0 means every item.
	Limit int
}

func (c *Client) listParams(ctx context.Context, f ReviewFilter) store.ReviewListParams {
	p := store.ReviewListParams{Workflow: f.Workflow, StepName: f.Step, Reason: f.Reason, Entity: f.Entity, RunID: f.RunID,
		AfterStepID: f.AfterStepID, Limit: f.Limit}
	if f.OlderThan > 0 {
		p.ParkedBefore = c.now(ctx).Add(-f.OlderThan)
	}
	return p
}

// ReviewList returns the steps waiting in needs_review that match f, in step ID order
// (roughly oldest first), their last errors and response excerpts masked with the secrets
// and the personal data of their runs.
func (c *Client) ReviewList(ctx context.Context, f ReviewFilter) ([]*ReviewItem, error) {
	return c.masked().ReviewList(ctx, f)
}

func (r reader) ReviewList(ctx context.Context, f ReviewFilter) ([]*ReviewItem, error) {
	if err := r.record(ctx, f.RunID, f.Workflow, "review items"); err != nil {
		return nil, err
	}
	list, err := r.c.store.ReviewList(ctx, r.c.listParams(ctx, f))
	if err != nil {
		return nil, fmt.Errorf("onceflow: review list: %w", err)
	}
	ms := r.maskers(ctx)
	out := make([]*ReviewItem, 0, len(list))
	for _, it := range list {
		out = append(out, r.c.reviewItem(it, ms.of(it.RunID, it.Workflow)))
	}
	return out, nil
}

// ReviewGet returns the step of a run as a review item, whatever its state, masked as
// ReviewList masks; a *ReviewError matching ErrNotFound for an unknown run or step.
func (c *Client) ReviewGet(ctx context.Context, runID int64, step string) (*ReviewItem, error) {
	return c.masked().ReviewGet(ctx, runID, step)
}

func (r reader) ReviewGet(ctx context.Context, runID int64, step string) (*ReviewItem, error) {
	it, err := r.c.store.ReviewGetByStep(ctx, runID, step)
	if err != nil {
		return nil, reviewError("show", runID, step, err)
	}
	if err := r.record(ctx, runID, it.Workflow, fmt.Sprintf("review item of run %d step %s", runID, step)); err != nil {
		return nil, err
	}
	return r.c.reviewItem(it, r.maskers(ctx).of(it.RunID, it.Workflow)), nil
}

// ReviewAction is a person's decision about one review item.
type ReviewAction struct {
	RunID int64
	Step  string
	// Actor names who decides (required); Note says why. Both go into the audit event.
	Actor string
	Note  string
	// SendAgain confirms, for ReviewRetry of an item whose effect may have happened,
	// that the effect is to be sent again under the same effect key.
	SendAgain bool
	// ItHappened confirms, for ReviewResolve of an item whose effect may have happened,
	// that it did happen: the key is recorded completed and never sent again.
	ItHappened bool
	// Output is, for ReviewResolve, the step's output as the person states it (for
	// example map[string]any{"id": 77}); later steps read it as {steps.ID.output.…}. A
	// map, a struct, a json.RawMessage or []byte; nil for none.
	Output any
	// Version, when set, is the version of the item the decision was taken on
	// (ReviewItem.Version): the action is refused with ErrItemChanged, and nothing is
	// written, when the item is no longer in it.
	Version string
}

// ReviewResult is what a review action left behind.
type ReviewResult struct {
	RunID     int64
	Step      string
	StepState State
	RunState  State
	// Ledger is, for ReviewResolve, what became of the effect key: completed (recorded
	// with the output; other steps with the key reuse it), kept (already completed
	// elsewhere) or none (the step had no key).
	Ledger string
}

// reviewTarget checks an action before it is attempted, so that a refusal names the
// problem precisely; the store checks again inside its transaction.
func (c *Client) reviewTarget(ctx context.Context, action string, a ReviewAction) (*store.ReviewItem, error) {
	fail := func(problem, hint string, err error) error {
		return &ReviewError{Action: action, RunID: a.RunID, Step: a.Step, Problem: problem, Hint: hint, Err: err}
	}
	if a.Actor == "" {
		return nil, fail("the actor is required: name who decides, for the audit trail", "", ErrInvalidReview)
	}
	if a.RunID <= 0 || a.Step == "" {
		return nil, fail("name the item by its run ID and step", hintNotFound, ErrInvalidReview)
	}
	it, err := c.store.ReviewGetByStep(ctx, a.RunID, a.Step)
	if errors.Is(err, store.ErrNotFound) {
		if _, rerr := c.store.RunGetByID(ctx, a.RunID); errors.Is(rerr, store.ErrNotFound) {
			return nil, fail(fmt.Sprintf("run %d does not exist", a.RunID), hintNotFound, err)
		}
		return nil, fail(fmt.Sprintf("run %d has no step %q", a.RunID, a.Step), hintNotFound, err)
	}
	if err != nil {
		return nil, reviewError(action, a.RunID, a.Step, err)
	}
	if it.State != store.StateNeedsReview {
		return nil, fail(fmt.Sprintf("the step is %s, not in review", it.State), "only a step waiting in needs_review can be acted on", ErrNotInReview)
	}
	if a.Version != "" && it.Version() != a.Version {
		return nil, changed(action, it)
	}
	return it, nil
}

// changed is the refusal of a decision taken on another version of the item.
func changed(action string, it *store.ReviewItem) error {
	return &ReviewError{Action: action, RunID: it.RunID, Step: it.StepName, Err: ErrItemChanged,
		Problem: fmt.Sprintf("the item changed since it was shown: it is now %s with reason %s after attempt %d, since %s",
			it.State, dashed(string(it.Reason)), it.Attempts, it.Since.UTC().Format(time.RFC3339)),
		Hint: hintChanged}
}

// mayExist is the refusal of an action on an item whose effect may have happened.
func mayExist(action string, it *store.ReviewItem) error {
	return &ReviewError{Action: action, RunID: it.RunID, Step: it.StepName, Err: ErrEffectMayExist,
		Problem: fmt.Sprintf("the step waits because its outcome is unknown (reason %s, last outcome %s)", it.Reason, dashed(string(it.LastOutcome))),
		Hint:    hintMayExist}
}

func dashed(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func resultOf(r *store.ReviewResult) *ReviewResult {
	return &ReviewResult{RunID: r.Step.RunID, Step: r.Step.Name, StepState: r.Step.State, RunState: r.RunState, Ledger: r.Ledger}
}

// logDecision logs a person's decision about a review item, at info: what was decided, by
// whom, and what the step and its run are now (the note is in the audit trail).
func (c *Client) logDecision(action string, a ReviewAction, res *ReviewResult) {
	c.log.Info("review decision applied", "action", action, "run_id", res.RunID, "step", res.Step, "actor", a.Actor,
		"step_state", res.StepState, "run_state", res.RunState)
}

// ReviewRetry retries a parked step as it is: it gets a fresh attempt budget (the retry
// policy counts attempts from now on) and is due at once, under the effect key it has. An
// item whose effect may have happened is retried only with SendAgain. The action and its
// audit event (review.retried, with actor and note) commit together.
func (c *Client) ReviewRetry(ctx context.Context, a ReviewAction) (*ReviewResult, error) {
	res, err := c.reviewRetry(ctx, a)
	return res, c.maskError(ctx, a.RunID, err)
}

func (c *Client) reviewRetry(ctx context.Context, a ReviewAction) (*ReviewResult, error) {
	it, err := c.reviewTarget(ctx, "retry", a)
	if err != nil {
		return nil, err
	}
	if it.EffectMayExist() && !a.SendAgain {
		return nil, mayExist("retry", it)
	}
	res, err := c.store.ReviewRetry(ctx, store.ReviewRetryParams{ReviewAction: c.storeAction(ctx, a), SendAgain: a.SendAgain})
	if err != nil {
		return nil, reviewError("retry", a.RunID, a.Step, err)
	}
	c.poke()
	out := resultOf(res)
	c.logDecision("retry", a, out)
	return out, nil
}

// ReviewResolve completes a parked step by hand, with a.Output as its output: its effect
// key is recorded completed in the ledger (so no run performs it again, and other steps
// with the key reuse the output), and the steps that need it are released. An item whose
// effect may have happened is resolved only with ItHappened. Event review.resolved.
func (c *Client) ReviewResolve(ctx context.Context, a ReviewAction) (*ReviewResult, error) {
	res, err := c.reviewResolve(ctx, a)
	return res, c.maskError(ctx, a.RunID, err)
}

func (c *Client) reviewResolve(ctx context.Context, a ReviewAction) (*ReviewResult, error) {
	var out json.RawMessage
	if a.Output != nil {
		b, err := encodeOutput(a.Output)
		if err == nil {
			var buf bytes.Buffer
			if err = json.Compact(&buf, b); err == nil {
				b = buf.Bytes()
			}
		}
		if err != nil {
			return nil, &ReviewError{Action: "resolve", RunID: a.RunID, Step: a.Step, Err: ErrInvalidReview,
				Problem: "the output is not JSON: " + err.Error()}
		}
		out = b
	}
	it, err := c.reviewTarget(ctx, "resolve", a)
	if err != nil {
		return nil, err
	}
	if it.EffectMayExist() && !a.ItHappened {
		return nil, mayExist("resolve", it)
	}
	res, err := c.store.ReviewResolve(ctx, store.ReviewResolveParams{ReviewAction: c.storeAction(ctx, a), Output: out, ItHappened: a.ItHappened})
	if err != nil {
		return nil, reviewError("resolve", a.RunID, a.Step, err)
	}
	c.poke()
	done := resultOf(res)
	c.logDecision("resolve", a, done)
	return done, nil
}

// ReviewAbandon gives up on a parked step: it ends failed, the steps that need it are
// cancelled, and the run ends failed once nothing else of it is active or parked. Event
// review.abandoned. An item whose effect may have happened is refused: decide first.
func (c *Client) ReviewAbandon(ctx context.Context, a ReviewAction) (*ReviewResult, error) {
	res, err := c.reviewAbandon(ctx, a)
	return res, c.maskError(ctx, a.RunID, err)
}

func (c *Client) reviewAbandon(ctx context.Context, a ReviewAction) (*ReviewResult, error) {
	it, err := c.reviewTarget(ctx, "abandon", a)
	if err != nil {
		return nil, err
	}
	if it.EffectMayExist() {
		return nil, mayExist("abandon", it)
	}
	res, err := c.store.ReviewAbandon(ctx, c.storeAction(ctx, a))
	if err != nil {
		return nil, reviewError("abandon", a.RunID, a.Step, err)
	}
	out := resultOf(res)
	c.logDecision("abandon", a, out)
	return out, nil
}

func (c *Client) storeAction(ctx context.Context, a ReviewAction) store.ReviewAction {
	return store.ReviewAction{RunID: a.RunID, Step: a.Step, Actor: a.Actor, Note: c.maskNote(ctx, a.RunID, a.Note), Now: c.now(ctx), Version: a.Version}
}

// maskNote masks secrets and the run's personal data (Config.Redact, Workflow.Redact) in
// a person's note before it reaches the audit trail; docs are more documents of the run
// (a corrected input) whose values are masked too.
func (c *Client) maskNote(ctx context.Context, runID int64, note string, docs ...[]byte) string {
	if note == "" {
		return note
	}
	run, err := c.store.RunGetByID(ctx, runID)
	if err != nil {
		return c.redact.Secrets().Text(note)
	}
	return c.redact.ForRun(run.Workflow, append([][]byte{run.Input}, docs...)...).Text(note)
}
