// Package flowfile reads workflow definitions from YAML files and checks them, reporting
// every problem as "file:line:col: message" so that an operator can fix a file in one pass.
//
// A file describes one workflow:
//
//	name: website-lead
//	run_key: "{input.submission_id}"
//	entity: "lead:{input.submission_id}"
//	input:
//	  required: [submission_id, email]
//	steps:
//	  - id: crm
//	    kind: http
//	    effect_key: "lead-create:{input.submission_id}"
//	    http:
//	      url: "{env.CRM_URL}/leads"
//	      body: {email: "{input.email}"}
//	  - id: welcome
//	    kind: email
//	    needs: [crm]
//	    effect_key: "welcome-email:{input.submission_id}"
//	    email: {to: "{input.email}", subject: "Welcome", body: "Hello {input.name}"}
//
// A Reader reads files against a registry of step kinds (package steps; stdsteps.New holds
// the standard ones): a step's kind is one of the registry's, and the field of the same
// name holds its settings, which the kind decodes and checks. A Builder turns checked
// definitions into onceflow.Workflow values whose steps the kinds build. Its triggers —
// a webhook:, queue: or schedule: block at the top of the file — belong to the trigger
// kinds of the Reader's other registry (package triggers; stdtriggers holds the standard
// ones), which decode and check them; Triggers builds them.
package flowfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/triggers"
)

// Problem is one thing wrong with a file, at a position (line and column from 1; 0 when
// the problem concerns the whole file).
type Problem struct {
	File      string
	Line, Col int
	Message   string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Message)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Message)
}

// Problems is every problem found, in file and position order.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Duration is a time.Duration written in onceflow's one duration syntax, the same as the
// command's flags: "250ms", "30s", "30m", "36h", "1h30m", "90d", "2w", "1d12h".
type Duration = block.Duration

// parseDuration reads a duration of a workflow file (see internal/duration).
func parseDuration(s string) (time.Duration, error) {
	return duration.Parse(s)
}

// Definition is one workflow file.
type Definition struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// RunKey derives the run key from a request body when the caller sends no
	// Idempotency-Key. It may read {input.…}.
	RunKey string    `yaml:"run_key"`
	Entity string    `yaml:"entity"`
	Input  InputDef  `yaml:"input"`
	Steps  []StepDef `yaml:"steps"`
	// Redact lists paths of personal data in the input and step outputs ("email",
	// "customer.name") masked in logs, audit details, attempt records and API answers
	// (see onceflow.Redaction).
	Redact []string `yaml:"redact"`
	// Secrets names environment variables whose values are secrets, in addition to those
	// secret by their name or use (see SecretNames).
	Secrets []string `yaml:"secrets"`
	// Notify alerts people when the workflow's steps wait for review (see NotifyDef).
	Notify *NotifyDef `yaml:"notify"`
	// Limits bound the requests sent to hosts (see LimitDef).
	Limits []LimitDef `yaml:"limits"`
	// API says which API tokens may start the workflow (see APIDef).
	API *APIDef `yaml:"api"`
	// Triggers are the trigger blocks the file sets (webhook:, queue:, schedule:), in the
	// registry's order, each decoded by its kind.
	Triggers []TriggerDef `yaml:"-"`

	file        string
	ast         *ast.File
	kinds       *steps.Registry
	notifyUses  []use // what the workflow's notify channels reported
	triggerUses []use // what the triggers' walks reported
}

// TriggerDef is one trigger block of a file: its kind, and the settings it decoded.
type TriggerDef struct {
	kind   triggers.Kind
	Config triggers.Config
}

// Kind is the trigger kind the block belongs to.
func (t TriggerDef) Kind() triggers.Kind { return t.kind }

// Trigger returns the settings of the trigger block named block ("queue"), if the file sets
// it.
func (d *Definition) Trigger(block string) (triggers.Config, bool) {
	for _, t := range d.Triggers {
		if t.kind.Spec().Block == block {
			return t.Config, true
		}
	}
	return nil, false
}

// File returns the path the definition was read from.
func (d *Definition) File() string { return d.file }

// InputDef lists what a run's input must contain.
type InputDef struct {
	Required []string `yaml:"required"`
}

