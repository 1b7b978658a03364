package onceflowui_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store"
)

// browser is an HTTP client with a cookie jar that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (b *bundle) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: b.t, base: b.srv.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (br *browser) do(req *http.Request) (*http.Response, string) {
	br.t.Helper()
	resp, err := br.c.Do(req)
	if err != nil {
		br.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (br *browser) get(path string) (*http.Response, string) {
	br.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, br.base+path, nil)
	return br.do(req)
}

func (br *browser) post(path string, form url.Values) (*http.Response, string) {
	br.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, br.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return br.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// digestRE reads the plan digest of a replay preview.
var digestRE = regexp.MustCompile(`name="plan_digest" value="([0-9a-f]+)"`)

// planRow reads a replay preview's lines: action, step and why.
var planRow = regexp.MustCompile(`(?s)<tr class="act-([a-z]+)"><td>([^<]+)</td>.*?<td>([^<]*)</td></tr>`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", page)
	}
	return m[1]
}

// signIn signs br in with secret and returns the answer to the sign-in.
func (br *browser) signIn(secret string) *http.Response {
	br.t.Helper()
	_, page := br.get("/ui/login")
	resp, _ := br.post("/ui/login", url.Values{"csrf": {csrfOf(br.t, page)}, "token": {secret}, "next": {"/ui/runs"}})
	return resp
}

func wantStatus(t *testing.T, resp *http.Response, body string, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d, want %d:\n%s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
}

func TestSignIn(t *testing.T) {
	b := setup(t)
	br := b.browser()

	resp, body := br.get("/ui/runs?entity=customer:c-1001")
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/ui/login?next=") {
		t.Fatalf("signed-out page redirects to %q, want the sign-in page", loc)
	}
	resp, body = br.get("/ui/runs/1/live")
	wantStatus(t, resp, body, http.StatusUnauthorized)

	// The sign-in form needs its CSRF token.
	resp, body = br.post("/ui/login", url.Values{"token": {adminSecret}})
	wantStatus(t, resp, body, http.StatusForbidden)

	for _, bad := range []string{"not-a-token-at-all-000", "ingest-token-0123456789"} {
		resp := br.signIn(bad)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("sign-in with %q = %d, want 401", bad[:6], resp.StatusCode)
		}
	}

	resp = br.signIn(readSecret)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs" {
		t.Fatalf("sign-in = %d to %q, want 303 to /ui/runs", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "onceflow_session" {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.MaxAge <= 0 || ck.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, expiring, not Secure on plain HTTP", ck)
	}
	if strings.Contains(ck.Value, readSecret) {
		t.Fatal("the session cookie holds the token's secret")
	}
	resp, body = br.get("/ui/runs?entity=customer:c-1001")
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "evt-1001") || !strings.Contains(body, "viewer · read only") {
		t.Fatalf("runs page lacks the run or the session:\n%s", body)
	}

	// A tampered cookie is no session.
	u, _ := url.Parse(b.srv.URL + "/ui/")
	br.c.Jar.SetCookies(u, []*http.Cookie{{Name: "onceflow_session", Value: ck.Value[:len(ck.Value)-2] + "xx", Path: "/ui/"}})
	resp, body = br.get("/ui/")
	wantStatus(t, resp, body, http.StatusSeeOther)
}

