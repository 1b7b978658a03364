package onceflowui

import (
	"html/template"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/onceflow/onceflow"
)

// funcs are the helpers the templates use.
func (c *Console) funcs() template.FuncMap {
	p := c.cfg.Prefix
	return template.FuncMap{
		"when":  when,
		"clock": func(t time.Time) string { return t.UTC().Format("15:04") },
		"ago": func(t time.Time) template.HTML {
			if t.IsZero() {
				return ""
			}
			return template.HTML(`<span class="ago" title="` + utc(t) + `">` + age(c.cfg.Now().Sub(t)) + ` ago</span>`)
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

// utc is how the console writes a time on the server: in UTC, which the page's script
// turns into the viewer's zone (console.js), keeping this on hover.
func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// when shows a time as a <time> element: UTC as its text, which the page's script shows
// in the viewer's zone, with the UTC text kept as its title; "—" for the zero time. Its
// text holds only digits, dashes, colons and the letters of "UTC", and is safe unescaped.
func when(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	return template.HTML(`<time class="at" datetime="` + t.UTC().Format(time.RFC3339) + `" title="` + utc(t) + `">` + utc(t) + `</time>`)
}

// age says how long d is as a person would: "12 s", "1 min", "5 h", "3 d"; a negative
// duration (a clock a little ahead) is "0 s".
func age(d time.Duration) string {
	round := func(unit time.Duration) int64 { return int64(math.Round(float64(d) / float64(unit))) }
	switch {
	case d < 0:
		return "0 s"
	case d < time.Minute-time.Second/2:
		return strconv.FormatInt(round(time.Second), 10) + " s"
	case d < time.Hour-30*time.Second:
		return strconv.FormatInt(max(round(time.Minute), 1), 10) + " min"
	case d < 48*time.Hour-30*time.Minute:
		return strconv.FormatInt(max(round(time.Hour), 1), 10) + " h"
	}
	return strconv.FormatInt(round(24*time.Hour), 10) + " d"
}
