package flowfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser/lexer"
	"github.com/expr-lang/expr/vm"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/limit"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/store"
)

// BuildOptions configure a Builder.
type BuildOptions struct {
	// Store shares the limits of limits: blocks with the other processes on the database
	// when it can (PostgreSQL's advisory slots); nil keeps them in this process.
	Store store.Store
	// Owner names this process in shared limit slots (default host name and process id).
	Owner string
	// Redact lists paths of personal data masked in every workflow (onceflow.Redaction's
	// Fields); steps mask them, and the workflow's own, in what they store of a response.
	Redact []string
	// Env looks up {env.NAME} values (secrets come only from the environment); nil reads
	// none.
	Env func(name string) (string, bool)
	// HTTPClient fetches the lists schedules fan out over (for_each); it must enforce the
	// egress policy.
	HTTPClient *http.Client
}

// Builder turns checked definitions into workflows, notification channels and schedules.
// It holds the one limiter of the process — a host's limit holds for every workflow it
// builds, on every reload — so build once and keep it.
type Builder struct {
	limiter *limit.Limiter
	redact  []string
	env     func(string) (string, bool)
	client  *http.Client
}

// NewBuilder returns a builder.
func NewBuilder(o BuildOptions) *Builder {
	lo := limit.Options{Owner: o.Owner}
	if lo.Owner == "" {
		lo.Owner = processName()
	}
	if g, ok := o.Store.(limit.Gate); ok {
		lo.Gate = g
	}
	env := o.Env
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	return &Builder{limiter: limit.New(lo), redact: o.Redact, env: env, client: o.HTTPClient}
}

// processName names this process in shared limit slots: host and process id.
func processName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// placeholder stands in for step functions while a definition is only checked.
func placeholder(context.Context, *onceflow.StepContext) (any, error) {
	return nil, errors.New("not built")
}

// skeleton is the definition as an onceflow.Workflow with placeholder functions, for the
// engine's own checks.
func (d *Definition) skeleton() (onceflow.Workflow, error) {
	return d.workflow(func(int, StepDef) (onceflow.StepFunc, error) { return placeholder, nil })
}

// Workflows turns checked definitions into workflows ready to register, each step built
// by its kind, and declares the limits they set (limits:) on the builder's limiter.
func (b *Builder) Workflows(defs []*Definition) ([]onceflow.Workflow, error) {
	ws, declare, err := b.Pending(defs)
	if err != nil {
		return nil, err
	}
	declare()
	return ws, nil
}

// Pending builds defs as Workflows does, but declares their limits only when declare is
// called. A program that may still refuse the workflows once they are built — a reload
// whose definitions the client refuses — calls declare once they are in place, so that a
// refused reload leaves the limits as they were.
func (b *Builder) Pending(defs []*Definition) (ws []onceflow.Workflow, declare func(), err error) {
	var out []onceflow.Workflow
	ps := checkLimitConflicts(defs, b.limiter)
	for _, d := range defs {
		fields := append(append([]string(nil), b.redact...), d.Redact...)
		w, err := d.workflow(func(i int, s StepDef) (onceflow.StepFunc, error) {
			fn, err := b.stepFunc(d, s, fields)
			if err != nil {
				ps = append(ps, d.problemAt(fmt.Sprintf("$.steps[%d]", i), "step %q: %v", s.ID, err))
				return placeholder, nil
			}
			return fn, nil
		})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, w)
	}
	if len(ps) > 0 {
		return nil, nil, ps
	}
	return out, func() { registerLimits(defs, b.limiter) }, nil
}

// stepBuild is what the builder builds step s of d with.
func (b *Builder) stepBuild(d *Definition, s StepDef, fields []string) *steps.Build {
	sb := &steps.Build{Workflow: d.Name, Step: s.ID, Fields: fields, Env: b.env, Retry: s.Retry.policy()}
	if d.takesLimits(s) {
		sb.Limiter = b.limiter
		if s.Limits != nil {
			sb.LimitKeys = []string{limit.StepKey(d.Name, s.ID)}
		}
	}
	return sb
}

func (b *Builder) stepFunc(d *Definition, s StepDef, fields []string) (onceflow.StepFunc, error) {
	if s.Config == nil {
		return nil, fmt.Errorf("kind %q is not %s", s.Kind, d.registry().Names("or"))
	}
	return s.Config.Build(b.stepBuild(d, s, fields))
}

