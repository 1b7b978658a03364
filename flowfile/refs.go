package flowfile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/onceflow/onceflow/internal/keytmpl"
)

// checkRefs checks what the request, e-mail and transition templates of every step read,
// so that a file that would fail at run time fails validate and start-up instead: a step
// that is not one the step needs (directly or through others), a run field other than
// key and id, {env.NAME} where the environment is not read, and e-mail fields that do
// not parse.
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
	if d.Webhook != nil {
		if t, err := keytmpl.Parse(d.Webhook.EventID); err == nil && t.Raw() {
			ps = append(ps, d.problemAt("$.webhook.event_id", "{+field} splices a value into a URL as it is; a key is written {field}"))
		}
	}
	for i, s := range d.Steps {
		anc := ancestors(s.ID)
		if t, err := keytmpl.Parse(s.EffectKey); err == nil && t.Raw() {
			ps = append(ps, d.problemAt(fmt.Sprintf("$.steps[%d].effect_key", i), "step %q: {+field} splices a value into a URL as it is; a key is written {field}", s.ID))
		}
		check := func(path, what, src string, env, reportParse bool) {
			t, err := keytmpl.Parse(src)
			if err != nil {
				if reportParse {
					ps = append(ps, d.problemAt(path, "step %q: %s: %v", s.ID, what, err))
				}
				return
			}
			switch {
			case what == "email body" && s.Email.HTML:
				// Fields are escaped for the HTML around them, and {+field} splices raw HTML.
				if _, err := t.HTML(); err != nil {
					ps = append(ps, d.problemAt(path, "step %q: %s: %v", s.ID, what, err))
				}
			case t.Raw() && strings.HasPrefix(what, "email "):
				ps = append(ps, d.problemAt(path, "step %q: %s: {+field} splices raw HTML, which only the body of an html: true message may hold; elsewhere values are shown as they are: write {field}", s.ID, what))
			case t.Raw() && !strings.HasSuffix(what, "url"):
				ps = append(ps, d.problemAt(path, "step %q: %s: {+field} splices a value into a URL as it is; elsewhere write {field}", s.ID, what))
			}
			for _, f := range t.Fields() {
				if msg := fieldProblem(f, anc, env); msg != "" {
					ps = append(ps, d.problemAt(path, "step %q: %s reads {%s}: %s", s.ID, what, f, msg))
				}
			}
		}
		at := fmt.Sprintf("$.steps[%d]", i)
		if h := s.HTTP; h != nil {
			request := func(base, what string, r RequestDef) {
				check(base+".url", what+"url", r.URL, true, false)
				for _, k := range sortedKeys(r.Headers) {
					check(base+".headers."+k, what+"header "+k, r.Headers[k], true, false)
				}
				walkStrings(r.Body, func(v string) { check(base+".body", what+"body", v, true, false) })
			}
			request(at+".http", "", h.RequestDef)
			if h.Verify != nil {
				request(at+".http.verify", "verify ", *h.Verify)
			}
		}
		if e := s.Email; e != nil {
			for _, f := range []struct{ name, src string }{{"from", e.From}, {"to", e.To}, {"cc", e.Cc}, {"reply_to", e.ReplyTo}, {"subject", e.Subject}, {"body", e.Body}} {
				if f.src != "" {
					check(at+".email."+f.name, "email "+f.name, f.src, true, true)
				}
			}
		}
		if t := s.Transition; t != nil && t.Entity != "" {
			check(at+".transition.entity", "transition entity", t.Entity, false, false)
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

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// walkStrings calls fn with every string leaf of a decoded YAML value.
func walkStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case map[string]any:
		for _, k := range sortedAnyKeys(x) {
			walkStrings(x[k], fn)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	}
}

func sortedAnyKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
