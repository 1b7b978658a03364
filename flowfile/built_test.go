package flowfile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/amqpstep"
	"github.com/onceflow/onceflow/steps/gostep"
	"github.com/onceflow/onceflow/steps/natsstep"
	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	tqueue "github.com/onceflow/onceflow/triggers/queue"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

var update = flag.Bool("update", false, "rewrite testdata/built/*.json from what the current code builds")

// TestBuiltWorkflowsUnchanged loads every workflow file of examples/ and every source the
// test suite parses (testdata/built/src, collected once from a run of the whole suite) and
// compares what the package makes of each — its problems, or the environment it reads,
// its secrets, the workflow and the spec each step kind receives, the limits, schedules,
// notification channels, trigger settings and access — with testdata/built/NAME.json. A
// difference is a change in what files mean: a bug, or a deliberate change made with
// -update in a commit of its own that says so.
func TestBuiltWorkflowsUnchanged(t *testing.T) {
	sources, err := filepath.Glob(filepath.Join("testdata", "built", "src", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) < 150 || len(examples) < 5 {
		t.Fatalf("%d sources and %d examples: the corpus is missing", len(sources), len(examples))
	}
	want := map[string]bool{}
	kinds := newDumpKinds(t)
	for _, path := range append(examples, sources...) {
		name := "src-" + strings.TrimSuffix(filepath.Base(path), ".yaml")
		if strings.HasPrefix(path, "..") {
			name = "example-" + strings.TrimSuffix(filepath.Base(path), ".yaml")
		}
		want[name+".json"] = true
		golden := filepath.Join("testdata", "built", name+".json")
		got := dumpJSON(t, builtDump(t, kinds, path))
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%s: %v (run go test ./flowfile -run TestBuiltWorkflowsUnchanged -update to write it)", path, err)
			continue
		}
		if !bytes.Equal(old, got) {
			t.Errorf("%s builds to something else than %s:\n%s", path, golden, lineDiff(string(old), string(got)))
		}
	}
	stale, _ := filepath.Glob(filepath.Join("testdata", "built", "*.json"))
	for _, f := range stale {
		if !want[filepath.Base(f)] {
			if *update {
				_ = os.Remove(f)
				continue
			}
			t.Errorf("%s has no source any more", f)
		}
	}
}

// The fixed environments of the dump: every variable is set to a value naming it (so
// that what is masked shows which variable it came from), except, when steps are built,
// the connection settings of the step kinds, which point at a closed port (connections
// are made on first use, so nothing connects).
func fakeEnv(name string) (string, bool) {
	return "value-" + name + "-s3cr3tToken42", true
}

// buildEnv is the environment the steps of d are built with: fakeEnv, but the variables
// its sql steps name hold a DSN.
func buildEnv(d *flowfile.Definition) func(string) (string, bool) {
	dsn := map[string]bool{}
	for _, s := range d.Steps {
		if c, ok := s.Config.(*sqlstep.Settings); ok {
			dsn[c.Database] = true
		}
	}
	return func(name string) (string, bool) {
		if dsn[name] {
			return "postgres://onceflow:s3cr3tToken42@127.0.0.1:1/" + strings.ToLower(name) + "?sslmode=disable", true
		}
		return connectionEnv(name)
	}
}

func connectionEnv(name string) (string, bool) {
	switch name {
	case "ONCEFLOW_SMTP_ADDR":
		return "127.0.0.1:1", true
	case natsstep.EnvURL:
		return "nats://127.0.0.1:1", true
	case amqpstep.EnvURL:
		return "amqp://guest:guest@127.0.0.1:1/", true
	}
	if strings.HasPrefix(name, "ONCEFLOW_SMTP_") {
		return "", false
	}
	return fakeEnv(name)
}

func emptyEnv(string) (string, bool) { return "", false }

// globalRedact stands for the --redact-fields of the process.
var globalRedact = []string{"customer.card"}

// dumpKinds are the kinds the files are read and built against: those the command builds,
// on a database and with an SMTP server. The Go functions a file names are registered
// once it is read.
type dumpKinds struct {
	st    *sqlite.Store
	kinds *steps.Registry
	funcs map[string]onceflow.StepFunc
}

