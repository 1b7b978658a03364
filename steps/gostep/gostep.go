// Package gostep is the "go" step kind: a step performed by a Go function the program
// registers by name, `kind: go` with `func: NAME`. The function is an onceflow.StepFunc
// and owns its outcomes: it passes the step's effect key to its destination and
// classifies what happened, as any step function does.
package gostep

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
)

// Kind is the go step kind.
type Kind struct {
	funcs map[string]onceflow.StepFunc
}

// New returns the go kind, with the functions steps may name.
func New(funcs map[string]onceflow.StepFunc) *Kind { return &Kind{funcs: funcs} }

var _ steps.Kind = (*Kind)(nil)

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:    "go",
		Block:   "func",
		Summary: "Calls a Go function the program registered by name.",
		Doc: `func names an onceflow.StepFunc that a program embedding onceflow registered
(stdsteps.Options.Funcs). The function owns its outcomes: it passes the step's effect key
to its destination as the idempotency key on every attempt, and returns a plain error to
be retried, onceflow.PermanentError for review, onceflow.UnknownOutcomeError when the
effect may have happened. A file naming a function the program does not register is
refused when it is built.`,
		Example: `- id: award_points
  kind: go
  func: award-points
  effect_key: "points:{input.order_id}"
`,
		Schema: json.RawMessage(`{
			"type": "string",
			"minLength": 1,
			"description": "kind go: the name of a Go function the program registered."
		}`),
		Settings: reflect.TypeFor[string](),
	}
}

// Decode reads the function's name; an empty one is no setting.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	var name string
	if err := s.Decode(&name); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, nil
	}
	return &Settings{Func: name, kind: k}, nil
}

// Settings name a go step's function.
type Settings struct {
	Func string `yaml:"func"`

	kind *Kind
}

// Walk has nothing to check: the function is looked up when the step is built.
func (s *Settings) Walk(block.Walker) {}

// OnUnknown leaves an unknown outcome to the engine.
func (s *Settings) OnUnknown() onceflow.UnknownAction { return "" }

// Build returns the registered function.
func (s *Settings) Build(*steps.Build) (onceflow.StepFunc, error) {
	var fn onceflow.StepFunc
	if s.kind != nil {
		fn = s.kind.funcs[s.Func]
	}
	if fn == nil {
		return nil, fmt.Errorf("func %q is not registered; register Go step functions by name before loading workflow files", s.Func)
	}
	return fn, nil
}