// StepDef is one step.
type StepDef struct {
	ID          string    `yaml:"id"`
	Kind        string    `yaml:"kind"`
	EffectKey   string    `yaml:"effect_key"`
	Needs       []string  `yaml:"needs"`
	When        string    `yaml:"when"`
	Retry       *RetryDef `yaml:"retry"`
	OnExhausted string    `yaml:"on_exhausted"`
	OnUnknown   string    `yaml:"on_unknown"`
	Retention   string    `yaml:"retention"`
	Timeout     Duration  `yaml:"timeout"`
	// Delay makes the step wait after the steps it needs ("24h"); NotBefore until a time
	// from the input or an earlier output ("{input.appointment_at} - 24h").
	Delay     string `yaml:"delay"`
	NotBefore string `yaml:"not_before"`

	// Config holds the settings of the step's kind, from the field the kind names (http:,
	// email:, func:, …); nil when the kind is not registered or the step lacks the field.
	Config steps.Config `yaml:"-"`

	// Notify overrides the workflow's notify block for this step.
	Notify *NotifyDef `yaml:"notify"`
	// Limits bound this step's own requests (see LimitDef; no host), for kinds that take
	// limits (http).
	Limits *LimitDef `yaml:"limits"`

	blocks     []stepBlock // the registered kinds' blocks the step sets, in registry order
	uses       []use       // what the kind's Walk reported, recorded by check
	notifyUses []use       // what the step's notify channels reported
}

// RetryDef is a retry policy.
type RetryDef struct {
	MaxAttempts int      `yaml:"max_attempts"`
	Initial     Duration `yaml:"initial"`
	Max         Duration `yaml:"max"`
	Multiplier  float64  `yaml:"multiplier"`
	// MaxRetryAfter is the longest Retry-After honoured (onceflow.RetryPolicy's).
	MaxRetryAfter Duration `yaml:"max_retry_after"`
}

// policy is the retry policy r writes; nil is the default policy.
func (r *RetryDef) policy() onceflow.RetryPolicy {
	if r == nil {
		return onceflow.RetryPolicy{}
	}
	return onceflow.RetryPolicy{MaxAttempts: r.MaxAttempts, Initial: time.Duration(r.Initial), Max: time.Duration(r.Max),
		Multiplier: r.Multiplier, MaxRetryAfter: time.Duration(r.MaxRetryAfter)}
}

// LoadDir reads every *.yaml and *.yml file of dir, in name order.
func (r *Reader) LoadDir(dir string) ([]*Definition, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("workflows directory %s: %w", dir, err)
		}
		return nil, fmt.Errorf("workflows directory %s has no .yaml or .yml files", dir)
	}
	sort.Strings(files)
	return r.LoadFiles(files...)
}

// LoadFiles reads and checks files; the error is Problems listing everything wrong in all
// of them (including two files naming the same workflow or webhook).
func (r *Reader) LoadFiles(files ...string) ([]*Definition, error) {
	var defs []*Definition
	var all Problems
	for _, f := range files {
		src, p := readFile(f)
		if p != nil {
			all = append(all, *p)
			continue
		}
		d, ps := r.Parse(f, src)
		all = append(all, ps...)
		if d != nil {
			defs = append(defs, d)
		}
	}
	names, unique := map[string]string{}, map[string]string{}
	for _, d := range defs {
		if prev, ok := names[d.Name]; ok && d.Name != "" {
			all = append(all, d.problemAt("$.name", "workflow %q is also defined in %s", d.Name, prev))
		}
		names[d.Name] = d.file
		// Names that must be unique across the files: a webhook's path, a schedule's name.
		for _, t := range d.Triggers {
			u, ok := t.Config.(triggers.Unique)
			spec := t.kind.Spec()
			if !ok || spec.Unique == "" {
				continue
			}
			name, path := u.UniqueName()
			if name == "" {
				continue
			}
			key := spec.Block + "\x00" + name
			if prev, ok := unique[key]; ok {
				all = append(all, d.problemAt(block.Join("$."+spec.Block, path), spec.Unique, name, prev))
			}
			unique[key] = d.file
		}
	}
	if len(all) > 0 {
		return nil, all
	}
	return defs, nil
}

