package onceflowui_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// sessionCookieOf returns the session cookie br holds for the console.
func (br *browser) sessionCookie() *http.Cookie {
	br.t.Helper()
	u, _ := url.Parse(br.base + "/ui/")
	for _, c := range br.c.Jar.Cookies(u) {
		if c.Name == "onceflow_session" {
			return c
		}
	}
	br.t.Fatal("no session cookie")
	return nil
}

// withCookie returns a new browser on base that holds only ck.
func (b *bundle) withCookie(base string, ck *http.Cookie) *browser {
	br := b.browser()
	br.base = base
	u, _ := url.Parse(base + "/ui/")
	br.c.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/ui/"}})
	return br
}

// A cookie copied before sign-out is refused after it: on every page and every action,
// with or without the CSRF token it had. (The cookie was valid until it expired before
// sessions were kept in the store.)
func TestSignOutRefusesACopiedCookie(t *testing.T) { eachStore(t, testSignOutRefusesACopiedCookie) }

func testSignOutRefusesACopiedCookie(t *testing.T, b *bundle) {
	br := b.browser()
	br.signIn(adminSecret)
	_, page := br.get("/ui/")
	csrf := csrfOf(t, page)
	thief := b.withCookie(b.srv.URL, br.sessionCookie())
	if resp, body := thief.get("/ui/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the copied cookie before sign-out: %d\n%s", resp.StatusCode, body)
	}
	resp, body := br.post("/ui/logout", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusSeeOther)

	resp, body = thief.get("/ui/")
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("the copied cookie after sign-out is sent to %q, want the sign-in page", loc)
	}
	resp, body = thief.post("/ui/workflows/signup/pause", url.Values{"csrf": {csrf}, "note": {"after sign-out"}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusUnauthorized)
	paused, err := b.client.PausedWorkflows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(paused) != 0 {
		t.Fatalf("a signed-out cookie paused %v", paused)
	}
}

