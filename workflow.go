package onceflow

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/backoff"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/redact"
)

// Workflow defines how a business event is automated: how its entity is named and which
// steps run, in which order.
type Workflow struct {
	// Name identifies the workflow: letters, digits, '.', '_' and '-', at most 100 bytes.
	Name string
	// Description says what the workflow does, for people (GET /v1/workflows). Optional.
	Description string
	// File is where the definition was read from, such as a workflow file's path, so
	// that a message about the workflow can say what to edit; "" for one written in Go.
	File string
	// RunKey is a template deriving a run's key from its input when the caller names
	// none, such as "lead:{input.submission_id}" (an API request without an
	// Idempotency-Key; see Client.DeriveRunKey). It may read only {input.…}. Optional.
	RunKey string
	// Entity is a template naming the business object a run is about, such as
	// "lead:{input.submission_id}". It may read {input.…} and {run.key}. Optional. The
	// entity it renders follows the key rules (ValidateEntity): Start refuses one that
	// breaks them with an InputError naming the input field.
	Entity string
	// RequiredInput lists dotted input paths that must be present and non-null, such as
	// "submission_id" or "customer.email". Start refuses input that lacks one.
	RequiredInput []string
	// Redact lists paths of personal data in this workflow's input and step outputs, such
	// as "email" or "customer.name", in addition to Config.Redact.Fields (see Redaction).
	Redact []string
	// Steps form a DAG through their Needs.
	Steps []Step
	// Access says who may start runs from outside the program: which API tokens, and
	// whether a request may start it at all (see Access). The zero value lets every
	// token start it unless a schedule feeds it.
	Access Access
}

// StepFunc performs a step's effect. It returns the step's output (anything encoding/json
// can encode; a json.RawMessage is stored as is) or an error. A plain error is retryable;
// wrap it with PermanentError, RetryAfterError or UnknownOutcomeError to say otherwise.
//
// The function must pass sc.EffectKey to the destination as its idempotency key where the
// destination supports one: the same key is used for every attempt.
type StepFunc func(ctx context.Context, sc *StepContext) (any, error)

// FailureAction is what happens to a step whose error is permanent or whose attempts ran out.
type FailureAction string

// Failure actions.
const (
	// Review parks the step in needs_review for a person (the default).
	Review FailureAction = "needs_review"
	// Fail ends the step failed; steps that need it are cancelled.
	Fail FailureAction = "fail"
)

// UnknownAction is what happens after an attempt whose outcome is unknown.
type UnknownAction string

// Unknown-outcome actions.
const (
	// RetrySameKey tries again with the same effect key, relying on the destination to
	// deduplicate (the default). The next attempt sees PreviousOutcome == Unknown.
	RetrySameKey UnknownAction = "retry"
	// ReviewUnknown parks the step for a person to decide, for destinations that cannot
	// deduplicate.
	ReviewUnknown UnknownAction = "needs_review"
)

// Step is one side effect (or computation) of a workflow: its definition. What a run
// holds of it — state, key, attempts, output — is a row, store.Step, which the client
// shows as StepInfo.
type Step struct {
	// ID names the step within its workflow: letters, digits, '_' and '-'.
	ID string
	// Needs lists the IDs of steps that must complete first.
	Needs []string
	// EffectKey is the template of the step's effect key, e.g.
	// "lead-create:{input.submission_id}". It may read {input.…}, {run.key}, {run.id},
	// {workflow}, {step} and {steps.ID.output.…} of steps it (transitively) needs. The
	// default, "{workflow}.{step}:{run.key}", is unique per run; a key shared across runs
	// and workflows makes the effect happen once for all of them.
	EffectKey string
	// Do performs the effect.
	Do StepFunc
	// When, if set, decides whether the step applies to the run; it sees the input and the
	// outputs of completed steps. A false answer skips the step (state skipped, reason
	// condition_false) and releases the steps that need it. It must be fast and do no I/O.
	When func(sc *StepContext) (bool, error)
	// Fingerprint, if set, returns the request the step will make; it is hashed and stored
	// in the effect ledger. A key completed with a different request is not reused: the
	// step goes to review with reason key_conflict.
	Fingerprint func(sc *StepContext) (any, error)
	// Retry is the retry policy; zero fields take the defaults.
	Retry RetryPolicy
	// OnFailure applies to permanent errors and exhausted attempts (default Review).
	OnFailure FailureAction
	// OnUnknown applies after an attempt whose outcome is unknown (default RetrySameKey).
	OnUnknown UnknownAction
	// Timeout bounds one attempt (default 5 minutes). An attempt that times out has an
	// unknown outcome.
	Timeout time.Duration
	// Delay postpones the step: it becomes due Delay after the steps it needs completed
	// (after the run started, for a step without needs). NotBefore, if set, returns the
	// earliest time it may run, from the input and the outputs of the steps it needs. The
	// step waits pending, with its due time stored (a restart neither loses the timer nor
	// fires it early), and When is evaluated only once it is due.
	Delay     time.Duration
	NotBefore func(sc *StepContext) (time.Time, error)
	// Retention is how long the effect ledger remembers the step's completed effect key,
	// counted from when it completes; 0 (the default) is forever. Once it has passed, a
	// purge (store.RetentionStore, onceflow purge) may forget the key, and a run that
	// produces the same key afterwards performs the effect again. onceflow cannot know
	// what a step does, so it keeps every key forever unless told otherwise: keep forever
	// whatever moves money or stock or creates records, and give a retention only to
	// effects whose repetition after that long is harmless, such as a notification.
	Retention time.Duration
}

