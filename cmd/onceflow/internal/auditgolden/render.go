package auditgolden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store"
)

// PageSize is the size of the pages the unfiltered answers are read in: small, so that
// every scenario spans several pages.
const PageSize = 7

// readSecret is the read token's secret the API and the console are read with (a test
// value, never shown by either).
const readSecret = "golden-read-token-0123456789"

// Outputs are the front-ends Render reads besides the store and Explain.
type Outputs struct {
	// WrapAPI, when set, wraps the API's handler (to check each exchange against the
	// OpenAPI document).
	WrapAPI func(http.Handler) http.Handler
	// Audit, when set, runs `onceflow audit --json` with args (the caller adds --db) and
	// returns what it printed.
	Audit func(args ...string) (string, error)
	// Console reads the console's events tables. The sign-in it takes appends an event
	// (console.signed_in, of no run), so it is read last.
	Console bool
}

// Render writes what the front-ends show of the driver's audit trail, as text. An answer
// that breaks a rule every answer keeps (pages that do not add up to the whole, an event
// that differs between two answers) is written into the text, where the golden file's
// diff shows it.
func Render(d *Driver, o Outputs) (string, error) {
	r := &renderer{d: d, norm: normalizer{base: Base}}
	if err := r.render(o); err != nil {
		return "", err
	}
	if r.norm.err != nil {
		return "", r.norm.err
	}
	return r.b.String(), nil
}

type renderer struct {
	d    *Driver
	b    strings.Builder
	norm normalizer
	all  []*store.Event
}

func (r *renderer) line(format string, args ...any) {
	r.b.WriteString(r.norm.text(fmt.Sprintf(format, args...)))
	r.b.WriteByte('\n')
}

func (r *renderer) section(title string) { r.line("\n== %s", title) }

// queries are the filters every front-end is asked: each run, entity and effect key of the
// trail (in the order they first appear) and a time range over its middle third.
type queries struct {
	runs         []int64
	entities     []string
	keys         []string
	since, until time.Time
}

func queriesOf(all []*store.Event) queries {
	var q queries
	seenRun, seenEntity, seenKey := map[int64]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range all {
		if e.RunID != 0 && !seenRun[e.RunID] {
			seenRun[e.RunID] = true
			q.runs = append(q.runs, e.RunID)
		}
		if e.Entity != "" && !seenEntity[e.Entity] {
			seenEntity[e.Entity] = true
			q.entities = append(q.entities, e.Entity)
		}
		if e.EffectKey != "" && !seenKey[e.EffectKey] {
			seenKey[e.EffectKey] = true
			q.keys = append(q.keys, e.EffectKey)
		}
	}
	if n := len(all); n > 0 {
		q.since, q.until = all[n/3].At, all[2*n/3].At
		if !q.until.After(q.since) {
			q.until = q.since.Add(time.Millisecond)
		}
	}
	return q
}

