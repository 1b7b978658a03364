package onceflow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// ReplayRequest asks for a run to be replayed, optionally after correcting its input.
type ReplayRequest struct {
	RunID int64
	// Step, when set, names the review item the replay is for; it must be in needs_review
	// and its effect must not possibly exist.
	Step string
	// MergePatch corrects the input with an RFC 7386 JSON merge patch (members set,
	// null removes one); Input replaces it whole. At most one of them.
	MergePatch json.RawMessage
	Input      json.RawMessage
	// Actor (required) and Note go into the audit trail.
	Actor string
	Note  string
	// PlanDigest, when set, is the Digest of the plan the replay was previewed with
	// (ReviewPreview): the replay is refused with ErrPlanChanged, and nothing is written,
	// when the plan it would carry out now is another, and the store's transaction acts
	// only if every step of the run is still as that plan read it. Without it the replay
	// is a one-shot, carried out on the plan of the moment.
	PlanDigest string
	// Version, when set with Step, is the version of the item the replay was decided on
	// (ReviewItem.Version): the replay is refused with ErrItemChanged when the item is in
	// another.
	Version string
}

// ReplayAction is what a replay does with one step.
type ReplayAction string

// Replay actions, as the preview predicts them.
const (
	// ReplaySkip: the step completed; its effect is not repeated.
	ReplaySkip ReplayAction = "skip"
	// ReplayKept: the step completed before the correction; its effect is kept and not
	// repeated, even where the corrected input would change its request or its key.
	ReplayKept ReplayAction = "kept"
	// ReplayReuse: the step's key is already completed by another step (another run):
	// it completes with that result without acting.
	ReplayReuse ReplayAction = "reuse"
	// ReplayRun: the step will act (after the steps in After have completed).
	ReplayRun ReplayAction = "run"
	// ReplayWait: the step's key is in flight in another step; it waits for it.
	ReplayWait ReplayAction = "wait"
	// ReplayBlocked: the step needs a step that will not run; it stays pending.
	ReplayBlocked ReplayAction = "blocked"
	// ReplayReview: the step stays in (or goes back to) review: its effect may exist, its
	// key cannot be made, or its key was completed with a different request.
	ReplayReview ReplayAction = "review"
	// ReplaySkipped: the step is (or will be) skipped: its condition is false, or a step
	// it needs was skipped.
	ReplaySkipped ReplayAction = "skipped"
)

// ReplayStep is the preview of one step.
type ReplayStep struct {
	Step string
	// State is the step's state now.
	State  State
	Action ReplayAction
	// EffectKey is the key the step acts (or acted) under; "" when it can be made only
	// after the steps in After have completed. CorrectedKey is, for a completed step,
	// the key the corrected input would give, when it differs (the effect is still kept).
	EffectKey    string
	CorrectedKey string
	// Reason is the reason code behind review, skipped and blocked.
	Reason Reason
	// After lists the steps that must complete before this one acts.
	After []string
	// Ledger facts: who completed the key and when (skip, kept, reuse), or who holds it
	// (wait).
	ByRun  int64
	ByStep string
	At     time.Time
	// Why says it in a sentence.
	Why string
}

// ReplayPlan is the preview of a replay: what it will do with every step of the run, in
// the order the steps can run.
type ReplayPlan struct {
	RunID    int64
	Workflow string
	RunKey   string
	// Entity is the run's entity after the correction.
	Entity string
	// Corrected is set when the replay changes the input; Input is the input the steps
	// will see and Diff the merge patch from the current input to it.
	Corrected bool
	Input     json.RawMessage
	Diff      json.RawMessage
	Steps     []*ReplayStep
	// Digest names this plan: the correction as requested (a merge patch or an input,
	// byte for byte but for white space), the run's steps as they were read, and what the
	// plan does with each of them. A confirmation passes it back in
	// ReplayRequest.PlanDigest. It is a SHA-256 digest in hex and reveals nothing of the
	// input.
	Digest string
}

// Count returns how many steps the plan gives action a.
func (p *ReplayPlan) Count(a ReplayAction) int {
	n := 0
	for _, s := range p.Steps {
		if s.Action == a {
			n++
		}
	}
	return n
}