// Parse reads one file's source. It returns the definition (nil if the YAML could not be
// decoded) and every problem found. A source larger than MaxFileSize, or nested deeper
// than MaxDepth, is refused before the YAML parser builds its tree, and one whose aliases
// expand past MaxNodes before it is decoded.
func (r *Reader) Parse(file string, src []byte) (*Definition, Problems) {
	tokens, p := tokenize(file, src)
	if p != nil {
		return nil, Problems{*p}
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		return nil, Problems{yamlProblem(file, err, r.kinds(), r.triggers())}
	}
	if p := checkNodes(file, f); p != nil {
		return nil, Problems{*p}
	}
	kinds, trigs := r.kinds(), r.triggers()
	d := &Definition{file: file, ast: f, kinds: kinds}
	if err := decodeStrict(src, d, newDecodeState(kinds, trigs)); err != nil {
		return nil, Problems{yamlProblem(file, err, kinds, trigs)}
	}
	// An empty document (an empty file, only comments) decodes as null, which zeroes d.
	d.file, d.ast, d.kinds = file, f, kinds
	ps := d.check()
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Line != ps[j].Line {
			return ps[i].Line < ps[j].Line
		}
		return ps[i].Col < ps[j].Col
	})
	if len(ps) > 0 {
		return d, ps
	}
	return d, nil
}

// decodeStrict decodes src into d, refusing unknown fields. checkNodes keeps the shapes
// known to crash the YAML decoder away from it; a panic on any other shape is still
// reported as a problem with the file, because a file on disk must never take down the
// process that loads or reloads it.
func decodeStrict(src []byte, d *Definition, st *decodeState) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("this file could not be decoded (the YAML decoder failed: %v); look for unusual YAML constructs such as tags, complex keys or merge keys", r)
		}
	}()
	return yaml.UnmarshalContext(context.WithValue(context.Background(), decodeKey{}, st), src, d, yaml.Strict())
}

func yamlProblem(file string, err error, kinds *steps.Registry, trigs *triggers.Registry) Problem {
	var ve *block.ValueError
	if errors.As(err, &ve) {
		return Problem{File: file, Line: ve.Line, Col: ve.Column, Message: ve.Message}
	}
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		pos := ye.GetToken().Position
		return Problem{File: file, Line: pos.Line, Col: pos.Column, Message: connectionHint(ye.GetMessage(), kinds, trigs)}
	}
	return Problem{File: file, Message: err.Error()}
}

// connectionFieldRE matches the decoder's refusal of a field that would put a connection
// setting in the file.
var connectionFieldRE = regexp.MustCompile(`^unknown field "(url|uri|dsn|servers?|password)"$`)

// connectionHint adds to the refusal of a connection setting where such settings come
// from: each trigger kind's and each step kind's that says.
func connectionHint(msg string, kinds *steps.Registry, trigs *triggers.Registry) string {
	if !connectionFieldRE.MatchString(msg) {
		return msg
	}
	var hints []string
	for _, k := range trigs.Kinds() {
		if h := k.Spec().ConnectionHint; h != "" {
			hints = append(hints, h)
		}
	}
	for _, k := range kinds.Kinds() {
		if h := k.Spec().ConnectionHint; h != "" {
			hints = append(hints, h)
		}
	}
	return msg + ": connection settings come from the environment, never the file (" + strings.Join(hints, "; ") + ")"
}

// problemAt places a problem at the node a YAML path names, or at the nearest parent that
// exists.
func (d *Definition) problemAt(path string, format string, args ...any) Problem {
	p := Problem{File: d.file, Message: fmt.Sprintf(format, args...)}
	for path != "" {
		yp, err := yaml.PathString(path)
		if err == nil {
			if n, err := yp.FilterFile(d.ast); err == nil && n != nil && n.GetToken() != nil {
				p.Line, p.Col = n.GetToken().Position.Line, n.GetToken().Position.Column
				return p
			}
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			break
		}
		path = path[:i]
	}
	return p
}

var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// check validates what the YAML schema cannot express.
func (d *Definition) check() Problems {
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	if d.Name == "" {
		add("$", "name is required")
	}
	checkTemplate := func(path, src string, allowed func(field string) bool, hint string) {
		t, err := keytmpl.Parse(src)
		if err != nil {
			add(path, "%v", err)
			return
		}
		for _, f := range t.Fields() {
			if !allowed(f) {
				add(path, "{%s}: %s", f, hint)
			}
		}
	}
	inputOnly := func(f string) bool { return strings.HasPrefix(f, "input.") }
	if d.RunKey != "" {
		checkTemplate("$.run_key", d.RunKey, inputOnly, "run_key may read only {input.…}")
	}
	ps = append(ps, d.checkTriggers()...)
	for i := range d.Steps {
		ps = append(ps, d.checkStep(i, &d.Steps[i])...)
		ps = append(ps, d.checkDelay(i, d.Steps[i])...)
	}
	ps = append(ps, d.checkAPI()...)
	ps = append(ps, d.checkNotify()...)
	ps = append(ps, d.checkSecrets()...)
	ps = append(ps, d.checkRefs()...)
	ps = append(ps, d.checkLimits()...)
	// The engine's own rules (IDs, needs, cycles, key templates), placed at their fields.
	wf, err := d.skeleton()
	if err == nil {
		err = wf.Validate()
	}
	if err != nil {
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			var de *onceflow.DefinitionError
			if !errors.As(e, &de) {
				add("$", "%v", e)
				continue
			}
			if de.Field == "access" || de.Field == "run_key" {
				continue // checkAPI checks the api block, and check the run_key, each problem at its token
			}
			if de.Step == "" {
				add("$."+yamlField(de.Field), "%s", de.Problem)
				continue
			}
			idx := d.stepIndex(de.Step)
			add(fmt.Sprintf("$.steps[%d].%s", idx, yamlField(de.Field)), "step %q: %s", de.Step, de.Problem)
		}
	}
	return dedupe(ps)
}

