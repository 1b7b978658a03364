// Package transitionstep implements the "transition" step kind: a guarded change of a
// business entity's state (an order pending → paid) by compare-and-set in the store, so
// that what follows it runs only when the entity legitimately reached the new state.
//
// The transition is idempotent under the step's effect key: a retry after a crash reports
// the transition it already applied instead of failing. A transition whose entity is not
// in an allowed state — a second payment for a paid order, an event arriving after the
// order was cancelled — changes nothing: the step ends skipped (and so do the steps that
// need it) or, if configured, is parked for review with reason transition_invalid.
package transitionstep

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/store"
)

// ReasonInvalid is the reason of a refused transition.
const ReasonInvalid = onceflow.ReasonTransitionInvalid

// Spec describes a transition step.
type Spec struct {
	// Entity is a template naming the entity, e.g. "order:{input.order_id}".
	Entity string
	// From lists the states the entity may be in; Initial is the state of an entity never
	// transitioned before (default "new").
	From    []string
	Initial string
	To      string
	// Review parks a refused transition for a person instead of skipping it.
	Review bool
}

// Step is a compiled transition step.
type Step struct {
	spec   Spec
	entity *keytmpl.Template
	store  store.EntityStore
}

// New compiles spec against st.
func New(spec Spec, st store.EntityStore) (*Step, error) {
	if st == nil {
		return nil, errors.New("transition steps need a store that keeps entity states")
	}
	if spec.Entity == "" || spec.To == "" || len(spec.From) == 0 {
		return nil, errors.New("a transition needs entity, from and to")
	}
	t, err := keytmpl.Parse(spec.Entity)
	if err != nil {
		return nil, fmt.Errorf("entity: %w", err)
	}
	return &Step{spec: spec, entity: t, store: st}, nil
}

// Output is a transition step's output.
type Output struct {
	Entity   string `json:"entity"`
	From     string `json:"from"`
	To       string `json:"to"`
	Replayed bool   `json:"replayed,omitempty"`
}

// Do applies the transition: an onceflow.StepFunc.
func (s *Step) Do(ctx context.Context, sc *onceflow.StepContext) (any, error) {
	data, err := sc.TemplateData()
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	key, err := s.entity.Render(data)
	if err != nil {
		return nil, onceflow.PermanentError(err)
	}
	if err := onceflow.ValidateEntity(key); err != nil {
		// Before the store: an entity key the rules refuse is bad data, not a fault to retry.
		return nil, onceflow.PermanentError(fmt.Errorf("transition: %w", err))
	}
	res, err := s.store.EntityTransition(ctx, store.EntityTransitionParams{
		Key: key, From: s.spec.From, Initial: s.spec.Initial, To: s.spec.To,
		EffectKey: sc.EffectKey, RunID: sc.RunID, StepName: sc.Step, Workflow: sc.Workflow, Actor: "run:" + fmt.Sprint(sc.RunID), Now: sc.Now(),
	})
	if err != nil {
		return nil, err // the database: retryable
	}
	if res.Applied {
		return Output{Entity: key, From: res.From, To: s.spec.To, Replayed: res.Replayed}, nil
	}
	why := fmt.Errorf("%s is %s; the transition to %s needs one of %v", key, res.State, s.spec.To, s.spec.From)
	if s.spec.Review {
		return nil, &onceflow.StepError{Class: onceflow.Permanent, Reason: ReasonInvalid, Err: why}
	}
	return nil, onceflow.SkipStep(ReasonInvalid, why)
}
