package transitionstep

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/store"
)

// KindOptions configure the transition kind.
type KindOptions struct {
	// Store holds the entities' states; nil: files are checked but no transition step is
	// built.
	Store store.EntityStore
}

// Kind is the transition step kind, `kind: transition` with a `transition:` block.
type Kind struct {
	store store.EntityStore
}

// NewKind returns the transition kind.
func NewKind(o KindOptions) *Kind { return &Kind{store: o.Store} }

var _ steps.Kind = (*Kind)(nil)

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:    "transition",
		Summary: "Moves a business entity from one state to another by compare-and-set.",
		Doc: `The entity (a template such as "order:{input.order_id}") moves to the state to only if
it is in one of the states from (an entity never transitioned is in initial, default new),
by compare-and-set in onceflow's database, so that what follows runs only when the entity
legitimately reached its new state. A retry after a crash reports the transition it
already applied. A transition the entity's state does not allow — a second payment for a
paid order — changes nothing: the step ends skipped, and so do the steps that need it, or
waits for review (on_invalid: needs_review, reason transition_invalid).`,
		Example: `- id: mark_paid
  kind: transition
  effect_key: "order-paid:{input.order_id}"
  transition: {entity: "order:{input.order_id}", from: [pending], to: paid, initial: pending}
`,
		Schema: json.RawMessage(`{
			"type": "object",
			"required": [
				"entity",
				"from",
				"to"
			],
			"additionalProperties": false,
			"properties": {
				"entity": {
					"$ref": "#/$defs/template"
				},
				"from": {
					"type": "array",
					"minItems": 1,
					"items": {
						"$ref": "#/$defs/transition.state"
					}
				},
				"to": {
					"$ref": "#/$defs/transition.state"
				},
				"initial": {
					"$ref": "#/$defs/transition.state",
					"description": "The state of an entity never transitioned (default new)."
				},
				"on_invalid": {
					"enum": [
						"skip",
						"needs_review"
					]
				}
			}
		}`),
		Defs: map[string]json.RawMessage{"transition.state": json.RawMessage(`{
			"type": "string",
			"pattern": "^[a-z][a-z0-9_]{0,63}$"
		}`)},
		Settings: reflect.TypeFor[Settings](),
	}
}

// Decode decodes a transition block.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	c := &Settings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Settings are a transition step's settings, its `transition:` block.
type Settings struct {
	Entity string   `yaml:"entity"`
	From   []string `yaml:"from"`
	To     string   `yaml:"to"`
	// Initial is the state of an entity never transitioned before (default "new").
	Initial string `yaml:"initial"`
	// OnInvalid is "skip" (default) or "needs_review".
	OnInvalid string `yaml:"on_invalid"`

	kind *Kind
}

// Spec is the transition the settings describe.
func (s *Settings) Spec() Spec {
	return Spec{Entity: s.Entity, From: s.From, Initial: s.Initial, To: s.To, Review: s.OnInvalid == "needs_review"}
}

var stateRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Walk checks the states and the entity, a template that never reads the environment.
func (s *Settings) Walk(w block.Walker) {
	if s.Entity == "" || s.To == "" || len(s.From) == 0 {
		w.Problem("", "transition needs entity, from (a list of states) and to")
	}
	for _, st := range append(append([]string{}, s.From...), s.To, s.Initial) {
		if st != "" && !stateRE.MatchString(st) {
			w.Problem("", "state %q must be lowercase letters, digits and '_'", st)
		}
	}
	switch s.OnInvalid {
	case "", "skip", "needs_review":
	default:
		w.Problem("on_invalid", "on_invalid %q is not skip or needs_review", s.OnInvalid)
	}
	if s.Entity != "" {
		if _, err := keytmpl.Parse(s.Entity); err != nil {
			w.Problem("entity", "%v", err)
		}
		w.Template("entity", s.Entity, block.Use{Label: "transition entity"})
	}
}

// OnUnknown leaves an unknown outcome to the engine: the transition is idempotent under
// its effect key.
func (s *Settings) OnUnknown() onceflow.UnknownAction { return "" }

// Build compiles the transition.
func (s *Settings) Build(*steps.Build) (onceflow.StepFunc, error) {
	if s.kind == nil || s.kind.store == nil {
		return nil, errors.New("transition steps are not available with this store")
	}
	st, err := New(s.Spec(), s.kind.store)
	if err != nil {
		return nil, err
	}
	return st.Do, nil
}