func TestSecurityHeadersAndNoInlineScript(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.signIn(adminSecret)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<script>|\son[a-z]+\s*=|\sstyle\s*=|javascript:`)
	for _, path := range []string{"/ui/", "/ui/runs", "/ui/runs/1", "/ui/review", "/ui/review/1/notify", "/ui/keys?key=crm-create:c-1001", "/ui/audit", "/ui/login"} {
		resp, body := br.get(path)
		wantStatus(t, resp, body, http.StatusOK)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, resp.Header)
		}
		if m := inline.FindString(body); m != "" {
			t.Errorf("%s: inline script or style %q", path, m)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s: refers to another host", path)
		}
	}
	resp, body := br.get("/ui/static/console.js")
	wantStatus(t, resp, body, http.StatusOK)
}

func TestReadTokenCannotAct(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.signIn(readSecret)
	_, page := br.get("/ui/review/1/notify")
	if !strings.Contains(page, `id="readonly"`) {
		t.Fatal("the item page does not say the session is read only")
	}
	csrf := csrfOf(t, page)
	for _, action := range []string{"retry", "abandon", "resolve", "replay", "preview"} {
		resp, body := br.post("/ui/review/1/notify/"+action, url.Values{"csrf": {csrf}, "merge_patch": {`{"phone":"+4915112345"}`}})
		wantStatus(t, resp, body, http.StatusForbidden)
	}
	resp, body := br.post("/ui/review/bulk", url.Values{"csrf": {csrf}, "action": {"abandon"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	it, err := b.client.ReviewGet(t.Context(), b.runID, "notify")
	if err != nil || it.State != store.StateNeedsReview {
		t.Fatalf("after refused actions the item is %+v, %v; want it still in review", it, err)
	}
	// Signing out needs only the session.
	resp, body = br.post("/ui/logout", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = br.get("/ui/")
	wantStatus(t, resp, body, http.StatusSeeOther)
}

func TestCSRFRequired(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.signIn(adminSecret)
	_, page := br.get("/ui/review/1/notify")
	csrf := csrfOf(t, page)
	for _, form := range []url.Values{{}, {"csrf": {"forged"}}, {"csrf": {csrf[:len(csrf)-1]}}} {
		resp, body := br.post("/ui/review/1/notify/abandon", form)
		wantStatus(t, resp, body, http.StatusForbidden)
	}
	// Another admin session's token is not this session's.
	other := b.browser()
	other.signIn(adminSecret)
	_, otherPage := other.get("/ui/review/1/notify")
	resp, body := br.post("/ui/review/1/notify/abandon", url.Values{"csrf": {csrfOf(t, otherPage)}})
	wantStatus(t, resp, body, http.StatusForbidden)
	// A cross-site request is refused even with the token.
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/ui/review/1/notify/abandon", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, body = br.do(req)
	wantStatus(t, resp, body, http.StatusForbidden)

	it, err := b.client.ReviewGet(t.Context(), b.runID, "notify")
	if err != nil || it.State != store.StateNeedsReview {
		t.Fatalf("after refused requests the item is %+v, %v; want it still in review", it, err)
	}
}

func TestCanaryNeverShown(t *testing.T) { eachStore(t, testCanaryNeverShown) }

func testCanaryNeverShown(t *testing.T, b *bundle) {
	br := b.browser()
	br.signIn(adminSecret)
	_, page := br.get("/ui/review/1/notify")
	// A preview and a refused replay echo what was typed and the engine's answer.
	br.post("/ui/review/1/notify/preview", url.Values{"csrf": {csrfOf(t, page)}, "merge_patch": {`{"note":"x"}`}})
	for _, path := range []string{"/ui/", "/ui/runs", "/ui/runs/1", "/ui/runs/1/live", "/ui/review", "/ui/review/1/notify",
		"/ui/review/1/notify/live", "/ui/keys?key=sms-welcome:c-1001", "/ui/keys?key=crm-create:c-1001", "/ui/audit", "/ui/audit?run=1",
		"/ui/audit/export.csv", "/ui/audit/export.json?entity=customer:c-1001"} {
		resp, body := br.get(path)
		wantStatus(t, resp, body, http.StatusOK)
		if strings.Contains(body, canarySecret) || strings.Contains(body, canaryPII) || strings.Contains(body, "canary") {
			t.Errorf("%s shows a canary", path)
		}
	}
	_, body := br.get("/ui/runs/1")
	if !strings.Contains(body, "[redacted]") {
		t.Error("the run page masks nothing")
	}
}

func TestReplayThroughConsole(t *testing.T) { eachStore(t, testReplayThroughConsole) }

func testReplayThroughConsole(t *testing.T, b *bundle) {
	br := b.browser()
	br.signIn(adminSecret)
	_, page := br.get("/ui/review/1/notify")
	csrf := csrfOf(t, page)

	// An invalid correction is refused with what was typed kept.
	resp, body := br.post("/ui/review/1/notify/preview", url.Values{"csrf": {csrf}, "merge_patch": {`{"phone": `}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)

	form := url.Values{"csrf": {csrf}, "merge_patch": {`{"phone":"+4915112345"}`}, "note": {"customer gave the full number"}}
	resp, body = br.post("/ui/review/1/notify/preview", form)
	wantStatus(t, resp, body, http.StatusOK)
	// The preview's lines are the API's dry run, step for step: action and explanation.
	req, _ := http.NewRequest(http.MethodPost, b.api.URL+"/v1/review/1/notify/replay?dry_run=true", strings.NewReader(`{"merge_patch":{"phone":"+4915112345"}}`))
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	apiResp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var dry struct {
		Plan struct {
			Steps  []struct{ Step, Action, Why string }
			Digest string
		}
	}
	err = json.NewDecoder(apiResp.Body).Decode(&dry)
	apiResp.Body.Close()
	if err != nil || apiResp.StatusCode != http.StatusOK {
		t.Fatalf("API dry run: %d %v", apiResp.StatusCode, err)
	}
	type line struct{ Step, Action, Why string }
	var want, got []line
	for _, ps := range dry.Plan.Steps {
		want = append(want, line{ps.Step, ps.Action, ps.Why})
	}
	for _, m := range planRow.FindAllStringSubmatch(body, -1) {
		got = append(got, line{m[2], m[1], html.UnescapeString(m[3])})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the console's preview\n%q\nthe API's dry run\n%q", got, want)
	}
	actions := map[string]string{}
	for _, l := range want {
		actions[l.Step] = l.Action
	}
	if actions["create"] != "kept" || actions["task"] != "kept" || actions["notify"] != "run" || len(actions) != 3 {
		t.Fatalf("plan %q: want create and task kept, notify run", want)
	}
	if !strings.Contains(body, `id="confirm"`) {
		t.Fatal("no confirm button after the preview")
	}
	// The confirmation carries the plan's digest, the one the API's dry run answers for
	// the same correction.
	m := digestRE.FindStringSubmatch(body)
	if m == nil || m[1] != dry.Plan.Digest {
		t.Fatalf("the preview's plan digest %q, the API's %q", m, dry.Plan.Digest)
	}
	// Without it, a replay is refused: it is confirmed from a preview.
	resp, body = br.post("/ui/review/1/notify/replay", form)
	wantStatus(t, resp, body, http.StatusBadRequest)
	form.Set("plan_digest", m[1])
	if n := b.dest.count("/notify"); n != 1 {
		t.Fatalf("the preview sent something: /notify got %d requests", n)
	}

	resp, body = br.post("/ui/review/1/notify/replay", form)
	wantStatus(t, resp, body, http.StatusSeeOther)
	b.waitFor("notify completed", func() bool {
		if _, err := b.client.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
		it, err := b.client.ReviewGet(t.Context(), b.runID, "notify")
		return err == nil && it.State == store.StateCompleted
	})
	if c, k, n := b.dest.count("/create"), b.dest.count("/task"), b.dest.count("/notify"); c != 1 || k != 1 || n != 2 {
		t.Fatalf("destination got /create %d and /task %d (want 1 each: kept), /notify %d (want 2: the refused one and the replay)", c, k, n)
	}
	evs, err := b.client.Audit(t.Context(), onceflow.AuditQuery{RunID: b.runID})
	if err != nil {
		t.Fatal(err)
	}
	var actors []string
	for _, e := range evs {
		if e.Type == store.EventReviewReplayed || e.Type == store.EventRunInputCorrected {
			actors = append(actors, e.Actor)
		}
	}
	if len(actors) != 2 || actors[0] != "token:ops" || actors[1] != "token:ops" {
		t.Fatalf("audit actors of the replay %v, want token:ops twice", actors)
	}
	_, body = br.get("/ui/runs/1")
	if !strings.Contains(body, "Revision 1") || !strings.Contains(body, "&#43;4915112345") {
		t.Fatalf("the run page lacks the input revision and its diff:\n%s", body)
	}
}

func TestFindRunsAndKeys(t *testing.T) { eachStore(t, testFindRunsAndKeys) }

func testFindRunsAndKeys(t *testing.T, b *bundle) {
	br := b.browser()
	br.signIn(readSecret)
	for path, want := range map[string]bool{
		"/ui/runs?entity=customer:c-1001":                true,
		"/ui/runs?entity=customer:nope":                  false,
		"/ui/runs?key=evt-1001&state=needs_review":       true,
		"/ui/runs?since=2000-01-01T00:00":                true,
		"/ui/runs?until=2000-01-01T00:00":                false,
		"/ui/runs?workflow=signup&since=2999-01-01":      false,
		"/ui/review?reason=permanent_error":              true,
		"/ui/review?workflow=signup&reason=key_conflict": false,
	} {
		resp, body := br.get(path)
		wantStatus(t, resp, body, http.StatusOK)
		if got := strings.Contains(body, `href="/ui/runs/1"`); got != want {
			t.Errorf("%s lists run 1: %v, want %v", path, got, want)
		}
	}
	resp, body := br.get("/ui/runs?since=yesterday")
	wantStatus(t, resp, body, http.StatusBadRequest)

	_, body = br.get("/ui/keys?key=crm-create:c-1001")
	if !strings.Contains(body, "<strong>Yes.</strong>") || !strings.Contains(body, `href="/ui/runs/1"`) || !strings.Contains(body, "&#34;id&#34;: 77") {
		t.Fatalf("key page for a completed key:\n%s", body)
	}
	_, body = br.get("/ui/keys?key=invoice-create:pi_123")
	if !strings.Contains(body, "<strong>No.</strong>") || !strings.Contains(body, "never seen") {
		t.Fatalf("key page for an unknown key:\n%s", body)
	}
	_, body = br.get("/ui/")
	if !strings.Contains(body, `<span class="n" id="review-total">1</span>`) || !strings.Contains(body, "permanent_error") {
		t.Fatalf("overview:\n%s", body)
	}
}

func TestBulkPreviewThenApply(t *testing.T) { eachStore(t, testBulkPreviewThenApply) }

func testBulkPreviewThenApply(t *testing.T, b *bundle) {
	br := b.browser()
	br.signIn(adminSecret)
	_, page := br.get("/ui/review?workflow=signup")
	form := url.Values{"csrf": {csrfOf(t, page)}, "workflow": {"signup"}, "action": {"abandon"}, "note": {"customer left"}, "dry_run": {"1"}}
	resp, body := br.post("/ui/review/bulk", form)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "would apply to 1, would be refused for 0") || !strings.Contains(body, `id="bulk-confirm"`) {
		t.Fatalf("bulk preview:\n%s", body)
	}
	if it, _ := b.client.ReviewGet(t.Context(), b.runID, "notify"); it.State != store.StateNeedsReview {
		t.Fatal("the preview changed the item")
	}
	form.Del("dry_run")
	// Without the items of its preview, the action is refused: it never runs the filter
	// again.
	resp, body = br.post("/ui/review/bulk", form)
	wantStatus(t, resp, body, http.StatusBadRequest)
	form["item"] = confirmItems(bulkPreview(t, br, form))
	resp, body = br.post("/ui/review/bulk", form)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "applied to 1, refused for 0") {
		t.Fatalf("bulk report:\n%s", body)
	}
	it, err := b.client.ReviewGet(t.Context(), b.runID, "notify")
	if err != nil || it.State != store.StateFailed {
		t.Fatalf("after a bulk abandon the item is %+v, %v", it, err)
	}
	// Once more: the item is no longer in review, and says so.
	resp, body = br.post("/ui/review/bulk", form)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "applied to 0, refused for 1") || !strings.Contains(body, "not in review") {
		t.Fatalf("second bulk report:\n%s", body)
	}
}

// itemRE reads the items a bulk preview's confirmation names.
var itemRE = regexp.MustCompile(`name="item" value="([^"]+)"`)

