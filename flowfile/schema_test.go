package flowfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// testSchema is the workflow schema of the standard kinds.
func testSchema(t *testing.T) []byte {
	t.Helper()
	doc, err := Schema(testReader.Kinds, testReader.Triggers)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// The committed flowfile/workflow.schema.json and docs/steps.md are what the standard kinds
// generate: a kind's Spec changed without go generate fails here (and in CI).
func TestSchemaFileIsCurrent(t *testing.T) {
	for _, f := range []struct {
		path string
		want []byte
	}{
		{"workflow.schema.json", testSchema(t)},
		{filepath.Join("..", "docs", "steps.md"), testReader.Kinds.Reference()},
	} {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale: run go generate ./flowfile", strings.TrimPrefix(filepath.ToSlash(filepath.Join("flowfile", f.path)), "flowfile/../"))
		}
	}
}

// compiledSchema compiles the workflow schema of the standard kinds.
func compiledSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(testSchema(t)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("workflow.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("workflow.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validateYAML checks a workflow file's source against the schema.
func validateYAML(t *testing.T, s *jsonschema.Schema, src []byte) error {
	t.Helper()
	js, err := yaml.YAMLToJSON(src)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(inst)
}

// The example workflows, and the one of the package doc, are valid by the schema.
func TestSchemaAcceptsExamples(t *testing.T) {
	s := compiledSchema(t)
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateYAML(t, s, src); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// What the parser refuses as a matter of shape, the schema refuses too, and what both
// accept is accepted by both.
func TestSchemaAgreesWithParser(t *testing.T) {
	s := compiledSchema(t)
	base := "name: w\nsteps:\n  - id: a\n"
	for _, tc := range []struct {
		name, src string
		valid     bool
	}{
		{"go step", base + "    kind: go\n    func: f\n", true},
		{"http step with everything", base + `    kind: http
    effect_key: "k:{input.id}"
    retry: {max_attempts: 3, initial: 1s, max: 1h30m, multiplier: 2}
    on_exhausted: fail
    on_unknown: needs_review
    retention: forever
    timeout: 30s
    http:
      method: PUT
      url: "https://example.com/x"
      headers: {X-A: b}
      body: {a: [1, "{input.id}"]}
      idempotency_header: X-Key
      timeout: 5s
      classify: [{status: "409", class: success}]
      verify: {url: "https://example.com/x/{input.id}"}
      idempotent: false
      redact: [token]
`, true},
		{"transition step", base + "    kind: transition\n    transition: {entity: \"order:{input.id}\", from: [pending], to: paid, initial: pending, on_invalid: needs_review}\n", true},
		{"unknown top-level field", "retries: 3\n" + base + "    kind: go\n    func: f\n", false},
		{"unknown step field", base + "    kind: go\n    func: f\n    retries: 3\n", false},
		{"unknown kind", base + "    kind: ftp\n", false},
		{"http step without http", base + "    kind: http\n", false},
		{"unknown http field", base + "    kind: http\n    http: {url: \"https://e.com\", verb: PUT}\n", false},
		{"unknown verify field", base + "    kind: http\n    http: {url: \"https://e.com\", verify: {url: \"https://e.com\", timeout: 1s}}\n", false},
		{"bad duration", base + "    kind: go\n    func: f\n    timeout: 5 minutes\n", false},
		{"bad on_exhausted", base + "    kind: go\n    func: f\n    on_exhausted: ignore\n", false},
		{"bad classify class", base + "    kind: http\n    http: {url: \"https://e.com\", classify: [{status: \"409\", class: fine}]}\n", false},
		{"bad webhook scheme", "webhook: {name: h, scheme: paypal, secret_env: [S]}\n" + base + "    kind: go\n    func: f\n", false},
		{"no steps", "name: w\n", false},
		{"api true", "api: true\n" + base + "    kind: go\n    func: f\n", true},
		{"api tokens", "api: {tokens: [website, ops]}\n" + base + "    kind: go\n    func: f\n", true},
		{"api false", "api: false\n" + base + "    kind: go\n    func: f\n", false},
		{"api without tokens", "api: {}\n" + base + "    kind: go\n    func: f\n", false},
		{"api empty tokens", "api: {tokens: []}\n" + base + "    kind: go\n    func: f\n", false},
		{"api token twice", "api: {tokens: [a, a]}\n" + base + "    kind: go\n    func: f\n", false},
		{"api token with a colon", "api: {tokens: [\"a:b\"]}\n" + base + "    kind: go\n    func: f\n", false},
		{"api unknown field", "api: {token: [a]}\n" + base + "    kind: go\n    func: f\n", false},
		{"api string", "api: yes please\n" + base + "    kind: go\n    func: f\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schemaErr := validateYAML(t, s, []byte(tc.src))
			_, problems := testReader.Parse("w.yaml", []byte(tc.src))
			if (schemaErr == nil) != tc.valid || (problems == nil) != tc.valid {
				t.Fatalf("valid %v: schema says %v; parser says %v", tc.valid, schemaErr, problems)
			}
		})
	}
}

// Every field the parser accepts is in the schema, at the same place, and the schema has
// no field the parser would refuse: a field added to one must be added to the other.
func TestSchemaListsEveryParsedField(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(testSchema(t), &root); err != nil {
		t.Fatal(err)
	}
	defs, _ := root["$defs"].(map[string]any)
	resolve := func(node map[string]any) map[string]any {
		props := map[string]any{}
		for node != nil {
			for k, v := range asMap(node["properties"]) {
				if _, ok := props[k]; !ok {
					props[k] = v
				}
			}
			ref, _ := node["$ref"].(string)
			name, ok := strings.CutPrefix(ref, "#/$defs/")
			if !ok {
				break
			}
			node = asMap(defs[name])
		}
		return props
	}
	var walk func(typ reflect.Type, node map[string]any, at string)
	walk = func(typ reflect.Type, node map[string]any, at string) {
		props := resolve(node)
		fields := yamlFields(typ)
		var names []string
		for name := range fields {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			sub, ok := props[name]
			if !ok {
				t.Errorf("%s.%s is parsed but not in workflow.schema.json", at, name)
				continue
			}
			ft := fields[name]
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
				if s := asMap(sub); s["items"] != nil {
					sub = s["items"]
				} else if ref := asMap(sub)["$ref"]; ref != nil {
					if d := asMap(defs[strings.TrimPrefix(ref.(string), "#/$defs/")]); d["items"] != nil {
						sub = d["items"]
					}
				}
			}
			if ft.Kind() == reflect.Struct {
				walk(ft, asMap(sub), at+"."+name)
			}
		}
		for name := range props {
			if _, ok := fields[name]; !ok && (at != "$" || !isTrigger(name)) {
				t.Errorf("%s.%s is in workflow.schema.json but the parser does not accept it", at, name)
			}
		}
	}
	walk(reflect.TypeFor[Definition](), root, "$")
	// The trigger kinds' blocks at the top of the file, as their kinds decode them.
	top := asMap(root["properties"])
	for _, k := range testReader.Triggers.Kinds() {
		spec := k.Spec()
		walk(spec.Settings, asMap(top[spec.Block]), "$."+spec.Block)
	}
	if t.Failed() {
		return
	}
	// The kinds the schema lists are the parser's.
	var listed, parsed []string
	for _, k := range asSlice(asMap(asMap(asMap(defs["step"])["properties"])["kind"])["enum"]) {
		listed = append(listed, k.(string))
	}
	for _, k := range testReader.Kinds.Kinds() {
		parsed = append(parsed, k.Spec().Name)
	}
	sort.Strings(listed)
	sort.Strings(parsed)
	if got, want := strings.Join(listed, ","), strings.Join(parsed, ","); got != want {
		t.Errorf("schema kinds %s, parser kinds %s", got, want)
	}
}

// isTrigger reports whether a top-level field is a trigger kind's block.
func isTrigger(name string) bool {
	_, ok := testReader.Triggers.ByBlock(name)
	return ok
}

// yamlFields returns the YAML names of typ's fields, with those of inline fields.
func yamlFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	// A step's and a notify block's other fields are the blocks of the registered kinds.
	switch typ {
	case reflect.TypeFor[StepDef]():
		for _, k := range testReader.Kinds.Kinds() {
			out[k.Spec().BlockName()] = k.Spec().Settings
		}
	case reflect.TypeFor[NotifyDef]():
		for _, a := range testReader.Kinds.Alerters() {
			ch, err := a.AlertChannel(block.Settings{})
			if err != nil {
				panic(err)
			}
			out[a.AlertBlock()] = reflect.TypeOf(ch.Config)
		}
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// Every kind's documented example is a step that parses clean and that the schema accepts.
func TestKindExamplesAreValid(t *testing.T) {
	s := compiledSchema(t)
	for _, k := range testReader.Kinds.Kinds() {
		spec := k.Spec()
		if strings.TrimSpace(spec.Example) == "" || spec.Summary == "" || spec.Doc == "" || len(spec.Schema) == 0 {
			t.Errorf("kind %s: its Spec lacks a summary, doc, example or schema", spec.Name)
			continue
		}
		src := "name: example\nsteps:\n" + indent(spec.Example, "  ")
		if _, ps := testReader.Parse(spec.Name+".yaml", []byte(src)); ps != nil {
			t.Errorf("kind %s: its example does not parse:\n%s\n%v", spec.Name, src, ps)
		}
		if err := validateYAML(t, s, []byte(src)); err != nil {
			t.Errorf("kind %s: the schema refuses its example: %v", spec.Name, err)
		}
	}
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n") + "\n"
}
