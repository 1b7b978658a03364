package keytmpl

import "fmt"

// CompileTree parses every string of a tree of maps, slices and scalars (a message body
// written in YAML) as a step template, keeping other values as they are; the environment
// variables the templates read are added to vars.
func CompileTree(v any, vars EnvVars) (any, error) {
	switch x := v.(type) {
	case string:
		return ParseStep(x, vars)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := CompileTree(e, vars)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := CompileTree(e, vars)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}

// RenderTree renders a tree CompileTree made: each template becomes its value (a template
// that is exactly one field keeps the field's JSON type).
func RenderTree(v any, data map[string]any) (any, error) {
	switch x := v.(type) {
	case *Template:
		return x.Value(data)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := RenderTree(e, data)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := RenderTree(e, data)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}