// yamlField maps an engine field name to the file's.
func yamlField(f string) string {
	switch f {
	case "required_input":
		return "input.required"
	case "on_failure":
		return "on_exhausted"
	case "do":
		return "kind"
	}
	return f
}

func (d *Definition) stepIndex(id string) int {
	for i, s := range d.Steps {
		if s.ID == id {
			return i
		}
	}
	return 0
}

func dedupe(ps Problems) Problems {
	seen := map[string]bool{}
	var out Problems
	for _, p := range ps {
		if k := p.String(); !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}

// checkTriggers runs each trigger's walk over its block, recording the environment
// variables it names.
func (d *Definition) checkTriggers() Problems {
	var ps Problems
	for _, t := range d.Triggers {
		w := &walker{d: d, base: "$." + t.kind.Spec().Block, ps: &ps, uses: &d.triggerUses}
		t.Config.Walk(w)
	}
	return ps
}

func (d *Definition) checkStep(i int, s *StepDef) Problems {
	var ps Problems
	at := func(field string) string {
		if field == "" {
			return fmt.Sprintf("$.steps[%d]", i)
		}
		return fmt.Sprintf("$.steps[%d].%s", i, field)
	}
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	kinds := d.registry()
	switch k, ok := kinds.Lookup(s.Kind); {
	case ok:
		own := k.Spec().BlockName()
		for _, b := range s.blocks {
			if field := b.kind.Spec().BlockName(); field != own {
				add(at(field), "step %q is of kind %s; remove its %s settings", s.ID, s.Kind, field)
			}
		}
		if s.Config == nil {
			add(at("kind"), "step %q of kind %s needs its %s settings", s.ID, s.Kind, own)
		}
	case s.Kind == "":
		add(at(""), "step %q: kind is required (%s)", s.ID, kinds.Names("or"))
	default:
		add(at("kind"), "step %q: kind %q is not %s", s.ID, s.Kind, kinds.Names("or"))
	}
	if s.Config != nil {
		k, _ := kinds.Lookup(s.Kind)
		w := &walker{d: d, base: at(k.Spec().BlockName()), prefix: fmt.Sprintf("step %q: ", s.ID), ps: &ps, uses: &s.uses}
		s.uses = nil
		s.Config.Walk(w)
	}
	switch s.OnExhausted {
	case "", "needs_review", "fail":
	default:
		add(at("on_exhausted"), "step %q: on_exhausted %q is not needs_review or fail", s.ID, s.OnExhausted)
	}
	switch s.OnUnknown {
	case "", "retry", "needs_review":
	default:
		add(at("on_unknown"), "step %q: on_unknown %q is not retry or needs_review", s.ID, s.OnUnknown)
	}
	if s.Retention != "" && s.Retention != "forever" {
		if d, err := parseDuration(s.Retention); err != nil || d <= 0 {
			add(at("retention"), "step %q: retention %q is not forever or a positive duration such as 90d", s.ID, s.Retention)
		}
	}
	if s.Retry != nil && (s.Retry.MaxAttempts < 0 || s.Retry.Multiplier < 0 || (s.Retry.Multiplier > 0 && s.Retry.Multiplier < 1)) {
		add(at("retry"), "step %q: max_attempts must be positive and multiplier at least 1", s.ID)
	}
	if s.When != "" {
		if _, err := compileWhen(s.When); err != nil {
			add(at("when"), "step %q: when: %v", s.ID, err)
		}
	}
	return ps
}

// registry is the registry the definition was read against.
func (d *Definition) registry() *steps.Registry {
	if d.kinds == nil {
		d.kinds = steps.NewRegistry()
	}
	return d.kinds
}