// Step returns the plan of the step named name, or nil.
func (p *ReplayPlan) Step(name string) *ReplayStep {
	for _, s := range p.Steps {
		if s.Step == name {
			return s
		}
	}
	return nil
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	// Plan is the preview the replay was decided on; what it says is what the workers
	// will do, as long as nothing else changes the ledger meanwhile.
	Plan *ReplayPlan
	// Revision is the number of the input revision the correction made (0 without one).
	Revision int
	// Reset lists the steps made pending again.
	Reset    []string
	RunState State
}

// prepared is a replay computed and checked, ready to apply.
type prepared struct {
	run   *store.Run
	steps []*store.Step
	plan  *ReplayPlan
	input json.RawMessage // corrected input, nil without a correction
	diff  json.RawMessage
	// versions holds the versions of the steps as read, by name.
	versions map[string]string
}

// ReviewPreview shows, step by step, what ReviewReplay would do with req — skip, kept,
// reuse, run, wait, blocked, review or skipped — without changing anything. It renders
// effect keys with the code the workers use, against the corrected input when req
// corrects it, and consults the ledger. It refuses what ReviewReplay would refuse, with
// the same errors. The plan is masked: its input, diff and sentences carry no secret and
// no value of a personal-data field of the run, corrected or not. It reads the run and
// its steps once.
func (c *Client) ReviewPreview(ctx context.Context, a ReplayRequest) (*ReplayPlan, error) {
	res, err := c.reviewPreview(ctx, a)
	return res, c.maskError(ctx, a.RunID, err)
}

func (c *Client) reviewPreview(ctx context.Context, req ReplayRequest) (*ReplayPlan, error) {
	p, err := c.prepareReplay(ctx, "preview", req)
	if err != nil {
		return nil, err
	}
	return maskPlan(p.plan, p.masker(c)), nil
}

// masker returns the masker of what a replay shows of its run: the secrets, and the
// values the run's input, its corrected input and its steps' outputs hold at personal-data
// fields.
func (p *prepared) masker(c *Client) *redact.Masker {
	docs := [][]byte{p.run.Input}
	if p.input != nil {
		docs = append(docs, p.input)
	}
	for _, st := range p.steps {
		if len(st.Output) > 0 {
			docs = append(docs, st.Output)
		}
	}
	return c.redact.ForRun(p.run.Workflow, docs...)
}

// maskPlan returns a copy of p with its input, diff and sentences masked by m.
func maskPlan(p *ReplayPlan, m *redact.Masker) *ReplayPlan {
	out := *p
	if len(out.Input) > 0 {
		out.Input = m.JSON(out.Input)
	}
	if len(out.Diff) > 0 {
		out.Diff = m.JSON(out.Diff)
	}
	out.Steps = make([]*ReplayStep, len(p.Steps))
	for i, s := range p.Steps {
		ms := *s
		ms.Why = m.Text(s.Why)
		out.Steps[i] = &ms
	}
	return &out
}

// ReviewReplay corrects a run's input (when req carries a correction, validated against
// the workflow's required input and entity, and kept as a revision with its diff) and
// replays the run: steps in review (unless their effect may exist), failed and cancelled
// become pending with a fresh attempt budget; completed steps are never repeated, even
// where the corrected input would change their request. The correction, the reset steps
// and their audit events (run.input_corrected, review.replayed, with actor and note)
// commit together. The result carries the plan, which ReviewPreview shows beforehand,
// masked as ReviewPreview masks it. The run and its steps are read once, before the
// store's transaction, which acts only if they are still as read (the input and the
// states of the steps it resets).
func (c *Client) ReviewReplay(ctx context.Context, a ReplayRequest) (*ReplayResult, error) {
	res, err := c.reviewReplay(ctx, a)
	return res, c.maskError(ctx, a.RunID, err)
}