func confirmItems(page string) []string {
	var out []string
	for _, m := range itemRE.FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// bulkPreview is the page of the bulk preview of form (its dry run).
func bulkPreview(t *testing.T, br *browser, form url.Values) string {
	t.Helper()
	dry := url.Values{}
	for k, v := range form {
		dry[k] = v
	}
	dry.Set("dry_run", "1")
	resp, body := br.post("/ui/review/bulk", dry)
	wantStatus(t, resp, body, http.StatusOK)
	return body
}

func TestSessionExpiresAndEndsWithItsToken(t *testing.T) {
	b := setup(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	console := func(tokens string) *httptest.Server {
		toks, err := onceflowhttp.ParseTokens(tokens)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(newConsole(t, onceflowui.Config{Client: b.client, Tokens: toks, Now: clock, SessionTTL: time.Hour}))
		t.Cleanup(srv.Close)
		return srv
	}
	srv := console("ops:admin:" + adminSecret)
	br := b.browser()
	br.base = srv.URL
	br.signIn(adminSecret)
	for _, step := range []struct {
		after time.Duration
		want  int
	}{{0, http.StatusOK}, {59 * time.Minute, http.StatusOK}, {2 * time.Minute, http.StatusSeeOther}} {
		advance(step.after)
		if resp, body := br.get("/ui/"); resp.StatusCode != step.want {
			t.Fatalf("%v later: %d, want %d\n%s", step.after, resp.StatusCode, step.want, body)
		}
	}
	// A new sign-in; then the token's secret is rotated: its sessions end.
	br.signIn(adminSecret)
	if resp, body := br.get("/ui/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after signing in again: %d\n%s", resp.StatusCode, body)
	}
	br.base = console("ops:admin:rotated-secret-0123456789").URL
	if resp, body := br.get("/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session of a rotated token: %d, want a redirect to sign in\n%s", resp.StatusCode, body)
	}
}

