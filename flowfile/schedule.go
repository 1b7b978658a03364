package flowfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// ScheduleDef starts the workflow on the clock:
//
//	schedule:
//	  cron: "0 9 1 * *"            # five fields (an optional leading seconds field) or @daily, @monthly, …
//	  timezone: Europe/Berlin       # IANA zone of the wall times (default UTC)
//	  run_key: "invoice:{item.customer_id}:{schedule.period}:subscription"
//	  catch_up: latest              # latest | all | none: ticks missed while nothing ran
//	  max_catch_up: 10              # the most missed ticks catch_up: all starts
//	  for_each:                     # optional: one run per item of a fetched list
//	    url: "{env.BILLING_URL}/customers?period={schedule.period}"
//	    items: data                 # where the list is in the answer (default: the answer itself, or items)
//	    next: links.next            # the next page's URL, or cursor: + cursor_param:
//
// See onceflow.Schedule for the run keys, the template values and the daylight-saving rule.
type ScheduleDef struct {
	// Name names the schedule (default: the workflow's name).
	Name       string      `yaml:"name"`
	Cron       string      `yaml:"cron"`
	Timezone   string      `yaml:"timezone"`
	RunKey     string      `yaml:"run_key"`
	CatchUp    string      `yaml:"catch_up"`
	MaxCatchUp int         `yaml:"max_catch_up"`
	ForEach    *ForEachDef `yaml:"for_each"`
}

// ForEachDef fetches the list a schedule fans out over, with HTTP GET requests through the
// egress policy, page after page.
type ForEachDef struct {
	// URL may read {schedule.…} and {env.NAME}.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Items is the dotted path of the list in the JSON answer; "" takes the answer if it
	// is a list, else its field items.
	Items string `yaml:"items"`
	// Next is the dotted path of the next page's URL (absolute, or relative to the page);
	// Cursor the path of a cursor sent as the query parameter CursorParam (default
	// cursor). Neither: one page.
	Next        string    `yaml:"next"`
	Cursor      string    `yaml:"cursor"`
	CursorParam string    `yaml:"cursor_param"`
	Timeout     Duration  `yaml:"timeout"`
	Retry       *RetryDef `yaml:"retry"`
}

// maxListPage caps the bytes of one page of a fan-out's list.
const maxListPage = 16 << 20

var pathRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// checkSchedule checks the schedule block; the engine's rules are placed at their fields.
func (d *Definition) checkSchedule() Problems {
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	s := d.Schedule
	if s.Cron == "" {
		add("$.schedule", "schedule needs cron, such as \"0 9 1 * *\" or @daily")
	}
	if err := d.scheduleSkeleton().Validate(); err != nil {
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			var de *onceflow.DefinitionError
			if errors.As(e, &de) {
				if s.Cron == "" && de.Field == "schedule.cron" {
					continue
				}
				add("$."+de.Field, "%s", de.Problem)
			} else {
				add("$.schedule", "%v", e)
			}
		}
	}
	if f := s.ForEach; f != nil {
		if f.URL == "" {
			add("$.schedule.for_each", "for_each needs url: the address of the list")
		} else if _, err := parseListTemplate(f.URL); err != nil {
			add("$.schedule.for_each.url", "%v", err)
		}
		for name, v := range f.Headers {
			if _, err := parseListTemplate(v); err != nil {
				add("$.schedule.for_each.headers", "header %s: %v", name, err)
			}
		}
		for field, v := range map[string]string{"items": f.Items, "next": f.Next, "cursor": f.Cursor} {
			if v != "" && !pathRE.MatchString(v) {
				add("$.schedule.for_each."+field, "%s %q is not a dotted field path such as data or links.next", field, v)
			}
		}
		if f.Next != "" && f.Cursor != "" {
			add("$.schedule.for_each", "for_each takes next (a URL) or cursor (a value), not both")
		}
		if f.CursorParam != "" && f.Cursor == "" {
			add("$.schedule.for_each.cursor_param", "cursor_param needs cursor: the path of the cursor in the answer")
		}
		if f.Retry != nil && (f.Retry.MaxAttempts < 0 || f.Retry.Multiplier < 0 || (f.Retry.Multiplier > 0 && f.Retry.Multiplier < 1)) {
			add("$.schedule.for_each.retry", "max_attempts must be positive and multiplier at least 1")
		}
	}
	return ps
}

