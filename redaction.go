package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// Redaction says what is sensitive (Config.Redact). The engine masks it, with
// "[redacted]", in everything it writes about runs — attempt errors and response excerpts,
// audit event details, log lines — before they are stored or logged. It never masks the
// stored input and step outputs, which replays need; the client masks them when they are
// read (see Reader), and the API, the console and the onceflow command read through it.
// Run keys, entities and effect keys are identifiers and are never masked: build them from
// business ids, not from personal data.
type Redaction struct {
	// Secrets are values masked wherever they appear: API tokens, passwords, signing
	// secrets, the values of the environment variables steps read. Values shorter than 4
	// bytes are ignored.
	Secrets []string
	// Fields are paths of personal data, in every workflow ("email", "customer.name"). A
	// path matches a field whose trailing names are the path, at any depth of a run's input
	// or a step's output, ignoring case and list positions: "email" matches every field
	// named email, "customer.name" the name inside customer but not a product's name.
	// Whatever a run holds at these fields is also masked where it appears in text, such as
	// a destination's error message. Workflow.Redact adds fields for one workflow. Fields
	// whose names contain password, secret, token, authorization, api_key, apikey, card,
	// cvc or iban are masked in documents whatever this says.
	Fields []string
}

// newRedactPolicy builds the client's policy from cfg.
func newRedactPolicy(r Redaction) (*redact.Policy, error) {
	p, err := redact.New(r.Secrets, r.Fields)
	if err != nil {
		return nil, fmt.Errorf("onceflow: Config.Redact: %w", err)
	}
	return p, nil
}

// masker returns the masker for text about run, whose completed steps have outputs.
func (c *Client) masker(run *store.Run, outputs map[string]json.RawMessage) *redact.Masker {
	docs := make([][]byte, 0, len(outputs)+1)
	docs = append(docs, run.Input)
	names := make([]string, 0, len(outputs))
	for n := range outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		docs = append(docs, outputs[n])
	}
	return c.redact.ForRun(run.Workflow, docs...)
}

// scrub masks what an attempt's record says about the run before it is stored and logged:
// the error, the response excerpt and the decision's detail. The output is data and is
// stored as it is.
func (c *Client) scrub(m *redact.Masker, p *store.StepRecordParams) {
	p.Error = m.Text(p.Error)
	p.ResponseExcerpt = m.Excerpt([]byte(p.ResponseExcerpt), 0)
	if p.Detail != nil {
		if d, ok := m.Tree(map[string]any(p.Detail)).(map[string]any); ok {
			p.Detail = d
		}
	}
}

// prepareMasked is prepare with the error it parks a step with masked: the error becomes
// the step's last error and the detail of its audit event.
func (c *Client) prepareMasked(cand *store.ClaimCandidate) (store.EffectSpec, error) {
	spec, err := c.prepare(cand)
	if err == nil {
		return spec, nil
	}
	m := c.masker(cand.Run, cand.Outputs)
	var pe *store.PrepareError
	if errors.As(err, &pe) {
		return spec, &store.PrepareError{Reason: pe.Reason, Err: m.Error(pe.Err)}
	}
	return spec, m.Error(err)
}

// stepLog returns the logger for lines about a step: every such line names the run, the
// workflow, the entity, the step, the effect key and the attempt.
func (c *Client) stepLog(run *store.Run, st *store.Step) *slog.Logger {
	return c.log.With("run_id", run.ID, "workflow", run.Workflow, "entity", run.Entity,
		"step", st.Name, "effect_key", st.EffectKey, "attempt", st.Attempt)
}

// logger returns the logger of the running step id, or def.
func (f *inflight) logger(id int64, def *slog.Logger) *slog.Logger {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.steps[id]; ok && e.log != nil {
		return e.log
	}
	return def.With("step_id", id)
}

// reapLog remembers what the lease reaper decided, to log each reaped step once its
// transaction committed.
type reapLog struct {
	decide func(*store.Step) store.ReapDecision

	mu    sync.Mutex
	steps map[int64]reaped
}

type reaped struct {
	step store.Step
	dec  store.ReapDecision
}

func newReapLog(decide func(*store.Step) store.ReapDecision) *reapLog {
	return &reapLog{decide: decide, steps: map[int64]reaped{}}
}

// Decide is the store.StepReapParams.Decide that records each decision.
func (r *reapLog) Decide(st *store.Step) store.ReapDecision {
	d := r.decide(st)
	r.mu.Lock()
	r.steps[st.ID] = reaped{step: *st, dec: d}
	r.mu.Unlock()
	return d
}

// reaped logs and counts the steps a reap took back.
func (c *Client) reaped(ctx context.Context, r *reapLog, n int) {
	if n > 0 {
		c.metrics.Observe(Measurement{Kind: MeasureLeaseReap, Count: n})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n == 0 || len(r.steps) == 0 {
		return
	}
	runs := map[int64]*store.Run{}
	for _, e := range r.steps {
		run, ok := runs[e.step.RunID]
		if !ok {
			var err error
			if run, err = c.store.RunGetByID(ctx, e.step.RunID); err != nil {
				run = &store.Run{ID: e.step.RunID, Workflow: e.step.Workflow}
			}
			runs[run.ID] = run
		}
		c.stepLog(run, &e.step).Warn("lease expired without a result; the step's outcome is unknown",
			"lease_owner", e.step.LeaseOwner, "next_state", e.dec.State, "reason", e.dec.Reason)
	}
}
