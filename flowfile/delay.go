package flowfile

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// A step waits before it runs with delay (after the steps it needs) or not_before (a time
// from the input or an earlier step's output, optionally minus or plus a duration):
//
//	- id: follow-up
//	  needs: [crm]
//	  delay: 24h
//	- id: reminder
//	  not_before: "{input.appointment_at} - 24h"

// notBeforeRE splits "TEMPLATE - 24h" into the template and the offset.
var notBeforeRE = regexp.MustCompile(`^(.*\})\s*([+-])\s*([0-9][0-9a-zµ.]*)$`)

// oneFieldRE matches a template that is one field.
var oneFieldRE = regexp.MustCompile(`^\{[^{}]+\}$`)

// notBeforeSpec is a parsed not_before.
type notBeforeSpec struct {
	t      *keytmpl.Template
	offset time.Duration
}

// parseNotBefore parses a not_before value; steps lists the steps whose outputs it may read.
func parseNotBefore(src string, ancestors map[string]bool) (*notBeforeSpec, error) {
	tmpl, off := strings.TrimSpace(src), time.Duration(0)
	if m := notBeforeRE.FindStringSubmatch(tmpl); m != nil {
		d, err := parseDuration(m[3])
		if err != nil {
			return nil, fmt.Errorf("offset %q: write it as 30m, 2h or 1d", m[3])
		}
		tmpl, off = m[1], d
		if m[2] == "-" {
			off = -d
		}
	}
	t, err := keytmpl.Parse(tmpl)
	if err != nil {
		return nil, err
	}
	if !oneFieldRE.MatchString(tmpl) {
		return nil, fmt.Errorf("%q: write one field holding a time and an optional offset, such as \"{input.appointment_at} - 24h\"", src)
	}
	for _, f := range t.Fields() {
		seg := strings.Split(f, ".")
		switch {
		case seg[0] == "input" && len(seg) > 1:
		case seg[0] == "steps" && len(seg) >= 4 && seg[2] == "output":
			if !ancestors[seg[1]] {
				return nil, fmt.Errorf("{%s}: %q is not a step this step needs (directly or through others)", f, seg[1])
			}
		default:
			return nil, fmt.Errorf("{%s}: not_before may read {input.…} and {steps.ID.output.…}", f)
		}
	}
	return &notBeforeSpec{t: t, offset: off}, nil
}

// fn returns the step's NotBefore: the rendered time (RFC 3339, or a date YYYY-MM-DD at
// midnight UTC) plus the offset.
func (nb *notBeforeSpec) fn() func(sc *onceflow.StepContext) (time.Time, error) {
	return func(sc *onceflow.StepContext) (time.Time, error) {
		data, err := sc.TemplateData()
		if err != nil {
			return time.Time{}, err
		}
		v, err := nb.t.Render(data)
		if err != nil {
			return time.Time{}, fmt.Errorf("not_before: %w", err)
		}
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			if at, err = time.Parse("2006-01-02", v); err != nil {
				return time.Time{}, fmt.Errorf("not_before: %q is not a time such as 2026-11-30T09:00:00+01:00", v)
			}
		}
		return at.Add(nb.offset), nil
	}
}

// parseDelay parses a step's delay.
func parseDelay(s string) (time.Duration, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-") {
		return 0, fmt.Errorf("delay %q is negative; a step can only wait for later", s)
	}
	d, err := parseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("delay %q: write it as 30s, 15m, 24h or 7d", s)
	}
	return d, nil
}

// ancestorsOf returns the steps step i needs, directly or through others.
func (d *Definition) ancestorsOf(i int) map[string]bool {
	byID := map[string]StepDef{}
	for _, s := range d.Steps {
		byID[s.ID] = s
	}
	out := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		for _, n := range byID[id].Needs {
			if !out[n] {
				out[n] = true
				visit(n)
			}
		}
	}
	visit(d.Steps[i].ID)
	return out
}

// checkDelay checks a step's delay and not_before.
func (d *Definition) checkDelay(i int, s StepDef) Problems {
	var ps Problems
	if s.Delay != "" {
		if _, err := parseDelay(s.Delay); err != nil {
			ps = append(ps, d.problemAt(fmt.Sprintf("$.steps[%d].delay", i), "step %q: %v", s.ID, err))
		}
	}
	if s.NotBefore != "" {
		if _, err := parseNotBefore(s.NotBefore, d.ancestorsOf(i)); err != nil {
			ps = append(ps, d.problemAt(fmt.Sprintf("$.steps[%d].not_before", i), "step %q: not_before: %v", s.ID, err))
		}
	}
	return ps
}

// applyDelay sets the step's Delay and NotBefore from a checked definition.
func (d *Definition) applyDelay(i int, s StepDef, st *onceflow.Step) {
	if s.Delay != "" {
		st.Delay, _ = parseDelay(s.Delay)
	}
	if s.NotBefore != "" {
		if nb, err := parseNotBefore(s.NotBefore, d.ancestorsOf(i)); err == nil {
			st.NotBefore = nb.fn()
		}
	}
}