// workflow converts the definition, with step functions from fn.
func (d *Definition) workflow(fn func(int, StepDef) (onceflow.StepFunc, error)) (onceflow.Workflow, error) {
	w := onceflow.Workflow{Name: d.Name, Description: d.Description, File: d.file, RunKey: d.RunKey, Entity: d.Entity,
		RequiredInput: d.Input.Required, Redact: d.Redact, Access: d.access()}
	for i, s := range d.Steps {
		do, err := fn(i, s)
		if err != nil {
			return w, err
		}
		st := onceflow.Step{ID: s.ID, Needs: s.Needs, EffectKey: s.EffectKey, Do: do, Timeout: time.Duration(s.Timeout)}
		st.Retention = retentionOf(s.Retention)
		d.applyDelay(i, s, &st)
		st.Retry = s.Retry.policy()
		switch s.OnExhausted {
		case "fail":
			st.OnFailure = onceflow.Fail
		case "needs_review":
			st.OnFailure = onceflow.Review
		}
		switch s.OnUnknown {
		case "needs_review":
			st.OnUnknown = onceflow.ReviewUnknown
		case "retry":
			st.OnUnknown = onceflow.RetrySameKey
		case "":
			// A destination that cannot deduplicate, and cannot be asked, must not get a
			// second request on a guess: the kind says so.
			if s.Config != nil {
				st.OnUnknown = s.Config.OnUnknown()
			}
		}
		if s.When != "" {
			prog, err := compileWhen(s.When)
			if err == nil {
				st.When = whenFunc(prog)
			}
		}
		w.Steps = append(w.Steps, st)
	}
	return w, nil
}

// whenEnv is the shape of the data a condition reads.
var whenEnv = map[string]any{"input": map[string]any{}, "steps": map[string]any{}, "run": map[string]any{}, "workflow": "", "step": ""}

func compileWhen(src string) (*vm.Program, error) {
	if err := checkWhenNumbers(src); err != nil {
		return nil, err
	}
	return expr.Compile(src, expr.Env(whenEnv), expr.AsBool())
}

// checkWhenNumbers refuses a number literal that a condition would compare as another
// number: expr-lang reads a literal with a point or an exponent as a float64, so
// 9007199254740993.0 would be 9007199254740992 and true for that other id.
func checkWhenNumbers(src string) error {
	tokens, err := lexer.Lex(file.NewSource(src))
	if err != nil {
		return nil // expr.Compile reports it
	}
	for _, tok := range tokens {
		if tok.Kind != lexer.Number {
			continue
		}
		text := strings.ReplaceAll(tok.Value, "_", "")
		lower := strings.ToLower(text)
		if strings.HasPrefix(lower, "0x") || strings.HasPrefix(lower, "0o") || strings.HasPrefix(lower, "0b") || !strings.ContainsAny(lower, ".e") {
			continue // an integer: exact, or refused by expr-lang beyond int64
		}
		v, ok := keytmpl.NumberValue(json.Number(text))
		if i, isInt := v.(int64); isInt && (i > 1<<53 || i < -(1<<53)) {
			ok = false
		}
		if !ok {
			f, _ := strconv.ParseFloat(text, 64)
			return fmt.Errorf("the number %s cannot be compared exactly: as a floating-point number it is %s; write an integer without a point or exponent, or a decimal of at most 15 significant digits",
				tok.Value, strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return nil
}

// whenFunc evaluates a compiled condition against the run's data.
func whenFunc(prog *vm.Program) func(*onceflow.StepContext) (bool, error) {
	return func(sc *onceflow.StepContext) (bool, error) {
		data, err := sc.TemplateData()
		if err != nil {
			return false, err
		}
		var wide []string
		v, err := expr.Run(prog, plain(data, "", &wide))
		if err != nil {
			if len(wide) > 0 {
				return false, fmt.Errorf("when: %w (%s cannot be held as a number without rounding: a condition compares it only for equality, with == or !=)",
					err, strings.Join(wide, ", "))
			}
			return false, fmt.Errorf("when: %w", err)
		}
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Errorf("when: the condition gave %T, not a boolean", v)
		}
		return b, nil
	}
}

// wideNumber is a JSON number a condition cannot hold as a Go number without rounding —
// an integer beyond int64, a decimal with more digits than float64 keeps. It reaches the
// condition as its text: equal to the same number in another field, unequal to every
// other value, and an error when ordered (<, >) or computed with, never a rounded guess.
type wideNumber string

// plain turns the json.Number leaves of the run's data (keytmpl.Decode) into what a
// condition compares exactly: an int for an integer within int64 (whatever its
// notation), a float64 for a number float64 holds as written, and a wideNumber for the
// rest, whose paths it appends to wide.
func plain(v any, path string, wide *[]string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e, joinPath(path, k), wide)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e, joinPath(path, strconv.Itoa(i)), wide)
		}
		return out
	case json.Number:
		n, _ := keytmpl.NumberValue(x)
		switch n := n.(type) {
		case int64:
			return int(n)
		case float64:
			return n
		}
		text := x.String()
		if i, ok := new(big.Int).SetString(text, 10); ok {
			text = i.String()
		}
		*wide = append(*wide, path+" = "+x.String())
		return wideNumber(text)
	}
	return v
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// DeriveRunKey derives a run key from a request body with the run_key template.
func (d *Definition) DeriveRunKey(input []byte) (string, error) {
	if d.RunKey == "" {
		return "", errors.New("the workflow has no run_key template; send an Idempotency-Key header")
	}
	return renderInput(d.RunKey, input)
}

func renderInput(src string, input []byte) (string, error) {
	t, err := keytmpl.Parse(src)
	if err != nil {
		return "", err
	}
	tree, err := keytmpl.Decode(input)
	if err != nil {
		return "", fmt.Errorf("the body is not valid JSON: %w", err)
	}
	return t.Render(map[string]any{"input": tree})
}
