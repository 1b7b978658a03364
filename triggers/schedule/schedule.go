// Package schedule is the trigger kind of a workflow file's schedule: block: the
// workflow starts on the clock, one run per tick keyed by the tick's nominal time, or one
// run per item of a list fetched when the tick fires (for_each). The trigger only
// describes its schedule (a triggers.Scheduler): the engine's leader fires the ticks, one
// process at a time (onceflow.Client.RegisterSchedule; see onceflow.Schedule for the run
// keys, the template values and the daylight-saving rule).
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
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/triggers"
)

// Settings is a workflow file's schedule: block.
type Settings struct {
	// Name names the schedule (default: the workflow's name).
	Name       string           `yaml:"name"`
	Cron       string           `yaml:"cron"`
	Timezone   string           `yaml:"timezone"`
	RunKey     string           `yaml:"run_key"`
	CatchUp    string           `yaml:"catch_up"`
	MaxCatchUp int              `yaml:"max_catch_up"`
	ForEach    *ForEachSettings `yaml:"for_each"`

	workflow string
}

// ForEachSettings fetches the list a schedule fans out over, with HTTP GET requests
// through the egress policy, page after page.
type ForEachSettings struct {
	// URL may read {schedule.…} and {env.NAME}.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Items is the dotted path of the list in the JSON answer; "" takes the answer if it
	// is a list, else its field items.
	Items string `yaml:"items"`
	// Next is the dotted path of the next page's URL (absolute, or relative to the page);
	// Cursor the path of a cursor sent as the query parameter CursorParam (default
	// cursor). Neither: one page.
	Next        string         `yaml:"next"`
	Cursor      string         `yaml:"cursor"`
	CursorParam string         `yaml:"cursor_param"`
	Timeout     block.Duration `yaml:"timeout"`
	Retry       *RetrySettings `yaml:"retry"`
}

// RetrySettings is the retry policy of the list's requests.
type RetrySettings struct {
	MaxAttempts   int            `yaml:"max_attempts"`
	Initial       block.Duration `yaml:"initial"`
	Max           block.Duration `yaml:"max"`
	Multiplier    float64        `yaml:"multiplier"`
	MaxRetryAfter block.Duration `yaml:"max_retry_after"`
}

// policy is the retry policy r writes; nil is the default policy.
func (r *RetrySettings) policy() onceflow.RetryPolicy {
	if r == nil {
		return onceflow.RetryPolicy{}
	}
	return onceflow.RetryPolicy{MaxAttempts: r.MaxAttempts, Initial: time.Duration(r.Initial), Max: time.Duration(r.Max),
		Multiplier: r.Multiplier, MaxRetryAfter: time.Duration(r.MaxRetryAfter)}
}

var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// Walk checks the block; the engine's rules are placed at their fields.
func (s *Settings) Walk(w block.Walker) {
	if s.Cron == "" {
		w.Problem("", "schedule needs cron, such as \"0 9 1 * *\" or @daily")
	}
	if err := s.skeleton().Validate(); err != nil {
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
				w.Problem(strings.TrimPrefix(strings.TrimPrefix(de.Field, "schedule"), "."), "%s", de.Problem)
			} else {
				w.Problem("", "%v", e)
			}
		}
	}
	if f := s.ForEach; f != nil {
		if f.URL == "" {
			w.Problem("for_each", "for_each needs url: the address of the list")
		} else if _, err := parseListTemplate(f.URL); err != nil {
			w.Problem("for_each.url", "%v", err)
		}
		for name, v := range f.Headers {
			if _, err := parseListTemplate(v); err != nil {
				w.Problem("for_each.headers", "header %s: %v", name, err)
			}
		}
		for field, v := range map[string]string{"items": f.Items, "next": f.Next, "cursor": f.Cursor} {
			if v != "" && !pathRE.MatchString(v) {
				w.Problem("for_each."+field, "%s %q is not a dotted field path such as data or links.next", field, v)
			}
		}
		if f.Next != "" && f.Cursor != "" {
			w.Problem("for_each", "for_each takes next (a URL) or cursor (a value), not both")
		}
		if f.CursorParam != "" && f.Cursor == "" {
			w.Problem("for_each.cursor_param", "cursor_param needs cursor: the path of the cursor in the answer")
		}
		if f.Retry != nil && (f.Retry.MaxAttempts < 0 || f.Retry.Multiplier < 0 || (f.Retry.Multiplier > 0 && f.Retry.Multiplier < 1)) {
			w.Problem("for_each.retry", "max_attempts must be positive and multiplier at least 1")
		}
	}
}

