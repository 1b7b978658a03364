package flowfile

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/keytmpl"
)

// checkRefs checks what the templates of every step's kind read, so that a file that
// would fail at run time fails validate and start-up instead: a step that is not one the
// step needs (directly or through others), a run field other than key and id, {env.NAME}
// where the environment is not read, {+field} where nothing is spliced raw, and templates
// that do not parse where the kind did not say so itself.
func (d *Definition) checkRefs() Problems {
	var ps Problems
	needs := map[string][]string{}
	for _, s := range d.Steps {
		needs[s.ID] = s.Needs
	}
	ancestors := func(id string) map[string]bool {
		out := map[string]bool{}
		var visit func(string)
		visit = func(n string) {
			for _, a := range needs[n] {
				if !out[a] {
					out[a] = true
					visit(a)
				}
			}
		}
		visit(id)
		return out
	}
	for path, src := range map[string]string{"$.run_key": d.RunKey, "$.entity": d.Entity} {
		if t, err := keytmpl.Parse(src); err == nil && t.Raw() {
			ps = append(ps, d.problemAt(path, "{+field} splices a value into a URL as it is; a key is written {field}"))
		}
	}
	for i, s := range d.Steps {
		anc := ancestors(s.ID)
		if t, err := keytmpl.Parse(s.EffectKey); err == nil && t.Raw() {
			ps = append(ps, d.problemAt(fmt.Sprintf("$.steps[%d].effect_key", i), "step %q: {+field} splices a value into a URL as it is; a key is written {field}", s.ID))
		}
		for _, u := range s.uses {
			if u.env || u.tmpl.EnvOnly {
				continue
			}
			what := u.tmpl.Label
			t, err := keytmpl.Parse(u.src)
			if err != nil {
				if u.tmpl.ReportParse {
					ps = append(ps, d.problemAt(u.path, "step %q: %s: %v", s.ID, what, err))
				}
				continue
			}
			switch {
			case u.tmpl.HTML:
				// Fields are escaped for the HTML around them, and {+field} splices raw HTML.
				if _, err := t.HTML(); err != nil {
					ps = append(ps, d.problemAt(u.path, "step %q: %s: %v", s.ID, what, err))
				}
			case t.Raw() && u.tmpl.Text:
				ps = append(ps, d.problemAt(u.path, "step %q: %s: {+field} splices raw HTML, which only the body of an html: true message may hold; elsewhere values are shown as they are: write {field}", s.ID, what))
			case t.Raw() && !u.tmpl.URL:
				ps = append(ps, d.problemAt(u.path, "step %q: %s: {+field} splices a value into a URL as it is; elsewhere write {field}", s.ID, what))
			}
			for _, f := range t.Fields() {
				if msg := fieldProblem(f, anc, u.tmpl.Env); msg != "" {
					ps = append(ps, d.problemAt(u.path, "step %q: %s reads {%s}: %s", s.ID, what, f, msg))
				}
			}
		}
	}
	return ps
}

// fieldProblem says what is wrong with a template field f of a step whose ancestors are
// anc; "" when nothing is. env says whether the template may read {env.NAME}.
func fieldProblem(f string, anc map[string]bool, env bool) string {
	seg := strings.Split(f, ".")
	switch {
	case seg[0] == "input" && len(seg) > 1:
	case f == "run.key", f == "run.id", f == "workflow", f == "step":
	case seg[0] == "run":
		return "a run has {run.key} and {run.id} only"
	case seg[0] == "env" && len(seg) == 2:
		if !env {
			return "an entity is an identifier built from the run's data, never from the environment"
		}
	case seg[0] == "steps" && len(seg) >= 4 && seg[2] == "output":
		if !anc[seg[1]] {
			return fmt.Sprintf("%q is not a step this step needs (directly or through others); add it to needs", seg[1])
		}
	case seg[0] == "steps":
		return "write {steps.ID.output.FIELD}"
	default:
		return "templates read {input.…}, {run.key}, {run.id}, {workflow}, {step}, {steps.ID.output.…} and {env.NAME}"
	}
	return ""
}
