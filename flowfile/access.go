package flowfile

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
)

// APIDef says which API tokens may start the workflow (POST /v1/workflows/NAME/runs):
//
//	api: true                  # every token, although a schedule, a queue or a webhook feeds it
//	api:
//	  tokens: [billing-ops]    # only these tokens of ONCEFLOW_API_TOKENS
//
// Without it, every token with the ingest scope may start a workflow that has no schedule,
// queue or webhook, and none may start one that has: its trigger decides when it runs
// and with which input. See onceflow.Access for the whole rule.
type APIDef struct {
	// Tokens, when set, names the only tokens that may start the workflow.
	Tokens []string `yaml:"tokens"`
}

// apiFields is APIDef decoded as a mapping, without UnmarshalYAML.
type apiFields APIDef

// UnmarshalYAML reads `api: true` or a mapping of APIDef's fields; an error carries the
// value's line and column.
func (a *APIDef) UnmarshalYAML(n ast.Node) error {
	at := func(format string, args ...any) error { return block.ValueAt(n, format, args...) }
	switch v := n.(type) {
	case *ast.BoolNode:
		if !v.Value {
			return at("api: false is not a setting: without api, no token starts a workflow that a schedule, a queue or a webhook feeds; " +
				"to let only some tokens start this one, write api: {tokens: [NAME, …]}")
		}
		*a = APIDef{}
		return nil
	case *ast.MappingNode, *ast.MappingValueNode:
		var f apiFields
		if err := yaml.NodeToValue(n, &f, yaml.Strict()); err != nil {
			return err
		}
		if f.Tokens == nil {
			f.Tokens = []string{} // a mapping without tokens: checkAPI says so
		}
		*a = APIDef(f)
		return nil
	}
	return at("api must be true or a mapping such as {tokens: [website]}")
}

// checkAPI checks the api block.
func (d *Definition) checkAPI() Problems {
	if d.API == nil {
		return nil
	}
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	if d.API.Tokens != nil && len(d.API.Tokens) == 0 {
		add("$.api.tokens", "api.tokens names no token; list the tokens that may start this workflow, or write api: true to let every token")
	}
	seen := map[string]bool{}
	for i, t := range d.API.Tokens {
		path := fmt.Sprintf("$.api.tokens[%d]", i)
		switch {
		case t == "" || strings.ContainsAny(t, ":, \t") || strings.TrimSpace(t) != t:
			add(path, "%q is not a token name: a name of ONCEFLOW_API_TOKENS has no spaces, ':' or ','", t)
		case seen[t]:
			add(path, "api.tokens names %q twice", t)
		}
		seen[t] = true
	}
	return ps
}

// access is who may start the workflow from outside (onceflow.Access): its trigger, and
// what its api block opens to tokens.
func (d *Definition) access() onceflow.Access {
	var a onceflow.Access
	// The trigger the access rule names: the last one the file sets, in the registry's
	// order (stdtriggers: a schedule before a queue before a webhook).
	for _, t := range d.Triggers {
		if tr := t.kind.Spec().Trigger; tr != "" {
			a.Trigger = tr
		}
	}
	if d.API != nil {
		a.API = true
		a.Tokens = d.API.Tokens
	}
	return a
}
