package onceflowui_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store"
)

// scheduleBundle is a console over a client with the hourly schedule "hourly" (workflow
// report, Europe/Berlin, catch-up latest) that missed five ticks: the scheduler's clock
// stood still from 10:30 to 15:30 UTC on 2026-11-17, so the 15:00 tick was started late
// and the four before it skipped.
type scheduleBundle struct {
	*bundle
	client *onceflow.Client
	srv    *httptest.Server
	now    time.Time
}

func setupSchedule(t *testing.T) *scheduleBundle {
	t.Helper()
	b := setup(t)
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Date(2026, 11, 17, 10, 30, 0, 0, time.UTC)
	client, err := onceflow.New(onceflow.Config{Store: b.store, ScheduleClock: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Register(onceflow.Workflow{Name: "report", Steps: []onceflow.Step{{ID: "send",
		Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}); err != nil {
		t.Fatal(err)
	}
	if err := client.RegisterSchedule(onceflow.Schedule{Name: "hourly", Workflow: "report", Cron: "0 * * * *", Timezone: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	if err := client.FireSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(5 * time.Hour)
	mu.Unlock()
	if err := client.FireSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	tokens, err := onceflowhttp.ParseTokens("viewer:read:" + readSecret + ",ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newConsole(t, onceflowui.Config{Client: client, Tokens: tokens}))
	t.Cleanup(srv.Close)
	return &scheduleBundle{bundle: b, client: client, srv: srv, now: now}
}

func (sb *scheduleBundle) browser() *browser {
	br := sb.bundle.browser()
	br.base = sb.srv.URL
	return br
}

func (sb *scheduleBundle) reportRuns(t *testing.T) []*store.Run {
	t.Helper()
	runs, err := sb.store.RunList(t.Context(), store.RunListParams{Workflow: "report"})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// The schedules page shows each schedule's next ticks in its zone, the last tick fired
// and its run, and the catch-up decisions of the trail, newest first.
func TestSchedulesPage(t *testing.T) {
	sb := setupSchedule(t)
	runs := sb.reportRuns(t)
	if len(runs) != 1 || runs[0].RunKey != "hourly:2026-11-17T16:00:00+01:00" {
		t.Fatalf("the scheduler started %+v, want the 15:00 UTC tick's run", runs)
	}
	br := sb.browser()
	br.signIn(readSecret)
	resp, body := br.get("/ui/schedules")
	wantStatus(t, resp, body, http.StatusOK)
	for _, want := range []string{
		`<dt>cron</dt><dd><code>0 * * * *</code> in Europe/Berlin</dd>`,
		`<dd class="next"><time class="zoned" datetime="2026-11-17T16:00:00Z" title="2026-11-17 16:00:00 UTC">2026-11-17 17:00:00 CET</time>, <time class="zoned" datetime="2026-11-17T17:00:00Z"`,
		`<dd class="last"><time class="zoned" datetime="2026-11-17T15:00:00Z" title="2026-11-17 15:00:00 UTC">2026-11-17 16:00:00 CET</time>: run <a href="/ui/runs/` + itoa(runs[0].ID) + `">`,
		`<dt>decided through</dt><dd><time class="zoned" datetime="2026-11-17T15:00:00Z" title="2026-11-17 15:00:00 UTC">2026-11-17 16:00:00 CET</time></dd>`,
		`<code>schedule.tick_late</code>`,
		`started late by 30m0s`,
		`Schedules</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the schedules page lacks %s", want)
		}
	}
	// Newest first: the late start, then the four skipped ticks from 14:00 back to 11:00.
	types := regexp.MustCompile(`<code>(schedule\.tick_[a-z]+)</code>`).FindAllStringSubmatch(body, -1)
	ticks := regexp.MustCompile(`tick (2026-11-17T[0-9:]+)&#43;01:00`).FindAllStringSubmatch(body, -1)
	var got []string
	if len(ticks) < len(types) {
		t.Fatalf("decisions %q, ticks %q:\n%s", types, ticks, body)
	}
	for i := range types {
		got = append(got, types[i][1]+" "+ticks[i][1])
	}
	want := []string{"schedule.tick_late 2026-11-17T16:00:00", "schedule.tick_skipped 2026-11-17T15:00:00",
		"schedule.tick_skipped 2026-11-17T14:00:00", "schedule.tick_skipped 2026-11-17T13:00:00", "schedule.tick_skipped 2026-11-17T12:00:00"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("catch-up decisions\n%s\nwant\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), body)
	}
	if !regexp.MustCompile(`id="preview-hourly" disabled>`).MatchString(body) {
		t.Error("a read session's trigger button is enabled")
	}
	resp, body = br.post("/ui/schedules/hourly/preview", url.Values{"csrf": {csrfOf(t, body)}})
	wantStatus(t, resp, body, http.StatusForbidden)
	resp, body = br.post("/ui/schedules/hourly/trigger", url.Values{"csrf": {csrfOf(t, body)}, "at": {"2026-11-17T10:00:00+01:00"},
		"run_key": {"hourly:2026-11-17T10:00:00+01:00"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	if n := len(sb.reportRuns(t)); n != 1 {
		t.Fatalf("a read session's trigger left %d runs", n)
	}
}

// "Trigger now" previews the run key it will use; the confirmation starts exactly that
// run, audited as the person, once; a confirmation whose key is not the tick's starts
// nothing; a time that is not a tick is refused with the ticks around it.
func TestScheduleTriggerNow(t *testing.T) {
	sb := setupSchedule(t)
	br := sb.browser()
	br.signIn(adminSecret)
	_, page := br.get("/ui/schedules")
	csrf := csrfOf(t, page)

	// The latest tick ran: the preview says which run holds its key.
	// The pages' text, as the person reads it (html/template writes + as &#43;).
	post := func(path string, form url.Values) (*http.Response, string) {
		resp, body := br.post(path, form)
		return resp, html.UnescapeString(body)
	}
	resp, body := post("/ui/schedules/hourly/preview", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusOK)
	first := sb.reportRuns(t)[0]
	if !strings.Contains(body, `<code class="runkey">hourly:2026-11-17T16:00:00+01:00</code>`) ||
		!strings.Contains(body, `Run <a href="/ui/runs/`+itoa(first.ID)+`">`+itoa(first.ID)+`</a> holds this key already`) {
		t.Fatalf("preview of the latest tick:\n%s", body)
	}

	// A missed tick: previewed, then confirmed.
	resp, body = post("/ui/schedules/hourly/preview", url.Values{"csrf": {csrf}, "at": {"2026-11-17T11:00:00Z"}})
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `<code class="runkey">hourly:2026-11-17T12:00:00+01:00</code>`) || strings.Contains(body, "holds this key already") {
		t.Fatalf("preview of a skipped tick:\n%s", body)
	}
	if n := len(sb.reportRuns(t)); n != 1 {
		t.Fatalf("the preview started a run: %d runs", n)
	}
	confirm := url.Values{"csrf": {csrf}, "at": {regexp.MustCompile(`type="hidden" name="at" value="([^"]+)"`).FindStringSubmatch(body)[1]},
		"run_key": {"hourly:2026-11-17T12:00:00+01:00"}}
	if confirm.Get("at") != "2026-11-17T12:00:00+01:00" {
		t.Fatalf("the confirmation carries tick %q", confirm.Get("at"))
	}
	// A confirmation whose key is not the one the tick renders starts nothing.
	stale := url.Values{"csrf": {csrf}, "at": confirm["at"], "run_key": {"hourly:something-else"}}
	resp, body = post("/ui/schedules/hourly/trigger", stale)
	wantStatus(t, resp, body, http.StatusConflict)
	if !strings.Contains(body, "preview again") || len(sb.reportRuns(t)) != 1 {
		t.Fatalf("a confirmation of another key: %d runs\n%s", len(sb.reportRuns(t)), body)
	}
	resp, body = post("/ui/schedules/hourly/trigger", confirm)
	wantStatus(t, resp, body, http.StatusSeeOther)
	runs := sb.reportRuns(t)
	var started *store.Run
	for _, r := range runs {
		if r.RunKey == "hourly:2026-11-17T12:00:00+01:00" {
			started = r
		}
	}
	if len(runs) != 2 || started == nil || resp.Header.Get("Location") != "/ui/runs/"+itoa(started.ID) {
		t.Fatalf("after the confirmation: runs %+v, redirected to %s", runs, resp.Header.Get("Location"))
	}
	evs, err := sb.client.Audit(t.Context(), onceflow.AuditQuery{RunID: started.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].Type != store.EventRunCreated || evs[0].Actor != "token:ops" {
		t.Fatalf("the triggered run's first event %+v, want run.created by token:ops", evs)
	}
	// Confirmed again (a second click): the same run, nothing new.
	resp, body = post("/ui/schedules/hourly/trigger", confirm)
	wantStatus(t, resp, body, http.StatusSeeOther)
	if n := len(sb.reportRuns(t)); n != 2 || resp.Header.Get("Location") != "/ui/runs/"+itoa(started.ID) {
		t.Fatalf("a second confirmation: %d runs, redirected to %s", n, resp.Header.Get("Location"))
	}

	// Not a tick, and not a time.
	resp, body = post("/ui/schedules/hourly/preview", url.Values{"csrf": {csrf}, "at": {"2026-11-17T11:30:00Z"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	if !strings.Contains(body, `id="error-hourly"`) || !strings.Contains(body, "the tick before is 2026-11-17T12:00:00+01:00, the one after 2026-11-17T13:00:00+01:00") {
		t.Fatalf("preview of a time that is not a tick:\n%s", body)
	}
	resp, body = post("/ui/schedules/hourly/preview", url.Values{"csrf": {csrf}, "at": {"tomorrow"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	if !strings.Contains(body, "is not an RFC 3339 time") {
		t.Fatalf("preview of a malformed time:\n%s", body)
	}
	resp, body = post("/ui/schedules/nope/preview", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusNotFound)
	resp, body = post("/ui/schedules/hourly/trigger", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	if n := len(sb.reportRuns(t)); n != 2 {
		t.Fatalf("refused triggers left %d runs, want 2", n)
	}
}

// An admin of some workflows may trigger the schedules of those workflows only: the
// schedule's workflow decides, not its name.
func TestScheduleTriggerNeedsTheWorkflowsAdmin(t *testing.T) {
	ob := setupOIDC(t)
	for _, sc := range []onceflow.Schedule{
		{Name: "signup-nightly", Workflow: "signup", Cron: "0 2 * * *"},
		{Name: "billing-nightly", Workflow: "billing", Cron: "0 3 * * *"},
		// Named as the workflow alice administers, starting another.
		{Name: "signup", Workflow: "billing", Cron: "0 4 * * *"},
	} {
		if err := ob.client.RegisterSchedule(sc); err != nil {
			t.Fatal(err)
		}
	}
	br := ob.browser()
	ob.oidcSignIn(br, alice, nil)
	resp, page := br.get("/ui/schedules")
	wantStatus(t, resp, page, http.StatusOK)
	if strings.Contains(page, `id="preview-signup-nightly" disabled`) || !strings.Contains(page, `id="preview-billing-nightly" disabled`) ||
		!strings.Contains(page, `id="preview-signup" disabled`) {
		t.Errorf("alice's schedules page should offer triggering signup-nightly only:\n%s", page)
	}
	csrf := csrfOf(t, page)
	runs := func() int {
		t.Helper()
		list, err := ob.store.RunList(t.Context(), store.RunListParams{Workflow: "billing"})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	before := runs()
	for _, name := range []string{"billing-nightly", "signup"} {
		resp, body := br.post("/ui/schedules/"+name+"/preview", url.Values{"csrf": {csrf}})
		wantStatus(t, resp, body, http.StatusForbidden)
		resp, body = br.post("/ui/schedules/"+name+"/trigger", url.Values{"csrf": {csrf}, "at": {"2026-11-17T03:00:00Z"}, "run_key": {name + ":2026-11-17T03:00:00Z"}})
		wantStatus(t, resp, body, http.StatusForbidden)
	}
	if n := runs(); n != before {
		t.Fatalf("alice's refused triggers started %d billing runs", n-before)
	}
	resp, body := br.post("/ui/schedules/signup-nightly/preview", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `id="trigger-preview-signup-nightly"`) {
		t.Fatalf("alice's preview of signup-nightly:\n%s", body)
	}
}
