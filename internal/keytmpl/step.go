package keytmpl

import (
	"fmt"
	"sort"
	"strings"
)

// EnvVars collects the environment variables that step templates read.
type EnvVars map[string]bool

// Names returns the variables in name order.
func (e EnvVars) Names() []string {
	out := make([]string, 0, len(e))
	for n := range e {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ParseStep parses a step's request template. It may read input, run, steps, workflow,
// step and env.NAME; the environment variables it reads are added to vars.
func ParseStep(src string, vars EnvVars) (*Template, error) {
	t, err := Parse(src)
	if err != nil {
		return nil, err
	}
	for _, f := range t.Fields() {
		seg := strings.Split(f, ".")
		switch seg[0] {
		case "env":
			if len(seg) != 2 {
				return nil, fmt.Errorf("{%s}: environment fields are written {env.NAME}", f)
			}
			vars[seg[1]] = true
		case "input", "run", "steps", "workflow", "step":
		default:
			return nil, fmt.Errorf("{%s}: templates read input, run, steps, workflow, step and env", f)
		}
	}
	return t, nil
}

// AddEnv looks up names with lookup and adds them to data as data["env"], returning the
// values so that callers can mask them wherever text leaves the step. A variable that is
// unset or empty is an error naming it.
func AddEnv(data map[string]any, names []string, lookup func(string) (string, bool)) ([]string, error) {
	env := map[string]any{}
	var values []string
	for _, name := range names {
		v, ok := "", false
		if lookup != nil {
			v, ok = lookup(name)
		}
		if !ok || v == "" {
			return nil, fmt.Errorf("environment variable %s is not set; the step's templates read {env.%s}", name, name)
		}
		env[name] = v
		values = append(values, v)
	}
	data["env"] = env
	return values, nil
}