// RetryPolicy decides how often and how soon a step is tried again. Delays grow
// exponentially with full jitter: attempt n waits a random duration below
// min(Max, Initial × Multiplier^(n-1)).
type RetryPolicy struct {
	// MaxAttempts is the most attempts, the first included (default 6).
	MaxAttempts int
	// Initial is the ceiling of the first delay (default 2 s).
	Initial time.Duration
	// Max caps every delay (default 5 min).
	Max time.Duration
	// Multiplier is the growth per attempt (default 2).
	Multiplier float64
	// MaxRetryAfter is the longest wait a destination may ask for (RetryAfterError, an
	// http step's Retry-After) and be honoured (default 1 h). A destination that asks for
	// longer is not waited for in silence: the step goes to review with reason
	// retry_after_too_long, the delay asked for in its audit event. An http step's 429
	// holds back the other requests to a limited host (limits:) for no longer either.
	// The cap belongs to the retry policy, not to a step kind: it bounds how long any step
	// may be parked as retrying on a destination's word, as Max bounds the backoff.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy a zero RetryPolicy stands for.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 6, Initial: 2 * time.Second, Max: 5 * time.Minute, Multiplier: 2, MaxRetryAfter: time.Hour}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy
	if p.MaxAttempts > 0 {
		d.MaxAttempts = p.MaxAttempts
	}
	if p.Initial > 0 {
		d.Initial = p.Initial
	}
	if p.Max > 0 {
		d.Max = p.Max
	}
	if p.Multiplier >= 1 {
		d.Multiplier = p.Multiplier
	}
	if p.MaxRetryAfter > 0 {
		d.MaxRetryAfter = p.MaxRetryAfter
	}
	return d
}

// RetryAfterCap is the MaxRetryAfter p stands for: its own, or the default's.
func (p RetryPolicy) RetryAfterCap() time.Duration { return p.withDefaults().MaxRetryAfter }

func (p RetryPolicy) curve() backoff.Policy {
	return backoff.Policy{Initial: p.Initial, Max: p.Max, Multiplier: p.Multiplier}
}

const defaultEffectKey = "{workflow}.{step}:{run.key}"

