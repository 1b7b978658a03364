// Package steptest is the conformance suite every step kind passes: given a kind and a
// destination the test controls, Exercise checks the kind's Spec and runs a one-step
// workflow of it on a real SQLite database and a real Client, through each outcome class
// the destination can be made to give — success, retryable, permanent, unknown — and checks
// that every attempt of a step carries the same idempotency identity, the one the kind
// derives from the step's effect key.
//
// A kind's package calls it from a test, with a setup that returns a Harness for a fresh
// destination:
//
//	func TestConformance(t *testing.T) {
//		steptest.Exercise(t, func(t *testing.T) steptest.Harness {
//			dest := newFakeCRM(t) // an httptest server whose answers the test chooses
//			return steptest.Harness{
//				Kind:       &crmKind{base: dest.URL, client: dest.Client()},
//				Block:      "object: lead\nexternal_id: \"{input.id}\"\n",
//				Arrange:    dest.next,    // the next request ends as the class asked
//				Identities: dest.keys,    // the Idempotency-Key of every request seen
//			}
//		})
//	}
//
// What each check means:
//
//   - spec: the kind registers (a valid name and block), its example step reads without a
//     problem, and its schema lists exactly the fields of its Settings type;
//   - success: the step completes;
//   - retryable: the step is retried, and the next attempt completes it;
//   - permanent: the step waits for review;
//   - unknown: the step does what the kind's OnUnknown says — waits for review
//     (onceflow.ReviewUnknown), or is retried under the same key and completes;
//   - identity: every request the destination saw for a step carries the identity the kind
//     derives from its effect key, on every attempt (a completed step's at least one);
//   - broken: a block with a mistake is reported inside the block;
//   - close: closing the kind's registry twice is fine.
//
// An outcome the destination cannot be made to give (a transition has no unknown outcome)
// is skipped when Arrange says so.
package steptest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Outcome is a class of outcome an attempt can end in.
type Outcome string

// The outcome classes of an attempt.
const (
	Success   Outcome = "success"
	Retryable Outcome = "retryable"
	Permanent Outcome = "permanent"
	Unknown   Outcome = "unknown"
)

// Harness is a kind under test and a destination the test controls.
type Harness struct {
	// Kind is the kind, holding what its steps share (a client, a connection).
	Kind steps.Kind
	// Block is the value of a step's block, in YAML, pointing at the destination: a
	// mapping ("url: …\nbody: …"), or a scalar for a kind whose block is one.
	Block string
	// Env is the environment the step is built with ({env.NAME}, connection settings).
	Env map[string]string
	// Arrange makes the next attempt end as o. It returns false when the destination
	// cannot give that outcome; the check is then skipped.
	Arrange func(t *testing.T, o Outcome) bool
	// Identities returns the idempotency identity of every request the destination has
	// seen, in order: the Idempotency-Key header, the Message-ID, the Nats-Msg-Id.
	Identities func(t *testing.T) []string
	// Identity is the identity the kind derives from an effect key; nil: the effect key
	// itself.
	Identity func(effectKey string) string
	// Broken is a block with a mistake the kind's Walk reports; "" skips the check.
	Broken string
}