// Without Config.Now the console reads its client's clock (the database's on PostgreSQL,
// so that every process agrees when a session ends): a session of an hour has ended once
// the client's clock is two hours on.
func TestConsoleReadsTheClientsClock(t *testing.T) {
	b := setup(t)
	var mu sync.Mutex
	now := time.Now()
	client, err := onceflow.New(onceflow.Config{Store: b.store, ClockSync: -1, Clock: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := onceflowhttp.ParseTokens("ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newConsole(t, onceflowui.Config{Client: client, Tokens: toks, SessionTTL: time.Hour}))
	t.Cleanup(srv.Close)
	br := b.browser()
	br.base = srv.URL
	br.signIn(adminSecret)
	if resp, body := br.get("/ui/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %d\n%s", resp.StatusCode, body)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if resp, body := br.get("/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("two hours later by the client's clock: %d, want a redirect to sign in\n%s", resp.StatusCode, body)
	}
}

// On TLS the session cookie is Secure; the request log names routes, never paths, queries,
// forms or tokens.
func TestTLSCookieAndRequestLog(t *testing.T) {
	b := setup(t)
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	toks, err := onceflowhttp.ParseTokens("ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(newConsole(t, onceflowui.Config{Client: b.client, Tokens: toks, Logger: log}))
	t.Cleanup(srv.Close)
	br := b.browser()
	br.base = srv.URL
	br.c.Transport = srv.Client().Transport
	resp := br.signIn(adminSecret)
	var secure bool
	for _, c := range resp.Cookies() {
		if c.Name == "onceflow_session" {
			secure = c.Secure && c.HttpOnly
		}
	}
	if !secure {
		t.Fatalf("session cookie over TLS %v: want Secure and HttpOnly", resp.Cookies())
	}
	if resp, body := br.get("/ui/runs?entity=customer:c-1001"); resp.StatusCode != http.StatusOK {
		t.Fatalf("runs over TLS: %d\n%s", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	if !strings.Contains(out, `"route":"GET /ui/runs"`) || !strings.Contains(out, `"route":"POST /ui/login"`) {
		t.Fatalf("request log lacks the routes:\n%s", out)
	}
	for _, leak := range []string{adminSecret, "c-1001", "entity="} {
		if strings.Contains(out, leak) {
			t.Errorf("request log holds %q:\n%s", leak, out)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Cancelling a run from its page: a read session sees the button disabled and is refused;
// a POST without the CSRF token is refused; an admin's cancel turns the parked step into
// cancelled, and the audit trail names the token and keeps the note.
func TestCancelRunThroughConsole(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	stepState := func() store.State {
		t.Helper()
		steps, err := b.store.StepListByRun(ctx, b.runID)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			if st.Name == "notify" {
				return st.State
			}
		}
		t.Fatal("no step notify")
		return ""
	}

	reader := b.browser()
	reader.signIn(readSecret)
	_, page := reader.get("/ui/runs/1")
	if !regexp.MustCompile(`id="cancel" class="danger" disabled`).MatchString(page) {
		t.Fatalf("a read session's run page has no disabled cancel button:\n%s", page)
	}
	resp, body := reader.post("/ui/runs/1/cancel", url.Values{"csrf": {csrfOf(t, page)}, "note": {"read"}})
	wantStatus(t, resp, body, http.StatusForbidden)

	admin := b.browser()
	admin.signIn(adminSecret)
	_, page = admin.get("/ui/runs/1")
	if !strings.Contains(page, `id="cancel" class="danger">`) {
		t.Fatalf("an admin's run page has no enabled cancel button:\n%s", page)
	}
	resp, body = admin.post("/ui/runs/1/cancel", url.Values{"note": {"no token"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	if s := stepState(); s != store.StateNeedsReview {
		t.Fatalf("after refused cancels the step is %s, want needs_review", s)
	}

	// The button asks first, naming what will happen, and changes nothing.
	resp, body = admin.post("/ui/runs/1/cancel", url.Values{"csrf": {csrfOf(t, page)}, "note": {"customer withdrew"}})
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "Cancel run 1?") || !strings.Contains(body, "<li>notify (needs_review) is cancelled</li>") ||
		!strings.Contains(body, `name="confirmed" value="1"`) || !strings.Contains(body, `value="customer withdrew"`) {
		t.Fatalf("the cancel's confirmation page:\n%s", body)
	}
	if s := stepState(); s != store.StateNeedsReview {
		t.Fatalf("asking to cancel changed the step to %s", s)
	}
	resp, body = admin.post("/ui/runs/1/cancel", url.Values{"csrf": {csrfOf(t, page)}, "note": {"customer withdrew"}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/ui/runs/1?done=") {
		t.Fatalf("cancel redirects to %q", loc)
	}
	if s := stepState(); s != store.StateCancelled {
		t.Fatalf("after the cancel the step is %s, want cancelled", s)
	}
	run, err := b.store.RunGetByID(ctx, b.runID)
	if err != nil || run.State != store.StateCancelled {
		t.Fatalf("run after the cancel: %+v, %v", run, err)
	}
	resp, body = admin.get(resp.Header.Get("Location"))
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `id="flash">Cancelled: notify will not run.`) || strings.Contains(body, `id="cancel-form"`) {
		t.Fatalf("the run page after the cancel:\n%s", body)
	}
	evs, err := b.client.Audit(ctx, onceflow.AuditQuery{RunID: b.runID})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled *onceflow.AuditEntry
	for _, e := range evs {
		if e.Type == store.EventRunCancelled {
			cancelled = e
		}
	}
	if cancelled == nil || cancelled.Actor != "token:ops" || !strings.Contains(string(cancelled.Detail), `"note":"customer withdrew"`) {
		t.Fatalf("run.cancelled event %+v, want actor token:ops and the note", cancelled)
	}

	// Nothing is left to cancel.
	resp, body = admin.post("/ui/runs/1/cancel", url.Values{"csrf": {csrfOf(t, page)}})
	wantStatus(t, resp, body, http.StatusConflict)
	resp, body = admin.post("/ui/runs/1/cancel", url.Values{"csrf": {csrfOf(t, page)}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusConflict)
}

// Pausing and resuming a workflow from the overview: a read session sees the buttons
// disabled and is refused, so is a POST without the CSRF token; an admin's pause stops the
// workflow's steps from being claimed, with the actor and the note in the audit trail and
// on the page; a second pause changes nothing and says so; the resume lets the steps run.
func TestPauseResumeThroughConsole(t *testing.T) { eachStore(t, testPauseResumeThroughConsole) }

func testPauseResumeThroughConsole(t *testing.T, b *bundle) {
	ctx := t.Context()
	paused := func() []store.WorkflowPause {
		t.Helper()
		list, err := b.client.PausedWorkflows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	events := func(typ onceflow.EventType) []*onceflow.AuditEntry {
		t.Helper()
		evs, err := b.client.Audit(ctx, onceflow.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(evs, func(e *onceflow.AuditEntry) bool { return e.Type != typ })
	}
	noteOf := func(e *onceflow.AuditEntry) string {
		t.Helper()
		var d struct {
			Note string `json:"note"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatalf("detail of %s: %v", e.Type, err)
		}
		return d.Note
	}

	reader := b.browser()
	reader.signIn(readSecret)
	_, page := reader.get("/ui/")
	if !strings.Contains(page, `id="pause-signup" class="danger"`) || !regexp.MustCompile(`id="pause-signup" class="danger" title="[^"]*" disabled>`).MatchString(page) {
		t.Fatalf("a read session's overview has no disabled pause button for signup:\n%s", page)
	}
	resp, body := reader.post("/ui/workflows/signup/pause", url.Values{"csrf": {csrfOf(t, page)}, "note": {"read"}})
	wantStatus(t, resp, body, http.StatusForbidden)

	admin := b.browser()
	admin.signIn(adminSecret)
	_, page = admin.get("/ui/")
	if !regexp.MustCompile(`id="pause-signup" class="danger" title="[^"]*">Pause</button>`).MatchString(page) || !strings.Contains(page, `id="active-signup"`) {
		t.Fatalf("an admin's overview has no enabled pause button for signup:\n%s", page)
	}
	csrf := csrfOf(t, page)
	resp, body = admin.post("/ui/workflows/signup/pause", url.Values{"note": {"no token"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	if list := paused(); len(list) != 0 {
		t.Fatalf("after refused pauses the paused workflows are %+v, want none", list)
	}

	// An unknown workflow is not found, and nothing is paused.
	resp, body = admin.post("/ui/workflows/nosuch/pause", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusNotFound)
	if !strings.Contains(body, "Workflow not found") {
		t.Fatalf("the answer for an unknown workflow:\n%s", body)
	}
	if list := paused(); len(list) != 0 {
		t.Fatalf("after a pause of an unknown workflow the paused workflows are %+v, want none", list)
	}

	// The button asks first, naming what will happen, and pauses nothing.
	resp, body = admin.post("/ui/workflows/signup/pause", url.Values{"csrf": {csrf}, "note": {"CRM maintenance"}})
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "Pause signup?") || !strings.Contains(body, "No process claims a step of signup until it is resumed") ||
		!strings.Contains(body, `name="confirmed" value="1"`) {
		t.Fatalf("the pause's confirmation page:\n%s", body)
	}
	if list := paused(); len(list) != 0 {
		t.Fatalf("asking to pause paused %+v", list)
	}
	resp, body = admin.post("/ui/workflows/signup/pause", url.Values{"csrf": {csrf}, "note": {"CRM maintenance"}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "/ui/?done=") {
		t.Fatalf("pause redirects to %q", loc)
	}
	if list := paused(); len(list) != 1 || list[0].Workflow != "signup" || list[0].Actor != "token:ops" || list[0].Note != "CRM maintenance" {
		t.Fatalf("after the pause the paused workflows are %+v", list)
	}
	ev := events(store.EventWorkflowPaused)
	if len(ev) != 1 || ev[0].Workflow != "signup" || ev[0].Actor != "token:ops" || noteOf(ev[0]) != "CRM maintenance" {
		t.Fatalf("workflow.paused events %+v, want one for signup with actor token:ops and the note", ev)
	}
	resp, body = admin.get(loc)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `id="flash">Paused signup: its steps are not claimed until it is resumed`) ||
		!regexp.MustCompile(`id="paused-signup"><span class="pause-state">paused</span> <span class="muted">since <time class="at" datetime="[^"]+" title="[^"]+ UTC">[^<]+ UTC</time> by token:ops</span> — <q>CRM maintenance</q>`).MatchString(body) ||
		!regexp.MustCompile(`id="resume-signup" title="[^"]*">Resume</button>`).MatchString(body) || strings.Contains(body, `id="pause-signup"`) {
		t.Fatalf("the overview after the pause:\n%s", body)
	}
	_, page = reader.get("/ui/")
	if !regexp.MustCompile(`id="resume-signup" title="[^"]*" disabled>`).MatchString(page) {
		t.Fatalf("a read session's overview has no disabled resume button for signup:\n%s", page)
	}
	resp, body = reader.post("/ui/workflows/signup/resume", url.Values{"csrf": {csrfOf(t, page)}})
	wantStatus(t, resp, body, http.StatusForbidden)

	// A run started while the workflow is paused is stored, and none of its steps run.
	creates := b.dest.count("/create")
	run, err := b.client.Start(ctx, "signup", "evt-3001", map[string]any{"customer_id": "c-3001", "phone": "+4915130010"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.client.Work(ctx); err != nil || n != 0 {
		t.Fatalf("Work on a paused workflow executed %d steps (%v), want none", n, err)
	}
	if got := b.dest.count("/create") - creates; got != 0 {
		t.Fatalf("the destination got %d create requests while the workflow was paused", got)
	}

	// A second pause changes and records nothing, and says so.
	resp, body = admin.post("/ui/workflows/signup/pause", url.Values{"csrf": {csrf}, "note": {"again"}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = admin.get(resp.Header.Get("Location"))
	if !strings.Contains(body, `id="flash">Workflow signup was already paused; nothing changed.`) {
		t.Fatalf("the overview after a second pause:\n%s", body)
	}
	if ev := events(store.EventWorkflowPaused); len(ev) != 1 {
		t.Fatalf("after a second pause there are %d workflow.paused events, want 1", len(ev))
	}
	if list := paused(); len(list) != 1 || list[0].Note != "CRM maintenance" {
		t.Fatalf("after a second pause the paused workflows are %+v", list)
	}

	resp, body = admin.post("/ui/workflows/signup/resume", url.Values{"csrf": {csrf}, "note": {"CRM is back"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if list := paused(); len(list) != 0 {
		t.Fatalf("after the resume the paused workflows are %+v, want none", list)
	}
	ev = events(store.EventWorkflowResumed)
	if len(ev) != 1 || ev[0].Workflow != "signup" || ev[0].Actor != "token:ops" || noteOf(ev[0]) != "CRM is back" {
		t.Fatalf("workflow.resumed events %+v, want one for signup with actor token:ops and the note", ev)
	}
	resp, body = admin.get(resp.Header.Get("Location"))
	if !strings.Contains(body, `id="flash">Resumed signup: its steps are claimed again.`) || !strings.Contains(body, `id="active-signup"`) {
		t.Fatalf("the overview after the resume:\n%s", body)
	}
	if n, err := b.client.Work(ctx); err != nil || n != 3 {
		t.Fatalf("Work after the resume executed %d steps (%v), want create, notify and task", n, err)
	}
	if got, err := b.store.RunGetByID(ctx, run.ID); err != nil || got.State != store.StateCompleted {
		t.Fatalf("the run started while paused, after the resume: %+v, %v; want it completed", got, err)
	}

	resp, body = admin.post("/ui/workflows/signup/resume", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = admin.get(resp.Header.Get("Location"))
	if !strings.Contains(body, `id="flash">Workflow signup was not paused; nothing changed.`) {
		t.Fatalf("the overview after a second resume:\n%s", body)
	}
	if ev := events(store.EventWorkflowResumed); len(ev) != 1 {
		t.Fatalf("after a second resume there are %d workflow.resumed events, want 1", len(ev))
	}
}

// Signing in and out are audit events whose actor is the token's name, never its secret;
// a refused sign-in records nothing.
func TestSignInAndOutAreAudited(t *testing.T) { eachStore(t, testSignInAndOutAreAudited) }

func testSignInAndOutAreAudited(t *testing.T, b *bundle) {
	ctx := t.Context()
	since := time.Now().Add(-time.Minute)
	br := b.browser()
	if resp := br.signIn("not-a-token-at-all-000"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("sign-in with an unknown token = %d", resp.StatusCode)
	}
	if resp := br.signIn(readSecret); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in = %d", resp.StatusCode)
	}
	_, page := br.get("/ui/")
	resp, body := br.post("/ui/logout", url.Values{"csrf": {csrfOf(t, page)}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if resp := b.browser().signIn(adminSecret); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin sign-in = %d", resp.StatusCode)
	}

	evs, err := b.client.Audit(ctx, onceflow.AuditQuery{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if !strings.HasPrefix(string(e.Type), "console.") {
			continue
		}
		got = append(got, string(e.Type)+" "+e.Actor)
		all := e.Actor + e.Why + string(e.Reason) + string(e.Detail)
		if strings.Contains(all, readSecret) || strings.Contains(all, adminSecret) {
			t.Errorf("event %s holds a token's secret", e.Type)
		}
		if e.Type == store.EventConsoleSignedIn && !strings.Contains(e.Why, e.Actor+" signed in to the web console (scope ") {
			t.Errorf("sign-in explained as %q", e.Why)
		}
	}
	want := []string{"console.signed_in token:viewer", "console.signed_out token:viewer", "console.signed_in token:ops"}
	if !slices.Equal(got, want) {
		t.Fatalf("console events %q, want %q", got, want)
	}
	// The API's audit answer lists them, in the shape its OpenAPI document gives.
	req, _ := http.NewRequest(http.MethodGet, b.api.URL+"/v1/audit?since="+url.QueryEscape(since.UTC().Format(time.RFC3339)), nil)
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"type":"console.signed_out","actor":"token:viewer"`) {
		t.Fatalf("GET /v1/audit: %d %s", resp.StatusCode, raw)
	}
}

// The review queue's age filter reads the one duration syntax of flags and files, days
// included, and says how to write one when it cannot read it.
func TestReviewFilterDuration(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.signIn(readSecret)
	resp, body := br.get("/ui/review?older_than=1d")
	wantStatus(t, resp, body, http.StatusOK)
	if strings.Contains(body, `class="item" href="/ui/review/1/notify"`) {
		t.Error("an item parked a moment ago is listed as older than a day")
	}
	resp, body = br.get("/ui/review?older_than=1d12h&workflow=signup")
	wantStatus(t, resp, body, http.StatusOK)
	resp, body = br.get("/ui/review?older_than=1.5d")
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(html.UnescapeString(body), `"1.5d" is not a duration: use a whole number of days`) {
		t.Errorf("the refusal does not say how to write a duration:\n%s", body)
	}
}

// The page of a run whose step output nests 9,990 levels deep (a destination's answer of
// 50 KB) shows the output as it is stored: indented, it would be a page of about 200 MB
// that takes the server a gigabyte to build.
func TestDeepOutputPageStaysSmall(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	deep := `{"id":"deep","x":` + strings.Repeat(`{"a":`, 9989) + `1` + strings.Repeat(`}`, 9989) + `}`
	err := b.client.Register(onceflow.Workflow{Name: "deep", Steps: []onceflow.Step{{ID: "fetch", EffectKey: "fetch:{input.id}",
		Do: func(context.Context, *onceflow.StepContext) (any, error) { return json.RawMessage(deep), nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.client.Start(ctx, "deep", "d-1", map[string]any{"id": "1"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("the deep step completed", func() bool {
		if _, err := b.client.Work(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := b.store.StepListByRun(ctx, run.ID)
		return err == nil && len(st) == 1 && st[0].State == store.StateCompleted
	})
	br := b.browser()
	br.signIn(adminSecret)
	resp, body := br.get("/ui/runs/" + strconv.FormatInt(run.ID, 10))
	wantStatus(t, resp, body, http.StatusOK)
	if len(body) > 4*len(deep)+64<<10 {
		t.Fatalf("the run page is %d bytes for a %d-byte output", len(body), len(deep))
	}
	if !strings.Contains(body, html.EscapeString(`{"id":"deep","x":{"a":{"a":`)) {
		t.Fatalf("the page does not show the output as stored")
	}
}

// A banner comes from a code the console knows and from what the server holds, never
// from the link's text: a crafted ?done= shows nothing, on any page and through the
// sign-in's next, and a known code shows nothing where the page's state does not bear it
// out (a replay banner on an item still in review, a pause banner for an active workflow).
func TestBannerFromCodesOnly(t *testing.T) {
	b := setup(t)
	const notice = "Security notice: your session expired, re-enter your admin token at https://evil.example/"
	crafted := url.QueryEscape(notice)
	br := b.browser()
	_, page := br.get("/ui/login")
	resp, _ := br.post("/ui/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {adminSecret}, "next": {"/ui/?done=" + crafted}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in = %d", resp.StatusCode)
	}
	next := resp.Header.Get("Location")
	for _, path := range []string{next, "/ui/?done=" + crafted, "/ui/runs?done=" + crafted, "/ui/runs/1?done=" + crafted,
		"/ui/review?done=" + crafted, "/ui/review/1/notify?done=" + crafted, "/ui/keys?done=" + crafted,
		"/ui/review/1/notify?done=replayed", "/ui/review/1/notify?done=retried", "/ui/runs/1?done=cancelled",
		"/ui/?done=paused&workflow=signup", "/ui/?done=resumed&workflow=" + crafted} {
		resp, body := br.get(path)
		wantStatus(t, resp, body, http.StatusOK)
		if strings.Contains(body, `class="flash"`) || strings.Contains(body, "Security notice") || strings.Contains(body, "evil.example") {
			t.Errorf("%s shows a banner:\n%s", path, body)
		}
	}
}

// The pages this console adds before an action — the confirmations of a cancel, an abandon
// and a pause, the bulk preview with its items, the replay preview with its digest — carry
// the security headers, no inline script, and what was typed or stored (a note, a run key,
// a correction holding markup) only escaped.
func TestConfirmationPagesEscapeWhatTheyShow(t *testing.T) {
	b := setup(t)
	const payload = `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	run, err := b.client.Start(t.Context(), "signup", "evt-<b>"+`"x'`, map[string]any{"customer_id": "c-<i>9</i>", "phone": "12"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("the hostile run parked", func() bool {
		if _, err := b.client.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
		it, err := b.client.ReviewGet(t.Context(), run.ID, "notify")
		return err == nil && it.State == store.StateNeedsReview
	})
	br := b.browser()
	br.signIn(adminSecret)
	_, page := br.get("/ui/")
	csrf := csrfOf(t, page)
	id := strconv.FormatInt(run.ID, 10)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<script>|\son[a-z]+\s*=|\sstyle\s*=|javascript:`)
	for path, form := range map[string]url.Values{
		"/ui/runs/" + id + "/cancel":           {"csrf": {csrf}, "note": {payload}},
		"/ui/review/" + id + "/notify/abandon": {"csrf": {csrf}, "note": {payload}},
		"/ui/workflows/signup/pause":           {"csrf": {csrf}, "note": {payload}},
		"/ui/review/bulk":                      {"csrf": {csrf}, "action": {"abandon"}, "dry_run": {"1"}, "note": {payload}, "workflow": {"signup"}},
		"/ui/review/" + id + "/notify/preview": {"csrf": {csrf}, "note": {payload}, "merge_patch": {`{"phone": "+49151", "name": ` + strconv.Quote(payload) + `}`}},
	} {
		resp, body := br.post(path, form)
		wantStatus(t, resp, body, http.StatusOK)
		if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: headers %v", path, resp.Header)
		}
		// The payload's text shows, escaped (its " onerror=" inside an attribute value is
		// text): what must not appear is its markup.
		if m := inline.FindString(strings.ReplaceAll(body, " onerror=alert(2)", "")); m != "" || strings.Contains(body, "<script>alert") ||
			strings.Contains(body, "<img") || strings.Contains(body, "<b>") || strings.Contains(body, "<i>9") {
			t.Errorf("%s: unescaped markup %q in\n%s", path, m, body)
		}
		if strings.HasSuffix(path, "/cancel") && !strings.Contains(body, "evt-&lt;b&gt;") {
			t.Errorf("the cancel's confirmation does not name the run key:\n%s", body)
		}
	}
	if it, _ := b.client.ReviewGet(t.Context(), run.ID, "notify"); it.State != store.StateNeedsReview {
		t.Fatalf("the pages before the actions changed the item: %s", it.State)
	}
	if list, _ := b.client.PausedWorkflows(t.Context()); len(list) != 0 {
		t.Fatalf("the pause's confirmation paused %+v", list)
	}
}