// scheduleSkeleton is the schedule block as an onceflow.Schedule, with a placeholder fetch.
func (d *Definition) scheduleSkeleton() onceflow.Schedule {
	s := d.Schedule
	out := onceflow.Schedule{Name: s.Name, Workflow: d.Name, Cron: s.Cron, Timezone: s.Timezone, RunKey: s.RunKey,
		CatchUp: onceflow.CatchUp(s.CatchUp), MaxCatchUp: s.MaxCatchUp}
	if out.Workflow == "" {
		out.Workflow = "unnamed"
	}
	if s.ForEach != nil {
		out.ForEach = &onceflow.FanOut{Fetch: func(context.Context, onceflow.Tick, string) (onceflow.FanOutPage, error) {
			return onceflow.FanOutPage{}, errors.New("not built")
		}, Timeout: time.Duration(s.ForEach.Timeout)}
		out.ForEach.Retry = s.ForEach.Retry.policy()
	}
	return out
}

// parseListTemplate parses a template of the list request: it may read {schedule.…} and
// {env.NAME}.
func parseListTemplate(src string) (*keytmpl.Template, error) {
	t, err := keytmpl.Parse(src)
	if err != nil {
		return nil, err
	}
	for _, f := range t.Fields() {
		seg := strings.Split(f, ".")
		switch {
		case seg[0] == "schedule" && len(seg) == 2:
		case seg[0] == "env" && len(seg) == 2 && envNameRE.MatchString(seg[1]):
		default:
			return nil, fmt.Errorf("{%s}: the list request may read {schedule.name}, {schedule.time}, {schedule.period}, {schedule.previous} and {env.NAME}", f)
		}
	}
	return t, nil
}

// Schedules turns the schedule blocks of checked definitions into schedules ready to
// register (after their workflows), with for_each lists fetched through the builder's
// HTTPClient.
func (b *Builder) Schedules(defs []*Definition) ([]onceflow.Schedule, error) {
	var out []onceflow.Schedule
	for _, d := range defs {
		if d.Schedule == nil {
			continue
		}
		s := d.scheduleSkeleton()
		if f := d.Schedule.ForEach; f != nil {
			if b.client == nil {
				return nil, fmt.Errorf("%s: for_each needs an HTTP client", d.file)
			}
			fetch, err := newListFetch(f, b.client, b.env)
			if err != nil {
				return nil, fmt.Errorf("%s: for_each: %w", d.file, err)
			}
			s.ForEach.Fetch = fetch
		}
		out = append(out, s)
	}
	return out, nil
}