func (c *Client) reviewReplay(ctx context.Context, req ReplayRequest) (*ReplayResult, error) {
	p, err := c.prepareReplay(ctx, "replay", req)
	if err != nil {
		return nil, err
	}
	if req.PlanDigest != "" {
		if req.PlanDigest != p.plan.Digest {
			return nil, &ReviewError{Action: "replay", RunID: req.RunID, Step: req.Step, Err: ErrPlanChanged,
				Problem: "the replay's plan is not the one previewed: the correction differs from the previewed one, or the run or the ledger changed since",
				Hint:    "nothing was changed; preview the replay again and confirm the plan the new preview shows"}
		}
	}
	m := p.masker(c)
	note := m.Text(req.Note)
	sp := store.RunReplayParams{RunID: req.RunID, Step: req.Step, Actor: req.Actor, Note: note, Now: c.now(ctx)}
	switch {
	case req.PlanDigest != "":
		sp.StepVersions = p.versions
	case req.Version != "" && req.Step != "":
		sp.StepVersions = map[string]string{req.Step: req.Version}
	}
	if p.input != nil {
		sp.Input, sp.BaseInput, sp.Entity, sp.Diff = p.input, p.run.Input, p.plan.Entity, p.diff
	}
	res, err := c.store.RunReplay(ctx, sp)
	if err != nil {
		return nil, reviewError("replay", req.RunID, req.Step, err)
	}
	out := &ReplayResult{Plan: maskPlan(p.plan, m), Revision: res.Revision, RunState: res.Run.State}
	for _, st := range res.Reset {
		out.Reset = append(out.Reset, st.Name)
	}
	c.poke()
	return out, nil
}

// prepareReplay loads the run, applies and checks the correction, checks the replay as
// the store will, and plans it.
func (c *Client) prepareReplay(ctx context.Context, action string, req ReplayRequest) (*prepared, error) {
	fail := func(problem, hint string, err error) error {
		return &ReviewError{Action: action, RunID: req.RunID, Step: req.Step, Problem: problem, Hint: hint, Err: err}
	}
	if req.Actor == "" && action == "replay" {
		return nil, fail("the actor is required: name who decides, for the audit trail", "", ErrInvalidReview)
	}
	if req.MergePatch != nil && req.Input != nil {
		return nil, fail("give either a merge patch or a replacement input, not both", "", ErrInvalidReview)
	}
	run, err := c.store.RunGetByID(ctx, req.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fail(fmt.Sprintf("run %d does not exist", req.RunID), hintNotFound, err)
	}
	if err != nil {
		return nil, reviewError(action, req.RunID, req.Step, err)
	}
	def, err := c.workflow(run.Workflow)
	if err != nil {
		return nil, fail(fmt.Sprintf("workflow %q is not registered with this client, and a replay needs its definition to render keys and check the input", run.Workflow),
			"register it (onceflow command: pass --workflows DIR)", err)
	}
	steps, err := c.store.StepListByRun(ctx, run.ID)
	if err != nil {
		return nil, reviewError(action, req.RunID, req.Step, err)
	}
	p := &prepared{run: run, steps: steps}
	entity := run.Entity
	input := run.Input
	if req.MergePatch != nil || req.Input != nil {
		corrected, err := correctInput(run, req, c.cfg.MaxInputDepth)
		if err != nil {
			return nil, err
		}
		if entity, err = checkInput(def, run.RunKey, corrected); err != nil {
			return nil, err
		}
		base, _ := keytmpl.Decode(run.Input)
		next, _ := keytmpl.Decode(corrected)
		diff, err := encodeTree(createMergePatch(base, next))
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(corrected, run.Input) {
			p.input, p.diff, input = corrected, diff, corrected
		}
	}
	if _, err := store.ReplayCheck(store.RunReplayParams{RunID: run.ID, Step: req.Step}, steps); err != nil {
		if errors.Is(err, ErrEffectMayExist) {
			for _, st := range steps {
				if st.Name == req.Step {
					return nil, mayExist(action, &store.ReviewItem{RunID: run.ID, StepName: st.Name, Reason: st.Reason, LastOutcome: st.LastOutcome})
				}
			}
		}
		e := reviewError(action, req.RunID, req.Step, err)
		if re, ok := e.(*ReviewError); ok && errors.Is(err, ErrNothingToReplay) {
			re.Hint = "a replay runs again the steps in needs_review, failed or cancelled; this run has none (items whose outcome is unknown need resolve or retry)"
		}
		return nil, e
	}
	plan, err := c.planReplay(ctx, run, steps, input)
	if err != nil {
		return nil, reviewError(action, req.RunID, req.Step, err)
	}
	plan.Entity, plan.Corrected, plan.Input, plan.Diff = entity, p.input != nil, input, p.diff
	p.versions = make(map[string]string, len(steps))
	for _, st := range steps {
		p.versions[st.Name] = store.StepVersion(st)
	}
	plan.Digest = planDigest(req, run, steps, plan)
	p.plan = plan
	return p, nil
}