var (
	workflowNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	stepIDRE       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$`)
)

// workflowDef is a validated, compiled workflow.
type workflowDef struct {
	Workflow
	entity *keytmpl.Template
	// runKey is RunKey's template; nil without one.
	runKey *keytmpl.Template
	// required are the templates {input.F} of RequiredInput's fields, in its order.
	required []*keytmpl.Template
	steps    map[string]*stepDef
	order    []*stepDef // definition order
}

type stepDef struct {
	Step
	effectKey *keytmpl.Template
	keyRoots  templateRoots // what effectKey reads that needs decoding
	retry     RetryPolicy
	ancestors map[string]bool
}

// Validate reports every problem of the definition, each a *DefinitionError, joined with
// errors.Join; nil when the workflow can be registered.
func (w Workflow) Validate() error {
	_, err := compile(w)
	return err
}

// compile validates a workflow and prepares its templates. It reports every problem it
// finds, not only the first.
func compile(w Workflow) (*workflowDef, error) {
	var problems []error
	bad := func(step, field, format string, args ...any) {
		problems = append(problems, &DefinitionError{Workflow: w.Name, Step: step, Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	failed := func() error { return errors.Join(problems...) }
	if !workflowNameRE.MatchString(w.Name) {
		bad("", "name", "the name must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if len(w.Steps) == 0 {
		bad("", "steps", "it has no steps")
	}
	def := &workflowDef{Workflow: w, steps: map[string]*stepDef{}}
	if w.Entity != "" {
		t, err := keytmpl.Parse(w.Entity)
		if err != nil {
			bad("", "entity", "entity: %v", err)
		} else {
			for _, f := range t.Fields() {
				if !strings.HasPrefix(f, "input.") && f != "run.key" {
					bad("", "entity", "entity template reads {%s}; it may read only {input.…} and {run.key}", f)
				}
			}
			def.entity = t
		}
	}
	if w.RunKey != "" {
		t, err := keytmpl.Parse(w.RunKey)
		if err != nil {
			bad("", "run_key", "run key: %v", err)
		} else {
			for _, f := range t.Fields() {
				if !strings.HasPrefix(f, "input.") {
					bad("", "run_key", "run key template reads {%s}; it may read only {input.…}", f)
				}
			}
			def.runKey = t
		}
	}
	for _, f := range w.RequiredInput {
		t, err := keytmpl.Parse("{input." + f + "}")
		if err != nil || f == "" {
			bad("", "required_input", "required input %q is not a dotted field path", f)
			continue
		}
		def.required = append(def.required, t)
	}
	w.Access.check(func(field, format string, args ...any) { bad("", field, format, args...) })
	for _, f := range w.Redact {
		if redact.CheckField(f) != nil {
			bad("", "redact", "redact field %q is not a dotted field path such as customer.email", f)
		}
	}
	for _, s := range w.Steps {
		if !stepIDRE.MatchString(s.ID) {
			bad(s.ID, "id", "the step ID must be 1-100 letters, digits, '_' or '-', starting with a letter or digit")
			continue
		}
		if _, dup := def.steps[s.ID]; dup {
			bad(s.ID, "id", "the step ID is used twice")
			continue
		}
		if s.Do == nil {
			bad(s.ID, "do", "Do is nil; every step needs a function")
		}
		switch s.OnFailure {
		case "", Review, Fail:
		default:
			bad(s.ID, "on_failure", "OnFailure %q is not %q or %q", s.OnFailure, Review, Fail)
		}
		switch s.OnUnknown {
		case "", RetrySameKey, ReviewUnknown:
		default:
			bad(s.ID, "on_unknown", "OnUnknown %q is not %q or %q", s.OnUnknown, RetrySameKey, ReviewUnknown)
		}
		if s.Retry.MaxAttempts < 0 || s.Retry.Initial < 0 || s.Retry.Max < 0 || s.Retry.Multiplier < 0 || s.Retry.MaxRetryAfter < 0 {
			bad(s.ID, "retry", "retry policy values must not be negative")
		}
		if s.Delay < 0 {
			bad(s.ID, "delay", "Delay must not be negative")
		}
		if s.Retention < 0 {
			bad(s.ID, "retention", "Retention must not be negative; 0 keeps the effect key forever")
		}
		src := s.EffectKey
		if src == "" {
			src = defaultEffectKey
		}
		t, err := keytmpl.Parse(src)
		if err != nil {
			bad(s.ID, "effect_key", "effect key: %v", err)
			t, _ = keytmpl.Parse(defaultEffectKey)
		}
		sd := &stepDef{Step: s, effectKey: t, keyRoots: rootsOf(t), retry: s.Retry.withDefaults()}
		if sd.OnFailure == "" {
			sd.OnFailure = Review
		}
		if sd.OnUnknown == "" {
			sd.OnUnknown = RetrySameKey
		}
		if sd.Timeout <= 0 {
			sd.Timeout = 5 * time.Minute
		}
		def.steps[s.ID] = sd
		def.order = append(def.order, sd)
	}
	for _, sd := range def.order {
		seen := map[string]bool{}
		for _, n := range sd.Needs {
			if _, ok := def.steps[n]; !ok {
				bad(sd.ID, "needs", "needs %q, which is not a step of this workflow", n)
			} else if seen[n] {
				bad(sd.ID, "needs", "needs %q twice", n)
			}
			seen[n] = true
		}
	}
	if len(problems) > 0 {
		return nil, failed()
	}
	// Ancestors, with cycle detection.
	const (
		visiting = 1
		done     = 2
	)
	mark := map[string]int{}
	var visit func(id string, path []string) bool
	visit = func(id string, path []string) bool {
		switch mark[id] {
		case visiting:
			bad(id, "needs", "its needs form a cycle: %s", strings.Join(append(path, id), " → "))
			return false
		case done:
			return true
		}
		mark[id] = visiting
		sd := def.steps[id]
		sd.ancestors = map[string]bool{}
		for _, n := range sd.Needs {
			if !visit(n, append(path, id)) {
				return false
			}
			sd.ancestors[n] = true
			for a := range def.steps[n].ancestors {
				sd.ancestors[a] = true
			}
		}
		mark[id] = done
		return true
	}
	for _, sd := range def.order {
		if !visit(sd.ID, nil) {
			return nil, failed()
		}
	}
	for _, sd := range def.order {
		for _, f := range sd.effectKey.Fields() {
			seg := strings.Split(f, ".")
			switch {
			case seg[0] == "input" && len(seg) > 1:
			case f == "run.key", f == "run.id", f == "workflow", f == "step":
			case seg[0] == "steps" && len(seg) >= 4 && seg[2] == "output":
				if !sd.ancestors[seg[1]] {
					bad(sd.ID, "effect_key", "effect key reads {%s}, but %q is not a step it needs (directly or through others)", f, seg[1])
				}
			default:
				bad(sd.ID, "effect_key", "effect key reads {%s}; it may read {input.…}, {run.key}, {run.id}, {workflow}, {step} and {steps.ID.output.…}", f)
			}
		}
	}
	if len(problems) > 0 {
		return nil, failed()
	}
	return def, nil
}
