package flowfile

import "fmt"

// CheckEnv reports every environment variable a step or notify block of the definition
// reads that env does not set (or sets empty), at the field that reads it, naming the step
// and the variable: a program that serves the workflow refuses to start on it, rather than
// send the first run's steps to review.
func (d *Definition) CheckEnv(env func(string) (string, bool)) Problems {
	var ps Problems
	check := func(uses []use, who string) {
		for _, u := range uses {
			switch {
			case u.env:
				if v, ok := env(u.src); u.vars.Required && (!ok || v == "") {
					ps = append(ps, d.problemAt(u.path, "%s reads its %s from the environment variable %s, which is not set", who, u.vars.Label, u.src))
				}
			case u.tmpl.Env || u.tmpl.EnvOnly:
				for _, name := range u.envNames() {
					if v, ok := env(name); !ok || v == "" {
						ps = append(ps, d.problemAt(u.path, "%s reads {env.%s}, but the environment variable %s is not set", who, name, name))
					}
				}
			}
		}
	}
	for _, s := range d.Steps {
		who := fmt.Sprintf("step %q", s.ID)
		check(s.uses, who)
		check(s.notifyUses, who+" notify")
	}
	check(d.notifyUses, "notify")
	return ps
}