// sharedStores opens two stores over one database of backend — two processes' worth: a
// SQLite file opened twice, or one PostgreSQL schema with two pools.
func sharedStores(t *testing.T, backend string) (store.Store, store.Store) {
	t.Helper()
	ctx := t.Context()
	var open func() store.Store
	switch backend {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "shared.db")
		open = func() store.Store {
			st, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
	default:
		u, schema := testsvc.PostgresSchema(t, "onceflowui_shared_")
		open = func() store.Store {
			st, err := postgres.Open(ctx, u, postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	return open(), open()
}

// A session ended in one process is refused by another sharing the database at once: two
// consoles over one SQLite file, and over one PostgreSQL schema. The other console's admin
// ends it on its sessions page; the audit trail records who ended whose session.
func TestEndedSessionRefusedInAnotherProcess(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			sa, sb := sharedStores(t, backend)
			toks, err := onceflowhttp.ParseTokens("viewer:read:" + readSecret + ",ops:admin:" + adminSecret)
			if err != nil {
				t.Fatal(err)
			}
			console := func(st store.Store) (*onceflow.Client, *httptest.Server) {
				client, err := onceflow.New(onceflow.Config{Store: st})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(newConsole(t, onceflowui.Config{Client: client, Tokens: toks}))
				t.Cleanup(srv.Close)
				return client, srv
			}
			_, srvA := console(sa)
			clientB, srvB := console(sb)
			b := &bundle{t: t, srv: srvA}

			viewer := b.browser()
			viewer.base = srvA.URL
			viewer.signIn(readSecret)
			ck := viewer.sessionCookie()
			inB := b.withCookie(srvB.URL, ck)
			if resp, body := inB.get("/ui/keys"); resp.StatusCode != http.StatusOK {
				t.Fatalf("the session of console A in console B: %d\n%s", resp.StatusCode, body)
			}

			admin := b.browser()
			admin.base = srvB.URL
			admin.signIn(adminSecret)
			resp, page := admin.get("/ui/sessions")
			wantStatus(t, resp, page, http.StatusOK)
			m := regexp.MustCompile(`action="/ui/sessions/([0-9a-f]{64})/end"[^<]*<input type="hidden" name="csrf" value="([^"]+)">\s*<button[^>]*id="end-([0-9a-f]+)"`).FindAllStringSubmatch(page, -1)
			var viewerID, csrf string
			for _, row := range m {
				if strings.Contains(page, `<tr id="session-`+row[3]+`"><td><code>`+row[3]+`</code></td><td>token:viewer</td>`) {
					viewerID, csrf = row[1], row[2]
				}
			}
			if viewerID == "" {
				t.Fatalf("the sessions page does not list the viewer's session with an end button:\n%s", page)
			}
			if !strings.Contains(page, "127.0.0.1") {
				t.Errorf("the sessions page does not show the client's address:\n%s", page)
			}
			resp, body := admin.post("/ui/sessions/"+viewerID+"/end", url.Values{"csrf": {csrf}})
			wantStatus(t, resp, body, http.StatusSeeOther)

			for name, br := range map[string]*browser{"A": b.withCookie(srvA.URL, ck), "B": inB} {
				resp, body := br.get("/ui/keys")
				wantStatus(t, resp, body, http.StatusSeeOther)
				if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/ui/login") {
					t.Fatalf("console %s sends an ended session to %q", name, loc)
				}
			}
			if resp, body := admin.get("/ui/keys"); resp.StatusCode != http.StatusOK {
				t.Fatalf("the admin's own session after ending another: %d\n%s", resp.StatusCode, body)
			}
			// The admin signs out of console B: its cookie is refused by console A.
			adminCookie := admin.sessionCookie()
			_, page = admin.get("/ui/keys")
			resp, body = admin.post("/ui/logout", url.Values{"csrf": {csrfOf(t, page)}})
			wantStatus(t, resp, body, http.StatusSeeOther)
			resp, body = b.withCookie(srvA.URL, adminCookie).get("/ui/keys")
			wantStatus(t, resp, body, http.StatusSeeOther)

			evs, err := clientB.Audit(t.Context(), onceflow.AuditQuery{})
			if err != nil {
				t.Fatal(err)
			}
			var ended *onceflow.AuditEntry
			for i := range evs {
				if evs[i].Type == onceflow.EventConsoleSessionEnded {
					ended = evs[i]
				}
			}
			if ended == nil || ended.Actor != "token:ops" || !strings.Contains(ended.Why, "token:ops ended the web console session "+viewerID[:10]+" of token:viewer") {
				t.Fatalf("session end audited as %+v", ended)
			}
		})
	}
}

// A session that makes no request for SessionIdle ends, and so does one past SessionTTL
// however busy; the sessions page says which ended why.
func TestSessionIdleAndAbsoluteTimeouts(t *testing.T) {
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
	toks, err := onceflowhttp.ParseTokens("viewer:read:" + readSecret + ",ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newConsole(t, onceflowui.Config{Client: b.client, Tokens: toks, Now: clock,
		SessionTTL: time.Hour, SessionIdle: 10 * time.Minute}))
	t.Cleanup(srv.Close)
	busy, idle := b.browser(), b.browser()
	busy.base, idle.base = srv.URL, srv.URL
	busy.signIn(adminSecret)
	idle.signIn(readSecret)
	// busy makes a request every 9 minutes; idle makes none after the first.
	if resp, body := idle.get("/ui/keys"); resp.StatusCode != http.StatusOK {
		t.Fatalf("idle session at first: %d\n%s", resp.StatusCode, body)
	}
	for range 6 {
		advance(9 * time.Minute)
		if resp, body := busy.get("/ui/keys"); resp.StatusCode != http.StatusOK {
			t.Fatalf("busy session: %d\n%s", resp.StatusCode, body)
		}
	}
	if resp, _ := idle.get("/ui/keys"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session idle for 54 minutes: %d, want a redirect to sign in", resp.StatusCode)
	}
	advance(7 * time.Minute) // 61 minutes after the sign-in
	if resp, _ := busy.get("/ui/keys"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a busy session past its hour: %d, want a redirect to sign in", resp.StatusCode)
	}
	list, err := b.client.Sessions(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, s := range list {
		reasons[s.Actor] = s.EndReason
	}
	if reasons["token:viewer"] != onceflow.SessionIdle || reasons["token:ops"] != onceflow.SessionExpired {
		t.Fatalf("end reasons %v, want the viewer's idle and ops's expired", reasons)
	}
}