func newDumpKinds(t *testing.T) *dumpKinds {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	funcs := map[string]onceflow.StepFunc{}
	kinds, err := stdsteps.New(stdsteps.Options{Store: st, Env: connectionEnv, Funcs: funcs})
	if err != nil {
		t.Fatalf("stdsteps: %v", err)
	}
	t.Cleanup(func() { _ = kinds.Close() })
	return &dumpKinds{st: st, kinds: kinds, funcs: funcs}
}

func builtDump(t *testing.T, k *dumpKinds, path string) map[string]any {
	t.Helper()
	out := map[string]any{}
	st, kinds, funcs := k.st, k.kinds, k.funcs
	trigs, err := stdtriggers.New()
	if err != nil {
		t.Fatal(err)
	}
	defs, err := (&flowfile.Reader{Kinds: kinds, Triggers: trigs}).LoadFiles(path)
	if err != nil {
		out["problems"] = problemStrings(err)
		return out
	}
	d := defs[0]
	out["env_names"] = d.EnvNames()
	out["secret_names"] = d.SecretNames()
	out["masked_values"] = d.MaskedValues(fakeEnv)
	out["check_env"] = problemStrings(d.CheckEnv(emptyEnv))
	out["file"] = map[string]any{"name": d.Name, "description": d.Description, "run_key": d.RunKey, "entity": d.Entity,
		"input": yamlValue(reflect.ValueOf(d.Input)), "redact": d.Redact, "secrets": d.Secrets, "api": yamlValue(reflect.ValueOf(d.API))}

	for _, s := range d.Steps {
		if c, ok := s.Config.(*gostep.Settings); ok {
			funcs[c.Func] = func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
		}
	}
	b := flowfile.NewBuilder(flowfile.BuildOptions{Store: st, Redact: globalRedact, Env: buildEnv(d),
		HTTPClient: (&egress.Policy{}).Client(0)})

	ws, err := b.Workflows(defs)
	if err != nil {
		out["build_problems"] = problemStrings(err)
		if ws, err = flowfile.Outline(defs); err != nil {
			t.Fatalf("%s: Outline: %v", path, err)
		}
	}
	w := ws[0]
	wf := map[string]any{"name": w.Name, "entity": w.Entity, "required_input": w.RequiredInput, "redact": w.Redact,
		"access": map[string]any{"internal": w.Access.Internal, "trigger": string(w.Access.Trigger), "api": w.Access.API, "tokens": w.Access.Tokens}}
	var steps []any
	for i, s := range w.Steps {
		def := d.Steps[i]
		spec, err := flowfile.BuiltSpec(b, d, i)
		step := map[string]any{"id": s.ID, "kind": def.Kind, "needs": s.Needs, "effect_key": s.EffectKey,
			"retry": plainValue(reflect.ValueOf(s.Retry)), "on_failure": string(s.OnFailure), "on_unknown": string(s.OnUnknown),
			"timeout": s.Timeout.String(), "delay": s.Delay.String(), "retention": s.Retention.String(),
			"when": def.When, "has_when": s.When != nil, "not_before": def.NotBefore, "has_not_before": s.NotBefore != nil,
			"spec": map[string]any{"type": fmt.Sprintf("%T", spec), "value": plainValue(reflect.ValueOf(spec))}}
		if err != nil {
			step["spec_error"] = err.Error()
		}
		if def.Limits != nil {
			step["limits"] = yamlValue(reflect.ValueOf(def.Limits))
		}
		steps = append(steps, step)
	}
	wf["steps"] = steps
	out["workflow"] = wf

	var limits []any
	for _, l := range flowfile.DeclaredLimits(defs) {
		limits = append(limits, plainValue(reflect.ValueOf(l)))
	}
	out["limits"] = limits

	if cfg, ok := d.Trigger("schedule"); ok {
		sched := map[string]any{"settings": yamlValue(reflect.ValueOf(cfg))}
		ss, err := b.Schedules(defs)
		if err != nil {
			sched["error"] = err.Error()
		}
		var built []any
		for _, s := range ss {
			b := map[string]any{"name": s.Name, "workflow": s.Workflow, "cron": s.Cron, "timezone": s.Timezone, "run_key": s.RunKey,
				"catch_up": string(s.CatchUp), "max_catch_up": s.MaxCatchUp}
			if f := s.ForEach; f != nil {
				b["for_each"] = map[string]any{"timeout": f.Timeout.String(), "retry": plainValue(reflect.ValueOf(f.Retry)), "has_fetch": f.Fetch != nil}
			}
			built = append(built, b)
		}
		sched["built"] = built
		out["schedule"] = sched
	}

	notify, err := b.Notify(defs)
	if err != nil {
		out["notify_problems"] = problemStrings(err)
	} else if len(notify.Policies) > 0 || len(notify.Channels) > 0 {
		var policies, channels []any
		for _, p := range notify.Policies {
			var specs map[string]any
			if p.Name == d.Name {
				specs = flowfile.ChannelSpecs(nil, d.Notify)
			} else {
				for _, s := range d.Steps {
					if p.Name == d.Name+"/"+s.ID {
						specs = flowfile.ChannelSpecs(d.Notify, s.Notify)
					}
				}
			}
			plain := map[string]any{}
			for k, v := range specs {
				plain[k] = map[string]any{"type": fmt.Sprintf("%T", v), "value": plainValue(reflect.ValueOf(v))}
			}
			policies = append(policies, map[string]any{"name": p.Name, "workflow": p.Workflow, "steps": p.Steps, "reasons": p.Reasons,
				"window": p.Window.String(), "channels": p.Channels, "channel_specs": plain})
		}
		for _, c := range notify.Channels {
			channels = append(channels, map[string]any{"name": c.Name, "retry": plainValue(reflect.ValueOf(c.Retry)),
				"on_unknown": string(c.OnUnknown), "timeout": c.Timeout.String(), "has_send": c.Send != nil})
		}
		out["notify"] = map[string]any{"policies": policies, "channels": channels}
	}
	if d.Notify != nil {
		out["notify_settings"] = notifySettings(kinds, d.Notify)
	}
	var stepNotify []any
	for _, s := range d.Steps {
		if s.Notify != nil {
			stepNotify = append(stepNotify, map[string]any{"step": s.ID, "settings": notifySettings(kinds, s.Notify)})
		}
	}
	if stepNotify != nil {
		out["step_notify_settings"] = stepNotify
	}

	if h, ok := d.Trigger("webhook"); ok {
		hook := map[string]any{"settings": yamlValue(reflect.ValueOf(h))}
		for name, env := range map[string]func(string) (string, bool){"check_all_set": fakeEnv, "check_none_set": emptyEnv} {
			// What serve refuses to start with: a receiver it cannot build, or one
			// without a usable secret.
			ts, err := flowfile.Triggers(defs, flowfile.TriggerOptions{Env: env})
			var errs []error
			if err != nil {
				errs = append(errs, err)
			}
			for _, r := range triggers.Receivers(ts) {
				if err := r.Err(); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", d.File(), err))
				}
			}
			if err := errors.Join(errs...); err != nil {
				hook[name] = err.Error()
			} else {
				hook[name] = "ok"
			}
		}
		out["webhook"] = hook
	}

	if cfg, ok := d.Trigger("queue"); ok {
		q := cfg.(*tqueue.Settings)
		// The block as the file states it: its own fields and each broker's block.
		settings := yamlValue(reflect.ValueOf(q)).(map[string]any)
		delete(settings, "-")
		for _, name := range []string{"nats", "amqp"} {
			settings[name] = nil
			if bs, ok := q.Brokers[name]; ok {
				settings[name] = yamlValue(reflect.ValueOf(bs))
			}
		}
		queue := map[string]any{"settings": settings}
		// What serve completes the block with: the broker, its URL's variable, the consumer.
		b, _, _ := q.Broker()
		broker := b.Name()
		queue["broker"], queue["url_env"] = broker, q.URLVariable()
		if ns, ok := q.Brokers["nats"].(*natsqueue.Settings); ok {
			consumer := ns.Consumer
			if consumer == "" {
				consumer = "onceflow-" + d.Name
			}
			queue["consumer"] = consumer
		}
		h, err := tqueue.NewHandler(tqueue.Config{Workflow: d.Name, Source: broker, RunKey: q.RunKey}, broker)
		if err != nil {
			t.Fatalf("%s: queue run_key: %v", path, err)
		}
		c := h.Companion(nil)
		var csteps []any
		for _, s := range c.Steps {
			csteps = append(csteps, map[string]any{"id": s.ID, "effect_key": s.EffectKey, "on_failure": string(s.OnFailure), "on_unknown": string(s.OnUnknown)})
		}
		queue["companion"] = map[string]any{"name": c.Name, "internal": c.Access.Internal, "trigger": string(c.Access.Trigger), "steps": csteps}
		out["queue"] = queue
	}
	return out
}

