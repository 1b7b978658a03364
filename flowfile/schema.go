package flowfile

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/triggers"
)

//go:generate go run ./internal/schemagen

// schemaBase is the JSON Schema (2020-12) of a workflow file without its step kinds: the
// file's own fields, a step's common fields, a notify block without its channels, and the
// definitions they share (template, duration, retry, limit, redact, name).
//
//go:embed schema_base.json
var schemaBase []byte

// Schema returns the JSON Schema (draft 2020-12) of a workflow file read against kinds and
// trigs, for editors that complete and check YAML against a schema (`onceflow schema`
// prints it): the file's own fields, each trigger kind's block at the top of the file
// (#/$defs/BLOCK), and, in the registry's order, each kind in a step's kind
// enum, its block (the definition named after the kind, #/$defs/NAME, and the kind's own
// helper definitions), the requirement that a step of the kind has its block, and each
// notification channel in the notify block. A Reader accepts exactly the fields it lists
// and checks more than it can express (templates, `when` expressions, the steps' graph).
// The output is deterministic: object keys sorted, indented by two spaces.
// flowfile/workflow.schema.json is this document for the standard kinds, written by
// `go generate ./flowfile`.
func Schema(kinds *steps.Registry, trigs *triggers.Registry) ([]byte, error) {
	if kinds == nil {
		kinds = steps.NewRegistry()
	}
	if trigs == nil {
		trigs = triggers.NewRegistry()
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(schemaBase))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("flowfile: schema_base.json: %w", err)
	}
	defs := doc["$defs"].(map[string]any)
	step := defs["step"].(map[string]any)
	props := step["properties"].(map[string]any)
	kind := props["kind"].(map[string]any)
	var names, allOf []any
	add := func(name string, raw json.RawMessage, who string) error {
		if _, taken := defs[name]; taken {
			return fmt.Errorf("flowfile: schema: %s: the definition %s is taken", who, name)
		}
		if len(raw) == 0 {
			raw = json.RawMessage(`{}`)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("flowfile: schema: %s: %s is not JSON: %w", who, name, err)
		}
		defs[name] = v
		return nil
	}
	for _, k := range kinds.Kinds() {
		spec := k.Spec()
		who := "kind " + spec.Name
		if err := add(spec.Name, spec.Schema, who); err != nil {
			return nil, err
		}
		for name, d := range spec.Defs {
			if err := add(name, d, who); err != nil {
				return nil, err
			}
		}
		blk := spec.BlockName()
		names = append(names, spec.Name)
		props[blk] = map[string]any{"$ref": "#/$defs/" + spec.Name}
		allOf = append(allOf, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"kind": map[string]any{"const": spec.Name}}},
			"then": map[string]any{"required": []any{blk}},
		})
	}
	kind["enum"] = names
	if len(allOf) > 0 {
		step["allOf"] = allOf
	}
	top := doc["properties"].(map[string]any)
	for _, k := range trigs.Kinds() {
		spec := k.Spec()
		if _, taken := top[spec.Block]; taken {
			return nil, fmt.Errorf("flowfile: schema: trigger %s: the file's field %s is taken", spec.Block, spec.Block)
		}
		if err := add(spec.Block, spec.Schema, "trigger "+spec.Block); err != nil {
			return nil, err
		}
		prop := map[string]any{"$ref": "#/$defs/" + spec.Block}
		if spec.Description != "" {
			prop["description"] = spec.Description
		}
		top[spec.Block] = prop
	}
	notify := defs["notify"].(map[string]any)["properties"].(map[string]any)
	for _, a := range kinds.Alerters() {
		var v any
		raw := a.AlertSchema()
		if len(raw) == 0 {
			raw = json.RawMessage(`{}`)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("flowfile: schema: kind %s: its notify channel's schema is not JSON: %w", a.Spec().Name, err)
		}
		notify[a.AlertBlock()] = v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