// Every console action's audit events name the session (its short name) and the client's
// address, so that two sessions of one token are told apart; so do the sign-in and the
// sign-out.
func TestActionsNameTheSessionAndClient(t *testing.T) {
	eachStore(t, testActionsNameTheSessionAndClient)
}

func testActionsNameTheSessionAndClient(t *testing.T, b *bundle) {
	ctx := t.Context()
	one, two := b.browser(), b.browser()
	one.signIn(adminSecret)
	two.signIn(adminSecret)
	shortOf := func(br *browser) string {
		s, err := b.client.SessionBySecret(ctx, br.sessionCookie().Value)
		if err != nil {
			t.Fatal(err)
		}
		return s.Short()
	}
	s1, s2 := shortOf(one), shortOf(two)
	if s1 == s2 {
		t.Fatal("two sign-ins of one token share a session")
	}
	_, page := one.get("/ui/")
	resp, body := one.post("/ui/workflows/signup/pause", url.Values{"csrf": {csrfOf(t, page)}, "note": {"supplier down"}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	_, page = two.get("/ui/")
	resp, body = two.post("/ui/workflows/signup/resume", url.Values{"csrf": {csrfOf(t, page)}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	_, page = two.get("/ui/runs/" + itoa(b.runID))
	resp, body = two.post("/ui/runs/"+itoa(b.runID)+"/cancel", url.Values{"csrf": {csrfOf(t, page)}, "note": {"customer withdrew"}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	_, page = one.get("/ui/")
	resp, body = one.post("/ui/logout", url.Values{"csrf": {csrfOf(t, page)}})
	wantStatus(t, resp, body, http.StatusSeeOther)

	evs, err := b.client.Audit(ctx, onceflow.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[onceflow.EventType]string{"workflow.paused": s1, "workflow.resumed": s2, "run.cancelled": s2, "step.cancelled": s2,
		"console.signed_out": s1}
	seen := map[onceflow.EventType]bool{}
	signIns := map[string]bool{}
	for _, e := range evs {
		var d map[string]any
		_ = json.Unmarshal(e.Detail, &d)
		if e.Type == store.EventConsoleSignedIn {
			signIns[d["session"].(string)] = d["client"] == "127.0.0.1"
			continue
		}
		sess, ok := want[e.Type]
		if !ok {
			continue
		}
		seen[e.Type] = true
		if d["session"] != sess || d["client"] != "127.0.0.1" {
			t.Errorf("%s: detail %s, want session %s and client 127.0.0.1", e.Type, e.Detail, sess)
		}
		if !strings.HasSuffix(e.Why, " — console session "+sess+" from 127.0.0.1") {
			t.Errorf("%s explained as %q, without its session and client", e.Type, e.Why)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("events seen %v, want each of %v", seen, want)
	}
	if !signIns[s1] || !signIns[s2] {
		t.Errorf("sign-ins name sessions and clients %v, want %s and %s from 127.0.0.1", signIns, s1, s2)
	}
}

// Sessions are an admin's to see and end: a read session is refused the page and the
// action.
func TestSessionsPageIsForAdmins(t *testing.T) {
	b := setup(t)
	viewer, admin := b.browser(), b.browser()
	viewer.signIn(readSecret)
	admin.signIn(adminSecret)
	_, page := viewer.get("/ui/keys")
	if strings.Contains(page, `href="/ui/sessions"`) {
		t.Error("a read session's header links to the sessions page")
	}
	resp, body := viewer.get("/ui/sessions")
	wantStatus(t, resp, body, http.StatusForbidden)
	s, err := b.client.SessionBySecret(t.Context(), admin.sessionCookie().Value)
	if err != nil {
		t.Fatal(err)
	}
	resp, body = viewer.post("/ui/sessions/"+s.ID+"/end", url.Values{"csrf": {csrfOf(t, page)}})
	wantStatus(t, resp, body, http.StatusForbidden)
	if resp, body := admin.get("/ui/keys"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin after a refused end: %d\n%s", resp.StatusCode, body)
	}
	// The stored session holds neither the cookie's secret nor the token's.
	raw, _ := json.Marshal(s)
	for _, secret := range []string{admin.sessionCookie().Value, adminSecret} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the stored session holds a secret: %s", raw)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