// skeleton is the block as an onceflow.Schedule, with a fetch that fails.
func (s *Settings) skeleton() onceflow.Schedule {
	out := onceflow.Schedule{Name: s.Name, Workflow: s.workflow, Cron: s.Cron, Timezone: s.Timezone, RunKey: s.RunKey,
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

// UniqueName is the schedule's name (its workflow's by default): two files may not name
// the same schedule.
func (s *Settings) UniqueName() (string, string) {
	if s.Name != "" {
		return s.Name, ""
	}
	return s.workflow, ""
}

// Build builds the schedule; its for_each list is fetched through b.HTTPClient, or, without
// one, not at all (an outline, for a program that only lists or fires schedules).
func (s *Settings) Build(b *triggers.Build) (triggers.Trigger, error) {
	s.workflow = b.Workflow
	sc := s.skeleton()
	if f := s.ForEach; f != nil && b.HTTPClient != nil {
		fetch, err := newListFetch(f, b.HTTPClient, b.Env)
		if err != nil {
			return nil, fmt.Errorf("for_each: %w", err)
		}
		sc.ForEach.Fetch = fetch
	}
	return &Trigger{schedule: sc}, nil
}

var (
	_ triggers.Config = (*Settings)(nil)
	_ triggers.Unique = (*Settings)(nil)
)

// Trigger is a workflow's schedule, which the engine fires.
type Trigger struct{ schedule onceflow.Schedule }

var _ triggers.Scheduler = (*Trigger)(nil)

// Workflow names the workflow the schedule starts.
func (t *Trigger) Workflow() string { return t.schedule.Workflow }

// Schedules returns the schedule, to register after the workflow.
func (t *Trigger) Schedules() []onceflow.Schedule { return []onceflow.Schedule{t.schedule} }

type kind struct{}

// Kind returns the trigger kind of a workflow file's schedule: block, which package
// stdtriggers registers.
func Kind() triggers.Kind { return kind{} }

func (kind) Spec() triggers.Spec {
	return triggers.Spec{Block: "schedule", Trigger: onceflow.TriggerSchedule,
		Summary:     "Starts the workflow on the clock, or once per item of a list fetched at each tick.",
		Description: "Starts the workflow on the clock: one run per tick, keyed by the tick's nominal time.",
		Doc: "The engine's leader fires the ticks, one process at a time; ticks missed while nothing ran are caught up as " +
			"catch_up says, and a for_each list is fetched through the egress policy.",
		Schema: json.RawMessage(settingsSchema), Settings: reflect.TypeFor[Settings](), Unique: "schedule %q is also defined in %s; give one of them another name"}
}

func (kind) Decode(s block.Settings, workflow string) (triggers.Config, error) {
	c := &Settings{workflow: workflow}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	c.workflow = workflow
	return c, nil
}

// maxListPage caps the bytes of one page of a fan-out's list.
const maxListPage = 16 << 20

var pathRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

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

// newListFetch builds the fetch of a for_each list.
func newListFetch(f *ForEachSettings, client *http.Client, env func(string) (string, bool)) (func(context.Context, onceflow.Tick, string) (onceflow.FanOutPage, error), error) {
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
func parseListPage(body []byte, f *ForEachSettings) (onceflow.FanOutPage, error) {
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