func (r *renderer) render(o Outputs) error {
	d := r.d
	all, err := d.Store.EventList(d.Ctx, store.EventListParams{Limit: 1000})
	if err != nil {
		return fmt.Errorf("EventList: %w", err)
	}
	r.all = all
	q := queriesOf(all)
	fmt.Fprintf(&r.b, "# times are offsets from %s (T+0s)\n", Base.Format(time.RFC3339))

	r.section("runs")
	for _, id := range q.runs {
		run, err := d.Store.RunGetByID(d.Ctx, id)
		if err != nil {
			r.line("run %d: %v", id, err)
			continue
		}
		steps, err := d.Store.StepListByRun(d.Ctx, id)
		if err != nil {
			return err
		}
		var ss []string
		for _, s := range steps {
			ss = append(ss, fmt.Sprintf("%s=%s", s.Name, s.State))
		}
		r.line("run %d %s key=%q entity=%q %s: %s", run.ID, run.Workflow, run.RunKey, run.Entity, run.State, strings.Join(ss, " "))
	}

	// Store.EventList, in pages.
	r.section(fmt.Sprintf("Store.EventList, pages of %d, each event explained", PageSize))
	var paged []*store.Event
	for after := int64(0); ; {
		page, err := d.Store.EventList(d.Ctx, store.EventListParams{AfterID: after, Limit: PageSize})
		if err != nil {
			return fmt.Errorf("EventList after %d: %w", after, err)
		}
		if after > 0 {
			r.line("-- page after #%d", after)
		}
		for _, e := range page {
			r.line("%s", eventLine(e))
			r.line("    why: %s", onceflow.Explain(e))
		}
		paged = append(paged, page...)
		if len(page) < PageSize {
			break
		}
		after = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(paged, all) {
		r.line("!! the pages differ from the whole list (%d events in one answer):", len(all))
		for _, e := range all {
			r.line("!! %s", eventLine(e))
		}
	}

	r.section("Store.EventList, filtered (ids; an event that differs from the whole list is shown)")
	byID := map[int64]*store.Event{}
	for _, e := range all {
		byID[e.ID] = e
	}
	storeQuery := func(label string, p store.EventListParams) error {
		p.Limit = 1000
		evs, err := d.Store.EventList(d.Ctx, p)
		if err != nil {
			return fmt.Errorf("EventList %s: %w", label, err)
		}
		var ids []string
		var odd []string
		for _, e := range evs {
			ids = append(ids, strconv.FormatInt(e.ID, 10))
			if !reflect.DeepEqual(e, byID[e.ID]) {
				odd = append(odd, "!! differs: "+eventLine(e))
			}
		}
		r.line("%s: %s", label, strings.Join(ids, " "))
		for _, s := range odd {
			r.line("%s", s)
		}
		return nil
	}
	for _, id := range q.runs {
		if err := storeQuery(fmt.Sprintf("run=%d", id), store.EventListParams{RunID: id}); err != nil {
			return err
		}
	}
	for _, e := range q.entities {
		if err := storeQuery(fmt.Sprintf("entity=%q", e), store.EventListParams{Entity: e}); err != nil {
			return err
		}
	}
	for _, k := range q.keys {
		if err := storeQuery(fmt.Sprintf("key=%q", k), store.EventListParams{EffectKey: k}); err != nil {
			return err
		}
	}
	if !q.since.IsZero() {
		if err := storeQuery(fmt.Sprintf("since=%s until=%s", stamp(q.since), stamp(q.until)), store.EventListParams{Since: q.since, Until: q.until}); err != nil {
			return err
		}
		if err := storeQuery(fmt.Sprintf("since=%s", stamp(q.since)), store.EventListParams{Since: q.since}); err != nil {
			return err
		}
		if err := storeQuery(fmt.Sprintf("run=%d until=%s", q.runs[0], stamp(q.until)), store.EventListParams{RunID: q.runs[0], Until: q.until}); err != nil {
			return err
		}
	}

	if err := r.api(o, q); err != nil {
		return err
	}
	if o.Audit != nil {
		if err := r.cli(o, q); err != nil {
			return err
		}
	}
	if o.Console {
		if err := r.console(q); err != nil {
			return err
		}
	}
	return nil
}

// stamp writes t as the API and the command line take it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// eventLine writes every field of an event, the detail as stored.
func eventLine(e *store.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", e.ID, stamp(e.At), e.Type)
	if e.RunID != 0 {
		fmt.Fprintf(&b, " run=%d", e.RunID)
	}
	if e.StepID != 0 || e.StepName != "" {
		fmt.Fprintf(&b, " step=%d:%q", e.StepID, e.StepName)
	}
	if e.Workflow != "" {
		fmt.Fprintf(&b, " workflow=%q", e.Workflow)
	}
	if e.Entity != "" {
		fmt.Fprintf(&b, " entity=%q", e.Entity)
	}
	if e.EffectKey != "" {
		fmt.Fprintf(&b, " key=%q", e.EffectKey)
	}
	if e.Attempt != 0 {
		fmt.Fprintf(&b, " attempt=%d", e.Attempt)
	}
	fmt.Fprintf(&b, " actor=%q", e.Actor)
	if e.Reason != "" {
		fmt.Fprintf(&b, " reason=%q", e.Reason)
	}
	fmt.Fprintf(&b, " detail=%s", e.Detail)
	return b.String()
}

// jsonList reads a JSON array into its elements, each compacted.
func jsonList(raw []byte) ([]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, el := range list {
		var b bytes.Buffer
		if err := json.Compact(&b, el); err != nil {
			return nil, err
		}
		out[i] = b.String()
	}
	return out, nil
}

// idOf reads the id of an audit entry's JSON.
func idOf(el string) int64 {
	var v struct {
		ID int64 `json:"id"`
	}
	_ = json.Unmarshal([]byte(el), &v)
	return v.ID
}

// listed writes a filtered answer as its ids, and in full every element that differs from
// the element of the same id in whole.
func (r *renderer) listed(label string, els []string, whole map[int64]string) {
	var ids, odd []string
	for _, el := range els {
		id := idOf(el)
		ids = append(ids, strconv.FormatInt(id, 10))
		if whole[id] != el {
			odd = append(odd, "!! differs: "+el)
		}
	}
	r.line("%s: %s", label, strings.Join(ids, " "))
	for _, s := range odd {
		r.line("%s", s)
	}
}

// api reads GET /v1/audit of a real server over the driver's client.
func (r *renderer) api(o Outputs, q queries) error {
	d := r.d
	tokens, err := onceflowhttp.ParseTokens("golden-reader:read:" + readSecret)
	if err != nil {
		return err
	}
	h, err := onceflowhttp.NewHandler(d.Client, onceflowhttp.Options{Tokens: tokens})
	if err != nil {
		return err
	}
	var handler http.Handler = h
	if o.WrapAPI != nil {
		handler = o.WrapAPI(handler)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	get := func(query url.Values) ([]string, int64, error) {
		req, _ := http.NewRequestWithContext(d.Ctx, http.MethodGet, srv.URL+"/v1/audit?"+query.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+readSecret)
		resp, err := srv.Client().Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, 0, fmt.Errorf("GET /v1/audit?%s: %d %s", query.Encode(), resp.StatusCode, body)
		}
		var page struct {
			Events    json.RawMessage `json:"events"`
			NextAfter int64           `json:"next_after"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, 0, fmt.Errorf("GET /v1/audit: %w", err)
		}
		els, err := jsonList(page.Events)
		return els, page.NextAfter, err
	}

	r.section(fmt.Sprintf("GET /v1/audit, limit=%d, following next_after", PageSize))
	whole := map[int64]string{}
	var ids []int64
	for after := int64(0); ; {
		query := url.Values{"limit": {strconv.Itoa(PageSize)}}
		if after > 0 {
			query.Set("after", strconv.FormatInt(after, 10))
			r.line("-- after=%d", after)
		}
		els, next, err := get(query)
		if err != nil {
			return err
		}
		for _, el := range els {
			r.line("%s", el)
			whole[idOf(el)] = el
			ids = append(ids, idOf(el))
		}
		if next == 0 {
			break
		}
		after = next
	}
	r.sameIDs("GET /v1/audit", ids)

	r.section("GET /v1/audit, filtered (ids; an event that differs from the pages is shown)")
	ask := func(label string, query url.Values) error {
		query.Set("limit", "1000")
		els, _, err := get(query)
		if err != nil {
			return err
		}
		r.listed(label, els, whole)
		return nil
	}
	for _, id := range q.runs {
		if err := ask(fmt.Sprintf("run=%d", id), url.Values{"run": {strconv.FormatInt(id, 10)}}); err != nil {
			return err
		}
	}
	for _, e := range q.entities {
		if err := ask(fmt.Sprintf("entity=%q", e), url.Values{"entity": {e}}); err != nil {
			return err
		}
	}
	for _, k := range q.keys {
		if err := ask(fmt.Sprintf("key=%q", k), url.Values{"key": {k}}); err != nil {
			return err
		}
	}
	if !q.since.IsZero() {
		if err := ask(fmt.Sprintf("since=%s until=%s", stamp(q.since), stamp(q.until)), url.Values{"since": {stamp(q.since)}, "until": {stamp(q.until)}}); err != nil {
			return err
		}
	}
	return nil
}

// sameIDs writes a note when a front-end's whole answer does not hold the events of
// Store.EventList, in its order.
func (r *renderer) sameIDs(what string, ids []int64) {
	want := make([]int64, len(r.all))
	for i, e := range r.all {
		want[i] = e.ID
	}
	if !reflect.DeepEqual(ids, want) && !(len(ids) == 0 && len(want) == 0) {
		r.line("!! %s lists events %v, Store.EventList %v", what, ids, want)
	}
}

// cli reads `onceflow audit --json`.
func (r *renderer) cli(o Outputs, q queries) error {
	run := func(args ...string) ([]string, error) {
		out, err := o.Audit(append(args, "--json")...)
		if err != nil {
			return nil, fmt.Errorf("onceflow audit %s: %w", strings.Join(args, " "), err)
		}
		return jsonList([]byte(out))
	}
	r.section("onceflow audit --json")
	els, err := run()
	if err != nil {
		return err
	}
	whole := map[int64]string{}
	var ids []int64
	for _, el := range els {
		r.line("%s", el)
		whole[idOf(el)] = el
		ids = append(ids, idOf(el))
	}
	r.sameIDs("onceflow audit --json", ids)

	r.section("onceflow audit --json, filtered (ids; an event that differs from the whole list is shown)")
	ask := func(label string, args ...string) error {
		els, err := run(args...)
		if err != nil {
			return err
		}
		r.listed(label, els, whole)
		return nil
	}
	for _, id := range q.runs {
		if err := ask(fmt.Sprintf("--run %d", id), "--run", strconv.FormatInt(id, 10)); err != nil {
			return err
		}
	}
	for _, e := range q.entities {
		if err := ask(fmt.Sprintf("--entity %q", e), "--entity", e); err != nil {
			return err
		}
	}
	for _, k := range q.keys {
		if err := ask(fmt.Sprintf("--key %q", k), "--key", k); err != nil {
			return err
		}
	}
	if !q.since.IsZero() {
		if err := ask(fmt.Sprintf("--since %s --until %s", stamp(q.since), stamp(q.until)), "--since", stamp(q.since), "--until", stamp(q.until)); err != nil {
			return err
		}
	}
	return nil
}

var (
	csrfField   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	eventsTable = regexp.MustCompile(`(?s)<table class="events">.*?<tbody>(.*?)</tbody>`)
	tableRow    = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	tableCell   = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
	markup      = regexp.MustCompile(`<[^>]*>`)
)

// console reads the events tables of /ui/runs/{id} and /ui/keys?key= of a real console,
// signed in with a read token.
func (r *renderer) console(q queries) error {
	d := r.d
	tokens, err := onceflowhttp.ParseTokens("golden-reader:read:" + readSecret)
	if err != nil {
		return err
	}
	console, err := onceflowui.New(onceflowui.Config{Client: d.Client, Tokens: tokens})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(console)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fetch := func(method, path string, form url.Values) (int, string, error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequestWithContext(d.Ctx, method, srv.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	_, page, err := fetch(http.MethodGet, "/ui/login", nil)
	if err != nil {
		return err
	}
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		return fmt.Errorf("console: no CSRF field on the sign-in page")
	}
	status, body, err := fetch(http.MethodPost, "/ui/login", url.Values{"csrf": {html.UnescapeString(m[1])}, "token": {readSecret}, "next": {"/ui/runs"}})
	if err != nil {
		return err
	}
	if status != http.StatusSeeOther {
		return fmt.Errorf("console: sign-in answered %d:\n%s", status, body)
	}
	table := func(path string) error {
		status, body, err := fetch(http.MethodGet, path, nil)
		if err != nil {
			return err
		}
		r.line("-- %s (%d)", path, status)
		t := eventsTable.FindStringSubmatch(body)
		if t == nil {
			r.line("!! no events table")
			return nil
		}
		for _, row := range tableRow.FindAllStringSubmatch(t[1], -1) {
			var cells []string
			for _, c := range tableCell.FindAllStringSubmatch(row[1], -1) {
				cells = append(cells, strings.TrimSpace(html.UnescapeString(markup.ReplaceAllString(c[1], ""))))
			}
			r.line("%s", strings.Join(cells, " | "))
		}
		return nil
	}
	r.section("console: the events tables of /ui/runs/{id} and /ui/keys?key= (# | at | event | step | actor | what happened)")
	for _, id := range q.runs {
		if err := table(fmt.Sprintf("/ui/runs/%d", id)); err != nil {
			return err
		}
	}
	for _, k := range q.keys {
		if err := table("/ui/keys?key=" + url.QueryEscape(k)); err != nil {
			return err
		}
	}
	return nil
}

// normalizer writes every time in a text as its offset from base: "T+1m2.5s" for a time in
// UTC, "T+3h0m0s@+01:00" for one written in another zone. A time more than a day before
// base or thirty days after it came from no clock of the scenario: it is an error.
type normalizer struct {
	base time.Time
	err  error
}

var (
	rfc3339   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`)
	consoleAt = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`)
)

func (n *normalizer) text(s string) string {
	s = rfc3339.ReplaceAllStringFunc(s, func(v string) string {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			n.fail(fmt.Errorf("time %q: %w", v, err))
			return v
		}
		zone := ""
		if !strings.HasSuffix(v, "Z") {
			zone = "@" + v[len(v)-6:]
		}
		return n.offset(t) + zone
	})
	return consoleAt.ReplaceAllStringFunc(s, func(v string) string {
		t, err := time.Parse("2006-01-02 15:04:05 MST", v)
		if err != nil {
			n.fail(fmt.Errorf("time %q: %w", v, err))
			return v
		}
		return n.offset(t)
	})
}

func (n *normalizer) offset(t time.Time) string {
	d := t.Sub(n.base)
	if d < -24*time.Hour || d > 30*24*time.Hour {
		n.fail(fmt.Errorf("time %s is %v from the scenario's base %s: no clock of the scenario made it", t.Format(time.RFC3339Nano), d, n.base.Format(time.RFC3339)))
	}
	if d < 0 {
		return "T-" + (-d).String()
	}
	return "T+" + d.String()
}

func (n *normalizer) fail(err error) {
	if n.err == nil {
		n.err = err
	}
}