// notifySettings is a notify block as the file states it: its own fields, and each
// channel's settings (null where it has none).
func notifySettings(kinds *steps.Registry, n *flowfile.NotifyDef) map[string]any {
	out := map[string]any{"off": n.Off, "reasons": n.Reasons, "window": time.Duration(n.Window).String()}
	for _, a := range kinds.Alerters() {
		out[a.AlertBlock()] = nil
	}
	for _, c := range n.Channels {
		out[c.Field] = yamlValue(reflect.ValueOf(c.Channel.Config))
	}
	return out
}

// problemStrings lists the problems of err. Problems at one position are sorted by
// message: some checks (an e-mail block's required fields) report in map order.
func problemStrings(err error) []string {
	var ps flowfile.Problems
	if !errors.As(err, &ps) {
		if err == nil {
			return []string{}
		}
		return []string{"error: " + err.Error()}
	}
	sorted := append(flowfile.Problems(nil), ps...)
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].File == sorted[i].File && sorted[j].Line == sorted[i].Line && sorted[j].Col == sorted[i].Col {
			j++
		}
		run := sorted[i:j]
		sort.SliceStable(run, func(a, b int) bool { return run[a].Message < run[b].Message })
		i = j
	}
	out := make([]string, len(sorted))
	for i, p := range sorted {
		out[i] = p.String()
	}
	return out
}

