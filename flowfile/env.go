package flowfile

import (
	"fmt"
	"sort"
)

// CheckEnv reports every {env.NAME} a step or notify block of the definition reads that
// env does not set (or sets empty), at the field that reads it, naming the step and the
// variable: a program that serves the workflow refuses to start on it, rather than send
// the first run's steps to review.
func (d *Definition) CheckEnv(env func(string) (string, bool)) Problems {
	var ps Problems
	check := func(path, who, src string) {
		for _, m := range envFieldRE.FindAllStringSubmatch(src, -1) {
			if v, ok := env(m[1]); !ok || v == "" {
				ps = append(ps, d.problemAt(path, "%s reads {env.%s}, but the environment variable %s is not set", who, m[1], m[1]))
			}
		}
	}
	for i, s := range d.Steps {
		at := fmt.Sprintf("$.steps[%d]", i)
		who := fmt.Sprintf("step %q", s.ID)
		if h := s.HTTP; h != nil {
			request := func(base string, r RequestDef) {
				check(base+".url", who, r.URL)
				keys := make([]string, 0, len(r.Headers))
				for k := range r.Headers {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					check(base+".headers."+k, who, r.Headers[k])
				}
				walkStrings(r.Body, func(v string) { check(base+".body", who, v) })
			}
			request(at+".http", h.RequestDef)
			if h.Verify != nil {
				request(at+".http.verify", *h.Verify)
			}
		}
		if e := s.Email; e != nil {
			for _, f := range []struct{ name, src string }{{"from", e.From}, {"to", e.To}, {"cc", e.Cc}, {"reply_to", e.ReplyTo}, {"subject", e.Subject}, {"body", e.Body}} {
				check(at+".email."+f.name, who, f.src)
			}
		}
		if s.Notify != nil && s.Notify.Slack != nil {
			check(at+".notify.slack.webhook", who+" notify", s.Notify.Slack.Webhook)
		}
	}
	if d.Notify != nil && d.Notify.Slack != nil {
		check("$.notify.slack.webhook", "notify", d.Notify.Slack.Webhook)
	}
	return ps
}