// planDigest is ReplayPlan.Digest: a SHA-256 over the correction as requested (through a
// digest of its own, so that what is hashed with the rest holds no input value), the
// run's steps by version and what the plan does with each. The input, the diff and the
// sentences, which are masked when shown, are not part of it: they follow from the rest.
func planDigest(req ReplayRequest, run *store.Run, steps []*store.Step, plan *ReplayPlan) string {
	compact := func(b []byte) []byte {
		var buf bytes.Buffer
		if json.Compact(&buf, b) != nil {
			return b
		}
		return buf.Bytes()
	}
	correction := sha256.New()
	switch {
	case req.MergePatch != nil:
		correction.Write([]byte("merge_patch\n"))
		correction.Write(compact(req.MergePatch))
	case req.Input != nil:
		correction.Write([]byte("input\n"))
		correction.Write(compact(req.Input))
	}
	type stepFacts struct {
		Step, Version, Action, EffectKey, CorrectedKey, Reason string
		After                                                  []string
		ByRun                                                  int64
		ByStep                                                 string
		At                                                     int64
	}
	doc := struct {
		Run        int64
		Item       string
		Correction []byte
		Updated    int64
		Entity     string
		Corrected  bool
		Steps      []stepFacts
	}{Run: run.ID, Item: req.Step, Correction: correction.Sum(nil), Updated: run.UpdatedAt.UnixMicro(), Entity: plan.Entity, Corrected: plan.Corrected}
	version := map[string]string{}
	for _, st := range steps {
		version[st.Name] = store.StepVersion(st)
	}
	for _, ps := range plan.Steps {
		doc.Steps = append(doc.Steps, stepFacts{Step: ps.Step, Version: version[ps.Step], Action: string(ps.Action), EffectKey: ps.EffectKey,
			CorrectedKey: ps.CorrectedKey, Reason: string(ps.Reason), After: ps.After, ByRun: ps.ByRun, ByStep: ps.ByStep, At: ps.At.UnixMicro()})
	}
	b, _ := json.Marshal(doc)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// correctInput applies req's correction to the run's input and returns it as canonical
// JSON, refusing one that nests deeper than maxDepth.
func correctInput(run *store.Run, req ReplayRequest, maxDepth int) (json.RawMessage, error) {
	if req.Input != nil {
		raw, _, err := normalizeInput(json.RawMessage(req.Input), maxDepth)
		if err != nil {
			return nil, &InputError{Workflow: run.Workflow, Problem: "the corrected input " + err.Error()}
		}
		return raw, nil
	}
	if !json.Valid(req.MergePatch) {
		return nil, &PatchError{Problem: "it is not valid JSON"}
	}
	patch, err := keytmpl.Decode(req.MergePatch)
	if err != nil {
		return nil, &PatchError{Problem: "it is not valid JSON: " + err.Error()}
	}
	if _, ok := patch.(map[string]any); !ok {
		return nil, &PatchError{Problem: "it must be a JSON object naming the members to change (RFC 7386); a null member removes one"}
	}
	base, err := keytmpl.Decode(run.Input)
	if err != nil {
		return nil, fmt.Errorf("decode the input of run %d: %w", run.ID, err)
	}
	b, err := encodeTree(applyMergePatch(base, patch))
	if err != nil {
		return nil, err
	}
	raw, _, err := normalizeInput(b, maxDepth)
	if err != nil {
		return nil, &InputError{Workflow: run.Workflow, Problem: "the corrected input " + err.Error()}
	}
	return raw, nil
}

// checkInput validates an input against the workflow as Start does — every required field
// present and not null, the entity template renderable — and returns the entity.
func checkInput(def *workflowDef, runKey string, raw json.RawMessage) (string, error) {
	tree, err := keytmpl.Decode(raw)
	if err != nil {
		return "", &InputError{Workflow: def.Name, Problem: "the corrected input is not valid JSON"}
	}
	data := map[string]any{"input": tree, "run": map[string]any{"key": runKey}}
	for _, f := range def.RequiredInput {
		t, _ := keytmpl.Parse("{input." + f + "}")
		if _, err := t.Render(data); err != nil {
			var fe *keytmpl.FieldError
			if errors.As(err, &fe) {
				return "", &InputError{Workflow: def.Name, Problem: fmt.Sprintf("the corrected input lacks a required field: %s %s", f, fe.Problem)}
			}
			return "", &InputError{Workflow: def.Name, Problem: err.Error()}
		}
	}
	if def.entity == nil {
		return "", nil
	}
	entity, err := def.entity.Render(data)
	if err != nil {
		return "", &InputError{Workflow: def.Name, Problem: "the corrected input does not name the entity: " + err.Error()}
	}
	return entity, nil
}

// planReplay predicts what happens to each step of the run after the store resets the
// steps store.ReplayResets selects, with input as the run's input. It renders keys with
// prepare, as a claim does, and reads the ledger.
func (c *Client) planReplay(ctx context.Context, run *store.Run, steps []*store.Step, input json.RawMessage) (*ReplayPlan, error) {
	plan := &ReplayPlan{RunID: run.ID, Workflow: run.Workflow, RunKey: run.RunKey}
	corrected := !bytes.Equal(input, run.Input)
	view := *run
	view.Input = input
	outputs := map[string]json.RawMessage{} // outputs known before anything runs
	pl := &planner{action: map[string]ReplayAction{}, after: map[string][]string{}, outputs: outputs}
	for _, st := range store.DependencyOrder(steps) {
		ps := &ReplayStep{Step: st.Name, State: st.State, EffectKey: st.EffectKey}
		plan.Steps = append(plan.Steps, ps)
		state := st.State
		if store.ReplayResets(st) {
			state = store.StatePending
		}
		switch state {
		case store.StateCompleted:
			outputs[st.Name] = st.Output
			ps.Action = ReplaySkip
			ps.Why = "completed; its effect is not repeated"
			if corrected {
				ps.Action = ReplayKept
				ps.Why = "completed before the correction; its effect is kept and not repeated, even if the corrected input would change its request"
				if spec, err := c.prepare(&store.ClaimCandidate{Run: &view, Step: st, Outputs: knownOutputs(outputs)}); err == nil && spec.Skip == "" && spec.Key != st.EffectKey {
					ps.CorrectedKey = spec.Key
					ps.Why += fmt.Sprintf(" (the corrected input gives the key %q)", spec.Key)
				}
			}
			if err := c.ledgerFacts(ctx, ps, st.EffectKey); err != nil {
				return nil, err
			}
		case store.StateSkipped:
			ps.Action, ps.Reason = ReplaySkipped, st.Reason
			ps.Why = "skipped (" + string(st.Reason) + "); it stays skipped"
		case store.StateNeedsReview:
			ps.Action, ps.Reason = ReplayReview, st.Reason
			ps.Why = "stays in review: its outcome is unknown and its effect may have happened; decide with resolve (it happened) or retry (send again)"
		default: // pending (reset or waiting), retrying
			if err := c.planPending(ctx, ps, st, &view, pl); err != nil {
				return nil, err
			}
		}
		pl.action[st.Name] = ps.Action
		pl.after[st.Name] = ps.After
	}
	return plan, nil
}

// planner is what planReplay knows of the steps it has planned.
type planner struct {
	action map[string]ReplayAction
	// after holds, by step, the steps that act before it completes.
	after map[string][]string
	// outputs holds the outputs known before anything acts.
	outputs map[string]json.RawMessage
}

// planPending predicts a step that will be pending after the replay.
func (c *Client) planPending(ctx context.Context, ps *ReplayStep, st *store.Step, run *store.Run, pl *planner) error {
	var skippedBy, blockedBy string
	seen := map[string]bool{}
	addAfter := func(names ...string) {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				ps.After = append(ps.After, n)
			}
		}
	}
	for _, n := range st.Needs {
		addAfter(pl.after[n]...)
		switch pl.action[n] {
		case ReplaySkip, ReplayKept, ReplayReuse:
		case ReplayRun, ReplayWait:
			addAfter(n)
		case ReplaySkipped:
			skippedBy = n
		default: // review, blocked
			blockedBy = n
		}
	}
	outputs := pl.outputs
	switch {
	case skippedBy != "":
		ps.Action, ps.Reason, ps.EffectKey, ps.After = ReplaySkipped, store.ReasonDependencySkipped, "", nil
		ps.Why = fmt.Sprintf("needs %s, which is skipped: it is skipped too", skippedBy)
		return nil
	case blockedBy != "":
		ps.Action, ps.After = ReplayBlocked, nil
		ps.Why = fmt.Sprintf("needs %s, which will not run (%s): it stays pending", blockedBy, pl.action[blockedBy])
		return nil
	}
	st2 := *st
	spec, err := c.prepare(&store.ClaimCandidate{Run: run, Step: &st2, Outputs: knownOutputs(outputs)})
	if len(ps.After) > 0 && (err != nil || spec.Skip != "") {
		// Its key or condition reads outputs that do not exist yet.
		ps.Action, ps.EffectKey = ReplayRun, ""
		ps.Why = fmt.Sprintf("runs after %s; its key and condition are decided when they have completed", strings.Join(ps.After, ", "))
		return nil
	}
	if err != nil {
		reason := store.ReasonInvalidKey
		var pe *store.PrepareError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		ps.Action, ps.Reason = ReplayReview, reason
		ps.Why = "goes back to review: " + err.Error()
		return nil
	}
	if spec.Skip != "" {
		ps.Action, ps.Reason, ps.EffectKey = ReplaySkipped, spec.Skip, ""
		ps.Why = "will be skipped: " + string(spec.Skip)
		return nil
	}
	ps.EffectKey = spec.Key
	after := ""
	if len(ps.After) > 0 {
		after = " after " + strings.Join(ps.After, ", ")
	}
	eff, err := c.store.EffectGetByKey(ctx, spec.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		ps.Action = ReplayRun
		ps.Why = "runs" + after + "; its key is free"
	case err != nil:
		return err
	case eff.State == store.EffectCompleted && eff.Fingerprint != "" && spec.Fingerprint != "" && eff.Fingerprint != spec.Fingerprint:
		ps.Action, ps.Reason = ReplayReview, store.ReasonKeyConflict
		ps.ByRun, ps.ByStep, ps.At = eff.RunID, eff.StepName, eff.CompletedAt
		ps.Why = fmt.Sprintf("goes back to review: key %q was completed by run %d step %s with a different request", spec.Key, eff.RunID, eff.StepName)
	case eff.State == store.EffectCompleted:
		ps.Action = ReplayReuse
		ps.ByRun, ps.ByStep, ps.At = eff.RunID, eff.StepName, eff.CompletedAt
		ps.Why = fmt.Sprintf("completes%s from the ledger without acting: key completed by run %d step %s at %s", after, eff.RunID, eff.StepName, eff.CompletedAt.Format(time.RFC3339))
		outputs[st.Name] = eff.Result
	case eff.StepID == st.ID:
		ps.Action = ReplayRun
		ps.Why = "runs" + after + " under the key it holds"
	default:
		ps.Action = ReplayWait
		ps.ByRun, ps.ByStep = eff.RunID, eff.StepName
		ps.Why = fmt.Sprintf("waits%s: key %q is in flight in run %d step %s", after, spec.Key, eff.RunID, eff.StepName)
	}
	return nil
}

// ledgerFacts fills in who completed key, and when.
func (c *Client) ledgerFacts(ctx context.Context, ps *ReplayStep, key string) error {
	if key == "" {
		return nil
	}
	eff, err := c.store.EffectGetByKey(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ps.ByRun, ps.ByStep, ps.At = eff.RunID, eff.StepName, eff.CompletedAt
	if eff.State == store.EffectCompleted {
		ps.Why += fmt.Sprintf("; key completed by run %d step %s at %s", eff.RunID, eff.StepName, eff.CompletedAt.Format(time.RFC3339))
	}
	return nil
}

// knownOutputs copies the outputs known so far, which a claim would pass as the outputs
// of the run's completed steps.
func knownOutputs(outputs map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(outputs))
	for name, o := range outputs {
		out[name] = o
	}
	return out
}
