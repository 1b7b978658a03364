package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/store"
)

// StepContext is what a step function knows about the work it is doing.
type StepContext struct {
	// RunID, RunKey, Workflow and Entity identify the run.
	RunID    int64
	RunKey   string
	Workflow string
	Entity   string
	// Step is the step's ID.
	Step string
	// EffectKey is the key this effect is known by, the same on every attempt: pass it to
	// the destination as its idempotency key.
	EffectKey string
	// Attempt is this attempt's number, starting at 1.
	Attempt int
	// PreviousOutcome is how the previous attempt ended ("" for the first). Unknown means
	// the effect may already exist: check with the destination before acting again if it
	// cannot deduplicate by EffectKey.
	PreviousOutcome ErrorClass
	// Input is the run's input, a JSON object.
	Input json.RawMessage
	// Outputs holds the outputs of the run's completed steps by step ID.
	Outputs map[string]json.RawMessage
	// Progress is the latest checkpoint an earlier attempt of the step saved with
	// Checkpoint (nil when none did): a long step starts from there.
	Progress json.RawMessage

	respStatus  int
	respExcerpt string
	request     *Request
	clock       func() time.Time
	// checkpointer and checkpointAt, when the store keeps checkpoints: the attempt's step,
	// owner and attempt number.
	checkpointer store.StepCheckpointer
	checkpointAt store.StepCheckpointParams
}

// Checkpoint saves how far a long step got — v, encoded as JSON — so that the attempt
// after a crash, a timeout or a retryable error starts from there: it is that attempt's
// Progress. It is durable when Checkpoint returns, and written only while this attempt
// holds the step (otherwise an error wrapping ErrLeaseLost: stop working). What the step
// did after its last checkpoint is done again by the next attempt, so that part must be
// idempotent. The checkpoint stays for manual retries and replays too: a step whose
// input a person may correct keeps in its checkpoint what the progress depends on (the
// fan-out walk keeps its tick). A checkpoint is not in the audit trail.
func (sc *StepContext) Checkpoint(ctx context.Context, v any) error {
	if sc.checkpointer == nil {
		return errors.New("onceflow: this step's store keeps no checkpoints (store.StepCheckpointer)")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("onceflow: checkpoint: %w", err)
	}
	p := sc.checkpointAt
	p.Now, p.Progress = sc.Now(), b
	if err := sc.checkpointer.StepCheckpoint(ctx, p); err != nil {
		return fmt.Errorf("onceflow: checkpoint: %w", err)
	}
	sc.Progress = b
	return nil
}

// Now is the engine's clock (Client.Now: the database's on PostgreSQL), for steps that
// stamp what they do.
func (sc *StepContext) Now() time.Time {
	if sc.clock == nil {
		return time.Now()
	}
	return sc.clock()
}

// RecordResponse stores the destination's answer with the attempt: its status and a
// short excerpt, already stripped of anything secret. A *StepError's response fields take
// precedence.
func (sc *StepContext) RecordResponse(status int, excerpt string) {
	sc.respStatus, sc.respExcerpt = status, excerpt
}

// DecodeInput decodes the run's input into v.
func (sc *StepContext) DecodeInput(v any) error {
	if err := json.Unmarshal(sc.Input, v); err != nil {
		return PermanentError(fmt.Errorf("decode input of run %d: %w", sc.RunID, err))
	}
	return nil
}

// DecodeOutput decodes the output of a completed step into v.
func (sc *StepContext) DecodeOutput(step string, v any) error {
	raw, ok := sc.Outputs[step]
	if !ok {
		return PermanentError(fmt.Errorf("step %q has no output in run %d; is it listed in Needs?", step, sc.RunID))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return PermanentError(fmt.Errorf("decode output of step %q: %w", step, err))
	}
	return nil
}

// TemplateData returns the tree that step templates read: input, run (key, id), workflow,
// step, and steps.ID.output for the run's completed steps. Numbers keep their exact text.
func (sc *StepContext) TemplateData() (map[string]any, error) {
	return sc.templateData(templateRoots{input: true, steps: true})
}

// templateRoots says which of the parts of TemplateData that need decoding some templates
// read: the run's input, the outputs of its steps.
type templateRoots struct{ input, steps bool }

// rootsOf returns the parts that need decoding the template t reads.
func rootsOf(t *keytmpl.Template) templateRoots {
	var r templateRoots
	for _, f := range t.Fields() {
		root, _, _ := strings.Cut(f, ".")
		r.input = r.input || root == "input"
		r.steps = r.steps || root == "steps"
	}
	return r
}

// templateData is TemplateData with the input and the outputs decoded only if roots says
// a template reads them; a template that reads neither finds them empty.
func (sc *StepContext) templateData(roots templateRoots) (map[string]any, error) {
	var in any = map[string]any{}
	if roots.input {
		var err error
		if in, err = keytmpl.Decode(sc.Input); err != nil {
			return nil, fmt.Errorf("decode input: %w", err)
		}
	}
	steps := map[string]any{}
	if roots.steps {
		for name, raw := range sc.Outputs {
			out, err := keytmpl.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("decode output of step %q: %w", name, err)
			}
			steps[name] = map[string]any{"output": out}
		}
	}
	return map[string]any{
		"input":    in,
		"run":      map[string]any{"key": sc.RunKey, "id": json.Number(strconv.FormatInt(sc.RunID, 10))},
		"workflow": sc.Workflow,
		"step":     sc.Step,
		"steps":    steps,
	}, nil
}
