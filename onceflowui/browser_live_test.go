package onceflowui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
)

// TestBrowserLiveListsTimesAndPhone drives the console in headless Chromium, in the zone
// Europe/Berlin: times read in the viewer's zone with UTC on hover; a new run appears in
// the runs list and a newly parked item in the review list without a reload; the live
// region says "connection lost, retrying" while the server cannot be reached, and clears
// when it can; it says "signed out" and stops once the session is gone; on a phone's
// 390 px the header does not overflow, and a replay preview scrolls into view.
func TestBrowserLiveListsTimesAndPhone(t *testing.T) {
	exe := chromium(t)
	b := setup(t)
	ctx := t.Context()
	tokens, err := onceflowhttp.ParseTokens("ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	console := newConsole(t, onceflowui.Config{Client: b.client, Tokens: tokens})
	// down makes the server drop the live regions' connections unanswered, as a network
	// that is gone does.
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && strings.HasSuffix(r.URL.Path, "/live") {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		console.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.serve()

	bctx := startChromium(t, exe)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return s
	}
	until := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	command := func(f func(ctx context.Context, s cdp.Session) error) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error { return f(ctx, tg) })
	}
	signIn := func() {
		t.Helper()
		do("sign in", chromedp.Navigate(srv.URL+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), adminSecret), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("who")))
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	do("the viewer's zone", command(func(ctx context.Context, s cdp.Session) error {
		_, err := cdp.Call(ctx, s, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"})
		return err
	}))
	signIn()

	// Times: the run's creation in Berlin time, UTC on hover.
	do("the run's page", chromedp.Navigate(srv.URL+"/ui/runs/1"), chromedp.WaitVisible(chromedp.ID("graph")))
	shown, title, stamp := eval(`document.querySelector("dl.facts time.at").textContent`), eval(`document.querySelector("dl.facts time.at").title`),
		eval(`document.querySelector("dl.facts time.at").getAttribute("datetime")`)
	at, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		t.Fatalf("datetime %q: %v", stamp, err)
	}
	if want := at.In(berlin).Format("2006-01-02 15:04:05"); !strings.HasPrefix(shown, want) || shown == title {
		t.Errorf("the run's creation reads %q, want %s… (Europe/Berlin)", shown, want)
	}
	if want := at.UTC().Format("2006-01-02 15:04:05 UTC"); title != want {
		t.Errorf("the run's creation's title is %q, want %q", title, want)
	}

	// The runs list: a run started elsewhere appears without a reload.
	do("the runs list", chromedp.Navigate(srv.URL+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("runs")),
		chromedp.Evaluate[chromedp.Void](`window.onceflowTestMarker = "same page"`))
	run, err := b.client.Start(ctx, "signup", "evt-live-1", map[string]any{"customer_id": "c-live-1", "phone": "+4915100011"})
	if err != nil {
		t.Fatal(err)
	}
	until("the new run in the list", fmt.Sprintf(`!!document.querySelector('#runs a[href="/ui/runs/%d"]')`, run.ID))
	if m := eval(`window.onceflowTestMarker || "reloaded"`); m != "same page" {
		t.Fatalf("the runs list was %s, want it updated in place", m)
	}
	if eval(`document.querySelector("#runs time.at").textContent`) == eval(`document.querySelector("#runs time.at").title`) {
		t.Error("a time the live region brought is shown in UTC, not the viewer's zone")
	}

	// The review list: an item parked meanwhile appears; the region says when the server
	// cannot be reached, and when the session is gone.
	do("the review list", chromedp.Navigate(srv.URL+"/ui/review"), chromedp.WaitVisible(chromedp.ID("items")),
		chromedp.Evaluate[chromedp.Void](`window.onceflowTestMarker = "same page"`))
	parked, err := b.client.Start(ctx, "signup", "evt-live-2", map[string]any{"customer_id": "c-live-2", "phone": "12"})
	if err != nil {
		t.Fatal(err)
	}
	until("the newly parked item in the list", fmt.Sprintf(`!!document.querySelector('#items a[href="/ui/review/%d/notify"]')`, parked.ID))
	if m := eval(`window.onceflowTestMarker || "reloaded"`); m != "same page" {
		t.Fatalf("the review list was %s, want it updated in place", m)
	}
	down.Store(true)
	until("the region saying the connection is lost", `document.querySelector(".livestatus").textContent.includes("Connection lost, retrying")`)
	down.Store(false)
	until("the region recovering", `document.querySelector(".livestatus").textContent === ""`)
	do("the session gone", command(func(ctx context.Context, s cdp.Session) error {
		_, err := cdp.Call(ctx, s, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}))
	until("the region saying it is signed out", `document.querySelector(".livestatus").textContent.startsWith("Signed out")`)
	if eval(`String(document.getElementById("items").hasAttribute("data-poll"))`) != "false" {
		t.Error("the review list still polls after it was told it is signed out")
	}

	// A phone: the header fits in 390 px.
	signIn()
	do("a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile),
		chromedp.Navigate(srv.URL+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("runs")))
	overflow := eval(`(function () {
		var out = [], w = document.documentElement.clientWidth;
		if (document.documentElement.scrollWidth > w) { out.push("the page is " + document.documentElement.scrollWidth + " px wide"); }
		var h = document.querySelector("header.top");
		if (h.scrollWidth > h.clientWidth) { out.push("the header is " + h.scrollWidth + " px wide"); }
		document.querySelectorAll("header.top a, header.top button, #who").forEach(function (e) {
			var r = e.getBoundingClientRect();
			if (r.left < 0 || r.right > w) { out.push(e.textContent.trim() + " ends at " + Math.round(r.right) + " px"); }
		});
		return out.join("; ");
	})()`)
	if overflow != "" {
		t.Errorf("at 390 px: %s", overflow)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir(t), "console-phone.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}

	// The replay preview is scrolled into view when it comes back.
	do("a replay preview", chromedp.Navigate(srv.URL+"/ui/review/1/notify"), chromedp.WaitVisible(chromedp.ID("merge_patch")),
		chromedp.SetValue(chromedp.ID("merge_patch"), `{"phone": "+4915112345"}`), chromedp.Click(chromedp.ID("preview")),
		chromedp.WaitVisible(chromedp.ID("preview-result")))
	until("the preview scrolled into view", `window.scrollY > 0 && document.getElementById("preview-result").getBoundingClientRect().top > -2 && document.getElementById("preview-result").getBoundingClientRect().top < window.innerHeight / 2`)
}

// TestBrowserSchedules drives the schedules page in headless Chromium: an admin reads the
// next ticks and the catch-up decisions, previews "trigger now" for a skipped tick, sees
// the run key it will use, confirms, and lands on the run with that key.
func TestBrowserSchedules(t *testing.T) {
	exe := chromium(t)
	sb := setupSchedule(t)
	bctx := startChromium(t, exe)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	do("sign in", chromedp.Navigate(sb.srv.URL+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminSecret), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("who")))
	do("the schedules page", chromedp.Click(chromedp.CSS(`header.top a[href="/ui/schedules"]`)), chromedp.WaitVisible(chromedp.ID("schedule-hourly")))
	if next := text("#schedule-hourly dd.next"); !strings.HasPrefix(next, "2026-11-17 17:00:00 CET, 2026-11-17 18:00:00 CET") {
		t.Errorf("next ticks read %q, want them in Europe/Berlin from 17:00 CET", next)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#schedule-hourly table.decisions tbody tr").length`)); err != nil || n != 5 {
		t.Errorf("%d catch-up decisions shown (%v), want 5", n, err)
	}
	do("preview a trigger", chromedp.SendKeys(chromedp.ID("at-hourly"), "2026-11-17T13:00:00+01:00"), chromedp.Click(chromedp.ID("preview-hourly")),
		chromedp.WaitVisible(chromedp.ID("trigger-preview-hourly")))
	if key := text("#trigger-preview-hourly code.runkey"); key != "hourly:2026-11-17T13:00:00+01:00" {
		t.Fatalf("the preview shows run key %q", key)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir(t), "console-schedules.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(sb.reportRuns(t)); n != 1 {
		t.Fatalf("the preview started a run: %d runs", n)
	}
	do("confirm", chromedp.Click(chromedp.ID("confirm-hourly")), chromedp.WaitVisible(chromedp.ID("graph")))
	if key := text("dl.facts code"); key != "hourly:2026-11-17T13:00:00+01:00" {
		t.Fatalf("the confirmation led to a run with key %q", key)
	}
	if n := len(sb.reportRuns(t)); n != 2 {
		t.Fatalf("after the confirmation: %d runs, want 2", n)
	}
}