// Exercise runs the conformance checks, each in a subtest with a Harness of its own from
// setup.
func Exercise(t *testing.T, setup func(t *testing.T) Harness) {
	t.Helper()
	t.Run("spec", func(t *testing.T) { checkSpec(t, setup(t)) })
	t.Run("success", func(t *testing.T) {
		b := newBench(t, setup(t))
		b.arrange(Success)
		b.want(b.run(), onceflow.StateCompleted)
	})
	t.Run("retryable", func(t *testing.T) {
		b := newBench(t, setup(t))
		b.arrange(Retryable)
		r := b.start()
		b.work()
		b.want(r, onceflow.StateRetrying)
		b.arrange(Success)
		b.work()
		b.want(r, onceflow.StateCompleted)
	})
	t.Run("permanent", func(t *testing.T) {
		b := newBench(t, setup(t))
		b.arrange(Permanent)
		b.want(b.run(), onceflow.StateNeedsReview)
	})
	t.Run("unknown", func(t *testing.T) {
		b := newBench(t, setup(t))
		b.arrange(Unknown)
		r := b.start()
		b.work()
		if b.onUnknown == onceflow.ReviewUnknown {
			s := b.want(r, onceflow.StateNeedsReview)
			if s.Reason != onceflow.ReasonOutcomeUnknown {
				t.Errorf("an unknown outcome waits for review with reason %q, want outcome_unknown", s.Reason)
			}
			return
		}
		b.want(r, onceflow.StateRetrying)
		b.arrange(Success)
		b.work()
		b.want(r, onceflow.StateCompleted)
	})
	t.Run("broken", func(t *testing.T) {
		h := setup(t)
		if h.Broken == "" {
			t.Skip("the harness gives no broken block")
		}
		kinds := registry(t, h.Kind)
		src := workflowFile(h.Kind.Spec(), h.Broken)
		_, ps := (&flowfile.Reader{Kinds: kinds}).Parse("broken.yaml", []byte(src))
		if len(ps) == 0 {
			t.Fatalf("a broken block read without a problem:\n%s", src)
		}
		first, last := blockLines(src)
		for _, p := range ps {
			if p.Line < first || p.Line > last {
				t.Errorf("problem %s is outside the block (lines %d to %d)", p, first, last)
			}
		}
	})
	t.Run("close", func(t *testing.T) {
		r := registry(t, setup(t).Kind)
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("a second Close: %v", err)
		}
	})
}

// registry holds the kind alone, closed when the test ends.
func registry(t *testing.T, k steps.Kind) *steps.Registry {
	t.Helper()
	r := steps.NewRegistry()
	if err := r.Add(k); err != nil {
		t.Fatalf("the kind does not register: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func checkSpec(t *testing.T, h Harness) {
	kinds := registry(t, h.Kind)
	spec := h.Kind.Spec()
	if spec.Summary == "" || spec.Doc == "" {
		t.Errorf("kind %s: its Spec has no Summary or Doc", spec.Name)
	}
	if strings.TrimSpace(spec.Example) == "" {
		t.Errorf("kind %s: its Spec has no Example", spec.Name)
	} else {
		src := "name: example\nsteps:\n" + indent(spec.Example, "  ")
		if _, ps := (&flowfile.Reader{Kinds: kinds}).Parse("example.yaml", []byte(src)); ps != nil {
			t.Errorf("kind %s: its example reads with problems:\n%s\n%v", spec.Name, src, ps)
		}
	}
	if spec.Settings == nil {
		t.Errorf("kind %s: its Spec names no Settings type", spec.Name)
		return
	}
	var schema map[string]any
	if err := json.Unmarshal(spec.Schema, &schema); err != nil {
		t.Fatalf("kind %s: its schema is not JSON: %v", spec.Name, err)
	}
	typ := spec.Settings
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		if want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer"}[typ.Kind()]; schema["type"] != want {
			t.Errorf("kind %s: its settings are a %s, its schema a %v", spec.Name, typ, schema["type"])
		}
		return
	}
	fields := yamlFields(typ)
	props := schemaProperties(schema, spec.Defs)
	for _, f := range fields {
		if !slices.Contains(props, f) {
			t.Errorf("kind %s: the field %s of its settings is not in its schema", spec.Name, f)
		}
	}
	for _, p := range props {
		if !slices.Contains(fields, p) {
			t.Errorf("kind %s: its schema lists %s, which its settings do not decode", spec.Name, p)
		}
	}
}

