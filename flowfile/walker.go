package flowfile

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// use is one template, or one environment variable named directly, that a walk reported.
type use struct {
	path string // the YAML path of the field
	src  string // the template, or the variable's name
	env  bool   // src is a variable's name (EnvVar), not a template
	tmpl block.Use
	vars block.EnvUse
}

// walker receives a kind's or a channel's walk over its block, placing what it reports
// under base and prefixing its problems with who they are about.
type walker struct {
	d      *Definition
	base   string
	prefix string
	ps     *Problems
	uses   *[]use
}

var _ block.Walker = (*walker)(nil)

func (w *walker) Problem(path, format string, args ...any) {
	*w.ps = append(*w.ps, w.d.problemAt(block.Join(w.base, path), "%s%s", w.prefix, fmt.Sprintf(format, args...)))
}

// Template records a template. What it reads is checked with the step's other templates
// (checkRefs), except that a template that may read only the environment is checked now.
func (w *walker) Template(path, src string, u block.Use) {
	full := block.Join(w.base, path)
	*w.uses = append(*w.uses, use{path: full, src: src, tmpl: u})
	if !u.EnvOnly {
		return
	}
	t, err := keytmpl.Parse(src)
	if err != nil {
		if u.ReportParse {
			w.Problem(path, "%s: %v", u.Label, err)
		}
		return
	}
	for _, f := range t.Fields() {
		name, ok := strings.CutPrefix(f, "env.")
		if !ok || !envNameRE.MatchString(name) {
			w.Problem(path, "%s: {%s}: notification settings read only {env.NAME}", u.Label, f)
			return
		}
	}
}

func (w *walker) EnvVar(path, name string, u block.EnvUse) {
	*w.uses = append(*w.uses, use{path: block.Join(w.base, path), src: name, env: true, vars: u})
}

// envNames lists the environment variables a use reads.
func (u use) envNames() []string {
	if u.env {
		return []string{u.src}
	}
	var out []string
	for _, m := range envFieldRE.FindAllStringSubmatch(u.src, -1) {
		out = append(out, m[1])
	}
	return out
}
