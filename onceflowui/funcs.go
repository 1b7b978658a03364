package onceflowui

import (
	"html/template"
	"net/url"
	"strconv"
	"time"

	"github.com/onceflow/onceflow"
)

// funcs are the helpers the templates use.
func (c *Console) funcs() template.FuncMap {
	p := c.cfg.Prefix
	return template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"clock": func(t time.Time) string { return t.UTC().Format("15:04") },
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return age(c.cfg.Now().Sub(t)) + " ago"
		},
		"runURL": func(id int64) string { return p + "/runs/" + strconv.FormatInt(id, 10) },
		"itemURL": func(id int64, step string) string {
			return p + "/review/" + strconv.FormatInt(id, 10) + "/" + url.PathEscape(step)
		},
		"runsURL": func(workflow string, state onceflow.State) string {
			v := url.Values{}
			if workflow != "" {
				v.Set("workflow", workflow)
			}
			if state != "" {
				v.Set("state", string(state))
			}
			return p + "/runs?" + v.Encode()
		},
		"reviewURL": func(workflow string, reason onceflow.Reason) string {
			v := url.Values{}
			if workflow != "" {
				v.Set("workflow", workflow)
			}
			if reason != "" {
				v.Set("reason", string(reason))
			}
			return p + "/review?" + v.Encode()
		},
		"workflowURL": func(workflow string) string { return p + "/workflows/" + url.PathEscape(workflow) },
		"keyURL":      func(key string) string { return p + "/keys?key=" + url.QueryEscape(key) },
		// bar is the height of a bar of n in a chart 60 units high whose tallest bar is
		// top.
		"bar": func(n, top int) int {
			if top <= 0 || n <= 0 {
				return 0
			}
			return max(1, n*60/top)
		},
		"deref": func(t *time.Time) time.Time {
			if t == nil {
				return time.Time{}
			}
			return *t
		},
		"pretty": func(raw []byte) string { return pretty(raw) },
		"mul":    func(a, b int) int { return a * b },
		"add":    func(a, b int) int { return a + b },
		"sub":    func(a, b int) int { return a - b },
		"cell":   func(m map[onceflow.State]int64, s onceflow.State) int64 { return m[s] },
	}
}
