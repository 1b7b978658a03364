package onceflowui_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store"
)

// oidcBundle is the bundle's client with a second workflow, billing, and one run of it,
// served by a console that signs people in at a local OpenID Connect provider.
type oidcBundle struct {
	*bundle
	idp       *mockoidc.MockOIDC
	billingID int64
	logs      func() string
}

// alice is in the growth team, which owns the signup workflow only.
var alice = &mockoidc.MockUser{Subject: "alice-1", Email: "alice@example.com", EmailVerified: true, Groups: []string{"growth", "staff"}}

func setupOIDC(t *testing.T) *oidcBundle {
	t.Helper()
	b := setup(t)
	ctx := t.Context()
	err := b.client.Register(onceflow.Workflow{Name: "billing", Steps: []onceflow.Step{
		{ID: "invoice", EffectKey: "invoice:{input.order}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(errBillingDown)
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.client.Start(ctx, "billing", "order-7", map[string]any{"order": "7"})
	if err != nil {
		t.Fatal(err)
	}
	idp, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Shutdown() })
	var mu sync.Mutex
	var logs strings.Builder
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var h http.Handler
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(b.srv.Close)
	roles, err := onceflowui.ParseOIDCRoles("ops=admin, growth=admin:signup, staff=read, finance=read")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := onceflowhttp.ParseTokens("ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	cfg := idp.Config()
	h = newConsole(t, onceflowui.Config{Client: b.client, Tokens: toks, Logger: log, OIDC: &onceflowui.OIDC{
		Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: b.srv.URL + "/ui/oidc/callback",
		Scopes: []string{"email", "profile", "groups"}, Roles: roles, Label: "Example SSO"}})
	return &oidcBundle{bundle: b, idp: idp, billingID: run.ID, logs: func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}}
}

type billingError string

func (e billingError) Error() string { return string(e) }

const errBillingDown = billingError("billing is down")

// oidcSignIn signs br in at the provider as user (queued for the next authorization) and
// returns the callback's answer. tamper, when set, changes the flow cookie the browser
// holds before the provider sends it back.
func (ob *oidcBundle) oidcSignIn(br *browser, user *mockoidc.MockUser, tamper func(flow map[string]string)) *http.Response {
	br.t.Helper()
	ob.idp.QueueUser(user)
	resp, body := br.get("/ui/oidc/login?next=" + url.QueryEscape("/ui/runs"))
	wantStatus(br.t, resp, body, http.StatusSeeOther)
	auth := resp.Header.Get("Location")
	au, _ := url.Parse(auth)
	q := au.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		br.t.Fatalf("the redirect to the provider lacks PKCE, nonce or state: %s", auth)
	}
	if tamper != nil {
		u, _ := url.Parse(br.base + "/ui/")
		for _, c := range br.c.Jar.Cookies(u) {
			if c.Name != "onceflow_oidc" {
				continue
			}
			raw, _ := base64.RawURLEncoding.DecodeString(c.Value)
			flow := map[string]string{}
			_ = json.Unmarshal(raw, &flow)
			tamper(flow)
			raw, _ = json.Marshal(flow)
			br.c.Jar.SetCookies(u, []*http.Cookie{{Name: "onceflow_oidc", Value: base64.RawURLEncoding.EncodeToString(raw), Path: "/ui/"}})
		}
	}
	req, _ := http.NewRequest(http.MethodGet, auth, nil)
	resp, body = br.do(req)
	if resp.StatusCode != http.StatusFound {
		br.t.Fatalf("the provider's authorization = %d: %s", resp.StatusCode, body)
	}
	cb, _ := url.Parse(resp.Header.Get("Location"))
	resp, _ = br.get(cb.RequestURI())
	return resp
}

// A person signs in at the identity provider and acts as themselves: alice, of the team
// that owns signup, pauses signup (audited as user:alice@example.com, with her session) and
// is refused, and shown no action, on billing; a person with the read role only is refused
// every action; a person with no role, an answer whose state, nonce or PKCE verifier is
// not the sign-in's, are refused and logged with the address; sign-out ends the session.
// The client secret is in no page and no log line.
func TestOIDCSignIn(t *testing.T) {
	ob := setupOIDC(t)
	ctx := t.Context()
	br := ob.browser()
	resp := ob.oidcSignIn(br, alice, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs" {
		t.Fatalf("the callback = %d to %q, want 303 to /ui/runs", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page := br.get("/ui/")
	if !strings.Contains(page, `alice@example.com · admin of signup`) {
		t.Fatalf("the header does not name alice and her role:\n%s", page)
	}
	if !strings.Contains(page, `id="pause-form-signup"`) || strings.Contains(page, `id="pause-form-billing"`) {
		t.Errorf("the overview should offer pausing signup and hide pausing billing:\n%s", page)
	}
	csrf := csrfOf(t, page)
	resp, body := br.post("/ui/workflows/signup/pause", url.Values{"csrf": {csrf}, "note": {"growth team maintenance"}, "confirmed": {"1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	for _, refused := range []string{"/ui/workflows/billing/pause", "/ui/runs/" + itoa(ob.billingID) + "/cancel", "/ui/review/bulk", "/ui/sessions/" + strings.Repeat("0", 64) + "/end"} {
		resp, body := br.post(refused, url.Values{"csrf": {csrf}, "action": {"abandon"}})
		wantStatus(t, resp, body, http.StatusForbidden)
	}
	// A bulk action must name one of her workflows; its preview then answers.
	resp, body = br.post("/ui/review/bulk", url.Values{"csrf": {csrf}, "action": {"retry"}, "dry_run": {"1"}, "workflow": {"signup"}})
	wantStatus(t, resp, body, http.StatusOK)
	resp, body = br.post("/ui/review/bulk", url.Values{"csrf": {csrf}, "action": {"retry"}, "dry_run": {"1"}, "workflow": {"billing"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	// Its confirmation acts on items of that workflow only, whatever items the form names:
	// here the billing item, parked, named with its true version.
	ob.waitFor("the billing item parked", func() bool {
		if _, err := ob.client.Work(ctx); err != nil {
			t.Fatal(err)
		}
		it, err := ob.client.ReviewGet(ctx, ob.billingID, "invoice")
		return err == nil && it.State == onceflow.StateNeedsReview
	})
	billing, err := ob.client.ReviewGet(ctx, ob.billingID, "invoice")
	if err != nil {
		t.Fatal(err)
	}
	resp, body = br.post("/ui/review/bulk", url.Values{"csrf": {csrf}, "action": {"abandon"}, "workflow": {"signup"},
		"item": {itoa(ob.billingID) + ":" + billing.Version + "::invoice"}})
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "applied to 0, refused for 1") || !strings.Contains(body, "belongs to workflow") {
		t.Fatalf("a confirmation naming another workflow's item:\n%s", body)
	}
	if it, err := ob.client.ReviewGet(ctx, ob.billingID, "invoice"); err != nil || it.State != onceflow.StateNeedsReview {
		t.Fatalf("the billing item after a forged confirmation: %+v, %v", it, err)
	}
	_, page = br.get("/ui/runs/" + itoa(ob.billingID))
	if strings.Contains(page, `id="cancel-form"`) {
		t.Error("the billing run's page offers alice its cancel form")
	}
	_, page = br.get("/ui/runs/" + itoa(ob.runID))
	if !strings.Contains(page, `id="cancel-form"`) || strings.Contains(page, `id="cancel" class="danger" disabled`) {
		t.Error("the signup run's page does not offer alice its cancel form")
	}
	paused, err := ob.client.PausedWorkflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(paused) != 1 || paused[0].Workflow != "signup" || paused[0].Actor != "user:alice@example.com" {
		t.Fatalf("paused %+v, want signup by user:alice@example.com", paused)
	}
	sess, err := ob.client.SessionBySecret(ctx, br.sessionCookie().Value)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := ob.client.Audit(ctx, onceflow.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var pausedEv, signIn *onceflow.AuditEntry
	for _, e := range evs {
		switch e.Type {
		case "workflow.paused":
			pausedEv = e
		case store.EventConsoleSignedIn:
			signIn = e
		}
	}
	if pausedEv == nil || pausedEv.Actor != "user:alice@example.com" || !strings.Contains(string(pausedEv.Detail), `"session":"`+sess.Short()+`"`) {
		t.Fatalf("the pause is audited as %+v", pausedEv)
	}
	if signIn == nil || signIn.Actor != "user:alice@example.com" || !strings.Contains(signIn.Why, "scope admin of signup") {
		t.Fatalf("the sign-in is audited as %+v", signIn)
	}

	// Sign out: the old cookie is refused.
	old := br.sessionCookie()
	resp, body = br.post("/ui/logout", url.Values{"csrf": {csrf}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = ob.withCookie(ob.srv.URL, old).get("/ui/")
	wantStatus(t, resp, body, http.StatusSeeOther)

	// Read only.
	reader := ob.browser()
	if resp := ob.oidcSignIn(reader, &mockoidc.MockUser{Subject: "fin-1", Email: "fin@example.com", EmailVerified: true, Groups: []string{"finance"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the reader's sign-in = %d", resp.StatusCode)
	}
	_, page = reader.get("/ui/")
	resp, body = reader.post("/ui/workflows/signup/resume", url.Values{"csrf": {csrfOf(t, page)}})
	wantStatus(t, resp, body, http.StatusForbidden)

	// Refusals.
	for name, c := range map[string]struct {
		user   *mockoidc.MockUser
		tamper func(map[string]string)
	}{
		"no role":       {&mockoidc.MockUser{Subject: "m-1", Email: "mallory@example.com", EmailVerified: true, Groups: []string{"contractors"}}, nil},
		"no e-mail":     {&mockoidc.MockUser{Subject: "m-2", Groups: []string{"ops"}}, nil},
		"state":         {alice, func(f map[string]string) { f["s"] = "another-state" }},
		"nonce":         {alice, func(f map[string]string) { f["n"] = "another-nonce" }},
		"PKCE verifier": {alice, func(f map[string]string) { f["v"] = strings.Repeat("x", 43) }},
	} {
		br := ob.browser()
		resp := ob.oidcSignIn(br, c.user, c.tamper)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: the callback = %d, want 401", name, resp.StatusCode)
		}
		u, _ := url.Parse(ob.srv.URL + "/ui/")
		for _, ck := range br.c.Jar.Cookies(u) {
			if ck.Name == "onceflow_session" {
				t.Errorf("%s: a session cookie was set", name)
			}
		}
	}
	logs := ob.logs()
	if n := strings.Count(logs, `"level":"WARN","msg":"console sign-in refused: `); n < 5 {
		t.Errorf("%d sign-in refusals logged at warn, want 5:\n%s", n, logs)
	}
	if !strings.Contains(logs, `"msg":"console sign-in refused: no role","client":"127.0.0.1"`) {
		t.Errorf("a refusal is not logged with the address:\n%s", logs)
	}
	if secret := ob.idp.Config().ClientSecret; strings.Contains(logs, secret) {
		t.Error("the log holds the client secret")
	}
}

// The sign-in's next page stays in the console, whatever the link says; the flow's cookie
// is HttpOnly and short-lived; the sign-in page shows no client secret.
func TestOIDCNextStaysInTheConsole(t *testing.T) {
	ob := setupOIDC(t)
	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/ui/../../evil", "/\\evil.example"} {
		br := ob.browser()
		resp, body := br.get("/ui/oidc/login?next=" + url.QueryEscape(next))
		wantStatus(t, resp, body, http.StatusSeeOther)
		var flow *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "onceflow_oidc" {
				flow = c
			}
		}
		if flow == nil || !flow.HttpOnly || flow.MaxAge <= 0 || flow.MaxAge > 600 || flow.SameSite != http.SameSiteLaxMode {
			t.Fatalf("the flow cookie %+v: want HttpOnly, SameSite=Lax, at most 10 minutes", flow)
		}
		ob.idp.QueueUser(alice)
		au, _ := url.Parse(resp.Header.Get("Location"))
		req, _ := http.NewRequest(http.MethodGet, au.String(), nil)
		resp, _ = br.do(req)
		cb, _ := url.Parse(resp.Header.Get("Location"))
		resp, _ = br.get(cb.RequestURI())
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/" {
			t.Errorf("next %q: the callback = %d to %q, want the console's overview", next, resp.StatusCode, loc)
		}
	}
	_, page := ob.browser().get("/ui/login")
	if !strings.Contains(page, `id="oidc"`) || strings.Contains(page, ob.idp.Config().ClientSecret) {
		t.Fatalf("the sign-in page lacks the provider's button or shows the client secret:\n%s", page)
	}
}

// The role mapping says what is wrong with an entry.
func TestParseOIDCRoles(t *testing.T) {
	roles, err := onceflowui.ParseOIDCRoles("ops=admin,growth=admin:signup,growth=admin:newsletter,all=read")
	if err != nil || len(roles) != 4 || roles[1] != (onceflowui.OIDCRole{Value: "growth", Role: "admin", Workflow: "signup"}) {
		t.Fatalf("ParseOIDCRoles = %+v, %v", roles, err)
	}
	for _, bad := range []string{"ops", "=admin", "ops=owner", "ops=admin:"} {
		if _, err := onceflowui.ParseOIDCRoles(bad); err == nil {
			t.Errorf("ParseOIDCRoles(%q) succeeded", bad)
		}
	}
}