// newListFetch builds the fetch of a for_each list.
func newListFetch(f *ForEachDef, client *http.Client, env func(string) (string, bool)) (func(context.Context, onceflow.Tick, string) (onceflow.FanOutPage, error), error) {
	urlT, err := parseListTemplate(f.URL)
	if err != nil {
		return nil, err
	}
	headers := map[string]*keytmpl.Template{}
	vars := keytmpl.EnvVars{}
	collect := func(t *keytmpl.Template) {
		for _, fl := range t.Fields() {
			if name, ok := strings.CutPrefix(fl, "env."); ok {
				vars[name] = true
			}
		}
	}
	collect(urlT)
	for name, v := range f.Headers {
		t, err := parseListTemplate(v)
		if err != nil {
			return nil, err
		}
		headers[name] = t
		collect(t)
	}
	param := f.CursorParam
	if param == "" {
		param = "cursor"
	}
	return func(ctx context.Context, tick onceflow.Tick, cursor string) (onceflow.FanOutPage, error) {
		prev := ""
		if !tick.Previous.IsZero() {
			prev = tick.Previous.Format(time.RFC3339)
		}
		data := map[string]any{"schedule": map[string]any{"name": tick.Schedule, "time": tick.Time.Format(time.RFC3339), "period": tick.Period, "previous": prev}}
		secrets, err := keytmpl.AddEnv(data, vars.Names(), env)
		if err != nil {
			return onceflow.FanOutPage{}, onceflow.PermanentError(err)
		}
		fail := func(perm bool, format string, args ...any) (onceflow.FanOutPage, error) {
			msg := fmt.Sprintf(format, args...)
			for _, s := range secrets {
				if len(s) >= 4 {
					msg = strings.ReplaceAll(msg, s, "[redacted]")
				}
			}
			if perm {
				return onceflow.FanOutPage{}, onceflow.PermanentError(errors.New(msg))
			}
			return onceflow.FanOutPage{}, errors.New(msg)
		}
		target, err := urlT.Render(data)
		if err != nil {
			return fail(true, "list url: %v", err)
		}
		switch {
		case f.Next != "" && cursor != "":
			base, err := url.Parse(target)
			if err != nil {
				return fail(true, "list url: %v", err)
			}
			next, err := base.Parse(cursor)
			if err != nil {
				return fail(true, "next page url %q: %v", cursor, err)
			}
			target = next.String()
		case f.Cursor != "" && cursor != "":
			u, err := url.Parse(target)
			if err != nil {
				return fail(true, "list url: %v", err)
			}
			q := u.Query()
			q.Set(param, cursor)
			u.RawQuery = q.Encode()
			target = u.String()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return fail(true, "list request: %v", err)
		}
		req.Header.Set("Accept", "application/json")
		for name, t := range headers {
			v, err := t.Render(data)
			if err != nil {
				return fail(true, "list header %s: %v", name, err)
			}
			req.Header.Set(name, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return fail(false, "GET the list: %v", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxListPage+1))
		if err != nil {
			return fail(false, "read the list: %v", err)
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return fail(false, "the list answered %d", resp.StatusCode)
		case resp.StatusCode >= 300:
			return fail(true, "the list answered %d", resp.StatusCode)
		case len(body) > maxListPage:
			return fail(true, "a page of the list is larger than %d bytes", maxListPage)
		}
		return parseListPage(body, f)
	}, nil
}

// parseListPage reads the items and the next cursor from a page.
func parseListPage(body []byte, f *ForEachDef) (onceflow.FanOutPage, error) {
	// Numbers keep the text they were written with: an id above 2^53 is the customer it
	// names, not its float64 neighbour.
	doc, err := keytmpl.Decode(body)
	if err != nil {
		return onceflow.FanOutPage{}, onceflow.PermanentError(fmt.Errorf("the list is not JSON: %v", err))
	}
	items := doc
	switch {
	case f.Items != "":
		items = lookupPath(doc, f.Items)
	default:
		if m, ok := doc.(map[string]any); ok {
			items = m["items"]
		}
	}
	list, ok := items.([]any)
	if !ok {
		where := f.Items
		if where == "" {
			where = "the answer (or its field items)"
		}
		return onceflow.FanOutPage{}, onceflow.PermanentError(fmt.Errorf("%s is not a list", where))
	}
	var page onceflow.FanOutPage
	for _, it := range list {
		raw, err := json.Marshal(it)
		if err != nil {
			return onceflow.FanOutPage{}, onceflow.PermanentError(err)
		}
		page.Items = append(page.Items, raw)
	}
	for _, p := range []string{f.Next, f.Cursor} {
		if p == "" {
			continue
		}
		switch v := lookupPath(doc, p).(type) {
		case nil:
		case string:
			page.Next = v
		case json.Number:
			page.Next = v.String()
		default:
			return onceflow.FanOutPage{}, onceflow.PermanentError(fmt.Errorf("%s is a %T, not a URL or cursor", p, v))
		}
	}
	return page, nil
}

func lookupPath(doc any, path string) any {
	for _, seg := range strings.Split(path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[seg]
	}
	return doc
}

// OutlineSchedules is Builder.Schedules for programs that list or trigger schedules without
// fetching lists: a for_each fetch fails if it is ever called.
func OutlineSchedules(defs []*Definition) []onceflow.Schedule {
	var out []onceflow.Schedule
	for _, d := range defs {
		if d.Schedule != nil {
			out = append(out, d.scheduleSkeleton())
		}
	}
	return out
}

// checkScheduleNames reports two files naming the same schedule (a schedule is named after
// its workflow unless it says otherwise).
func checkScheduleNames(defs []*Definition) Problems {
	var ps Problems
	seen := map[string]string{}
	for _, d := range defs {
		if d.Schedule == nil {
			continue
		}
		name := d.Schedule.Name
		if name == "" {
			name = d.Name
		}
		if prev, ok := seen[name]; ok {
			ps = append(ps, d.problemAt("$.schedule", "schedule %q is also defined in %s; give one of them another name", name, prev))
		}
		seen[name] = d.file
	}
	return ps
}