var durationType = reflect.TypeOf(time.Duration(0))

// plainValue is v as JSON-ready data named by Go field names, without functions, channels,
// values with no exported fields (the limiter) and interfaces holding anything but data.
func plainValue(v reflect.Value) any {
	out, _ := plain(v, func(f reflect.StructField) string { return f.Name })
	return out
}

// yamlValue is v as JSON-ready data named by the fields' YAML names: the settings as the
// file states them, whatever the Go types that hold them.
func yamlValue(v reflect.Value) any {
	out, _ := plain(v, func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" {
			return f.Name
		}
		return name
	})
	return out
}

func plain(v reflect.Value, name func(reflect.StructField) string) (any, bool) {
	if !v.IsValid() {
		return nil, true
	}
	switch v.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return nil, false
	case reflect.Pointer:
		if v.IsNil() {
			return nil, true
		}
		return plain(v.Elem(), name)
	case reflect.Interface:
		if v.IsNil() {
			return nil, true
		}
		switch v.Elem().Kind() {
		case reflect.Map, reflect.Slice, reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
			return plain(v.Elem(), name)
		}
		return nil, false
	case reflect.Struct:
		t := v.Type()
		m := map[string]any{}
		exported := 0
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			exported++
			val, ok := plain(v.Field(i), name)
			if !ok {
				continue
			}
			if f.Anonymous && strings.Contains(f.Tag.Get("yaml"), "inline") {
				if inner, isMap := val.(map[string]any); isMap {
					for k, x := range inner {
						m[k] = x
					}
					continue
				}
			}
			m[name(f)] = val
		}
		if exported == 0 {
			return nil, false
		}
		return m, true
	case reflect.Map:
		if v.IsNil() {
			return nil, true
		}
		m := map[string]any{}
		for _, k := range v.MapKeys() {
			val, ok := plain(v.MapIndex(k), name)
			if ok {
				m[fmt.Sprint(k.Interface())] = val
			}
		}
		return m, true
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil, true
		}
		s := make([]any, 0, v.Len())
		for i := range v.Len() {
			val, _ := plain(v.Index(i), name)
			s = append(s, val)
		}
		return s, true
	case reflect.Int64:
		if v.Type() == durationType || v.Type().ConvertibleTo(durationType) && v.Type().Name() == "Duration" {
			return time.Duration(v.Int()).String(), true
		}
	}
	return v.Interface(), true
}

func dumpJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// lineDiff shows the lines of want and got that differ, with a little context.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n  want %s\n  got  %s", i+1, x, y))
		}
		if len(out) >= 20 {
			out = append(out, "…")
			break
		}
	}
	return strings.Join(out, "\n")
}