// yamlFields lists the YAML names of typ's exported fields, inline fields' included.
func yamlFields(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case strings.Contains(opts, "inline"):
			out = append(out, yamlFields(f.Type)...)
			continue
		case name == "-":
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// schemaProperties lists the properties a schema declares, following its $ref to the
// kind's own definitions.
func schemaProperties(schema map[string]any, defs map[string]json.RawMessage) []string {
	set := map[string]bool{}
	for node := schema; node != nil; {
		props, _ := node["properties"].(map[string]any)
		for k := range props {
			set[k] = true
		}
		ref, _ := node["$ref"].(string)
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		if !ok || defs[name] == nil {
			break
		}
		node = nil
		_ = json.Unmarshal(defs[name], &node)
	}
	return slices.Sorted(maps.Keys(set))
}

// workflowFile is a one-step workflow of the kind with block as its settings.
func workflowFile(spec steps.Spec, block string) string {
	return "name: conformance\nsteps:\n  - id: act\n    kind: " + spec.Name +
		"\n    effect_key: \"conformance:{input.id}\"\n    retry: {max_attempts: 5, initial: 1s, max: 1s}\n    " +
		spec.BlockName() + ":\n" + indent(block, "      ")
}

// blockLines are the first and last lines of the block in a workflowFile.
func blockLines(src string) (first, last int) {
	lines := strings.Split(strings.TrimRight(src, "\n"), "\n")
	return 7, len(lines)
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// bench runs a one-step workflow of the kind on a client of its own, on a clock the
// bench moves, so that retries are due at once.
type bench struct {
	t         *testing.T
	h         Harness
	client    *onceflow.Client
	key       string
	onUnknown onceflow.UnknownAction

	mu  sync.Mutex
	now time.Time
}

func newBench(t *testing.T, h Harness) *bench {
	t.Helper()
	kinds := registry(t, h.Kind)
	src := workflowFile(h.Kind.Spec(), h.Block)
	d, ps := (&flowfile.Reader{Kinds: kinds}).Parse("conformance.yaml", []byte(src))
	if ps != nil {
		t.Fatalf("the harness's block reads with problems:\n%s\n%v", src, ps)
	}
	env := func(k string) (string, bool) { v, ok := h.Env[k]; return v, ok }
	ws, err := flowfile.NewBuilder(flowfile.BuildOptions{Env: env}).Workflows([]*flowfile.Definition{d})
	if err != nil {
		t.Fatalf("the harness's step does not build: %v", err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := &bench{t: t, h: h, now: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), onUnknown: ws[0].Steps[0].OnUnknown}
	b.client, err = onceflow.New(onceflow.Config{Store: st, WorkerID: "steptest", Clock: b.clock, ClockSync: -1, LeaseFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.client.Register(ws[0]); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bench) clock() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.now
}

func (b *bench) arrange(o Outcome) {
	b.t.Helper()
	if !b.h.Arrange(b.t, o) {
		b.t.Skipf("the destination cannot give the outcome %s", o)
	}
}

// start starts a run under a key of the test's own.
func (b *bench) start() int64 {
	b.t.Helper()
	id := fmt.Sprintf("%s-%d", strings.ReplaceAll(b.t.Name(), "/", "-"), time.Now().UnixNano())
	b.key = "conformance:" + id
	r, err := b.client.Start(context.Background(), "conformance", id, map[string]any{"id": id})
	if err != nil {
		b.t.Fatal(err)
	}
	return r.ID
}

// work runs the due attempts, then moves the clock past any retry delay.
func (b *bench) work() {
	b.t.Helper()
	if _, err := b.client.Work(context.Background()); err != nil {
		b.t.Fatal(err)
	}
	b.mu.Lock()
	b.now = b.now.Add(time.Minute)
	b.mu.Unlock()
}

func (b *bench) run() int64 {
	r := b.start()
	b.work()
	return r
}

// want checks the run's step's state, and that every request the destination saw for it
// carried the step's identity.
func (b *bench) want(run int64, state onceflow.State) *onceflow.StepInfo {
	b.t.Helper()
	d, err := b.client.RunGet(context.Background(), run)
	if err != nil {
		b.t.Fatal(err)
	}
	s := d.Steps[0]
	if s.State != state {
		b.t.Fatalf("the step is %s (reason %q, last error %q), want %s", s.State, s.Reason, s.LastError, state)
	}
	if s.EffectKey != b.key {
		b.t.Fatalf("the step's effect key is %q, want %q", s.EffectKey, b.key)
	}
	want := b.key
	if b.h.Identity != nil {
		want = b.h.Identity(b.key)
	}
	seen := b.h.Identities(b.t)
	if len(seen) == 0 && state == onceflow.StateCompleted {
		// A destination that refused a request may keep no trace of it; one that applied
		// it must.
		b.t.Fatalf("the step completed, but the destination saw no request of it")
	}
	for i, id := range seen {
		if id != want {
			b.t.Errorf("request %d of %d carried the identity %q, want %q (the same on every attempt)", i+1, len(seen), id, want)
		}
	}
	return s
}
