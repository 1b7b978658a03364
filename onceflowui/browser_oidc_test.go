package onceflowui_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow"
)

// TestBrowserOIDCSignIn drives the OpenID Connect sign-in in headless Chromium against a
// local provider: alice, admin of the signup workflow only, signs in with the button on the
// sign-in page, pauses signup (audited as user:alice@example.com), is offered no pause of
// billing and is refused one sent by hand; she signs out, and her old cookie, set again in
// the browser, is refused.
func TestBrowserOIDCSignIn(t *testing.T) {
	exe := chromium(t)
	ob := setupOIDC(t)
	ctx := t.Context()
	bctx := startChromium(t, exe)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	base := ob.srv.URL

	ob.idp.QueueUser(alice)
	do("sign in at the provider", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("oidc")),
		chromedp.Click(chromedp.ID("oidc")), chromedp.WaitVisible(chromedp.ID("who")))
	who, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("who")))
	if err != nil || !strings.Contains(who, "alice@example.com · admin of signup") {
		t.Fatalf("the header says %q (%v)", who, err)
	}
	do("overview", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("pause-signup")))
	if hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("pause-billing") === null`)); err != nil || !hidden {
		t.Fatalf("alice is offered pausing billing (%v)", err)
	}
	do("pause signup", chromedp.SendKeys(chromedp.CSS(`#pause-form-signup input[name="note"]`), "growth team maintenance"),
		chromedp.Click(chromedp.ID("pause-signup")), chromedp.WaitVisible(chromedp.ID("confirm-action")),
		chromedp.Click(chromedp.ID("confirm-action")), chromedp.WaitVisible(chromedp.ID("paused-signup")))
	status, err := chromedp.Run(bctx, chromedp.Evaluate[int](`fetch("/ui/workflows/billing/pause", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "csrf=" + encodeURIComponent(document.querySelector('input[name="csrf"]').value)}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 403 {
		t.Fatalf("alice's pause of billing answered %d (%v), want 403", status, err)
	}
	paused, err := ob.client.PausedWorkflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(paused) != 1 || paused[0].Workflow != "signup" {
		t.Fatalf("paused %+v, want signup alone", paused)
	}
	evs, err := ob.client.Audit(ctx, onceflow.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var by string
	for _, e := range evs {
		if e.Type == "workflow.paused" {
			by = e.Actor
		}
	}
	if by != "user:alice@example.com" {
		t.Fatalf("the pause is audited as %q, want user:alice@example.com", by)
	}

	cookies, err := chromedp.Run(bctx, func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/ui/"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	var old string
	for _, c := range cookies.Cookies {
		if c.Name == "onceflow_session" {
			old = c.Value
		}
	}
	if old == "" {
		t.Fatal("no session cookie in the browser")
	}
	do("sign out", chromedp.Click(chromedp.CSS(`form.who button`)), chromedp.WaitVisible(chromedp.ID("oidc")))
	do("set the old cookie again", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: "onceflow_session", Value: old, URL: base + "/ui/", Path: "/ui/"})
		return err
	}), chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("oidc")))
	if loc, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.pathname`)); err != nil || loc != "/ui/login" {
		t.Fatalf("with the old cookie the browser is at %q (%v), want the sign-in page", loc, err)
	}
}
