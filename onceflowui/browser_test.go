package onceflowui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// chromium finds a Chromium or Chrome binary. Without one the browser tests skip, except
// under CI=true, where they fail.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Chromium is not installed, and CI=true requires the browser tests: apt-get install -y chromium")
	}
	t.Skip("Chromium is not installed (apt-get install -y chromium); skipping the browser tests")
	return ""
}

// screenshotDir is where the browser test writes its screenshots: $ONCEFLOW_CONSOLE_SCREENSHOTS
// (the README's come from ONCEFLOW_CONSOLE_SCREENSHOTS=../docs), or a temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("ONCEFLOW_CONSOLE_SCREENSHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// TestBrowser drives the console in headless Chromium: a read-only session finds a run by
// its entity and cannot act; an admin corrects a parked item, sees the engine's preview,
// confirms and sees the item complete, with exactly one request for the replayed step and
// none for the kept one; a POST without the CSRF token is refused; no page shows the
// planted canaries.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	b := setup(t)
	ctx := t.Context()
	// More runs, so that the overview has something to count: three that complete, one
	// more parked.
	for i, phone := range []string{"+4915100001", "+4915100002", "12", "+4915100004"} {
		if _, err := b.client.Start(ctx, "signup", fmt.Sprintf("evt-20%d", i), map[string]any{"customer_id": fmt.Sprintf("c-20%d", i), "phone": phone}); err != nil {
			t.Fatal(err)
		}
	}
	b.serve()
	b.waitFor("the other runs settled", func() bool {
		runs, err := b.store.RunList(ctx, store.RunListParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.State != store.StateCompleted && r.State != store.StateNeedsReview {
				return false
			}
		}
		return len(runs) == 5
	})

	bctx := startChromium(t, exe)
	shots := screenshotDir(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		// Read in one script: a live region replaced between finding the node and reading
		// it would leave a node that no longer exists.
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(function (e) { return e ? e.innerText : null; })(document.querySelector(`+strconv.Quote(sel)+`))`))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	html := func() string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	noCanary := func(page string) {
		t.Helper()
		if h := html(); strings.Contains(h, canarySecret) || strings.Contains(h, canaryPII) {
			t.Errorf("%s shows a planted canary", page)
		}
	}
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	signIn := func(secret string) {
		t.Helper()
		do("sign in", chromedp.Navigate(b.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), secret), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("who")))
	}

	// Read only: find the run by its entity, look, and be refused when acting.
	signIn(readSecret)
	// Start from a search that finds nothing, so that the run's link appears only once the
	// new search has been answered.
	do("find the run by its entity", chromedp.Navigate(b.srv.URL+"/ui/runs?entity=customer:nobody"), chromedp.WaitVisible(chromedp.ID("entity")),
		chromedp.SetValue(chromedp.ID("entity"), "customer:c-1001"), chromedp.Click(chromedp.ID("find")),
		chromedp.WaitVisible(chromedp.CSS(`#runs a[href="/ui/runs/1"]`)), chromedp.Click(chromedp.CSS(`#runs a[href="/ui/runs/1"]`)),
		chromedp.WaitVisible(chromedp.ID("graph")))
	if rows := text("h1"); !strings.Contains(rows, "Run 1") {
		t.Fatalf("the run's page says %q", rows)
	}
	noCanary("the run page (read)")
	if disabled, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("cancel").disabled`)); err != nil || !disabled {
		t.Fatalf("a read session's cancel button is enabled (%v)", err)
	}
	do("open the parked item", chromedp.Navigate(b.srv.URL+"/ui/review/1/notify"), chromedp.WaitVisible(chromedp.ID("readonly")))
	disabled, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("retry").disabled && document.getElementById("preview").disabled`))
	if err != nil || !disabled {
		t.Fatalf("action buttons of a read session enabled (%v)", err)
	}
	// Enabled by hand, the button still does nothing: the server refuses.
	do("force a retry", chromedp.Evaluate[chromedp.Void](`document.getElementById("retry").disabled = false`),
		chromedp.Click(chromedp.ID("retry")), chromedp.WaitVisible(chromedp.ID("error")))
	if status, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.ID("error"), "data-status")); err != nil || status.Value != "403" {
		t.Fatalf("a read session's retry answered %+v (%v), want 403", status, err)
	}
	if it, _ := b.client.ReviewGet(ctx, b.runID, "notify"); it.State != store.StateNeedsReview {
		t.Fatalf("a read session's retry changed the item: %s", it.State)
	}
	do("sign out", chromedp.Click(chromedp.CSS(`form.who button`)), chromedp.WaitVisible(chromedp.ID("token")))

	// Admin.
	signIn(adminSecret)
	do("overview", chromedp.Navigate(b.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("runs-by-state")))
	if n := text("#review-total"); n != "2" {
		t.Errorf("overview counts %s items in review, want 2", n)
	}
	noCanary("the overview")
	screenshot("console-overview.png")
	do("run page", chromedp.Navigate(b.srv.URL+"/ui/runs/1"), chromedp.WaitVisible(chromedp.ID("graph")))
	noCanary("the run page")
	screenshot("console-run.png")

	// A POST without the CSRF token is refused, and changes nothing.
	do("open the parked item", chromedp.Navigate(b.srv.URL+"/ui/review"), chromedp.WaitVisible(chromedp.CSS(`#items a.item`)),
		chromedp.Click(chromedp.CSS(`#items a.item`)), chromedp.WaitVisible(chromedp.ID("merge_patch")))
	status, err := chromedp.Run(bctx, chromedp.Evaluate[int](`fetch("/ui/review/1/notify/abandon", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "note=no+token"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 403 {
		t.Fatalf("POST without a CSRF token answered %d (%v), want 403", status, err)
	}
	if it, _ := b.client.ReviewGet(ctx, b.runID, "notify"); it.State != store.StateNeedsReview {
		t.Fatalf("a POST without a CSRF token changed the item: %s", it.State)
	}
	noCanary("the review item")

	// Correct, preview, confirm.
	const patch = `{"phone": "+4915112345"}`
	do("enter the correction", chromedp.SetValue(chromedp.ID("merge_patch"), patch),
		chromedp.SendKeys(chromedp.ID("replay-note"), "customer gave the full number"),
		chromedp.Click(chromedp.ID("preview")), chromedp.WaitVisible(chromedp.ID("preview-result")))
	plan, err := b.client.ReviewPreview(ctx, onceflow.ReplayRequest{RunID: b.runID, Step: "notify", MergePatch: []byte(patch), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i, ps := range plan.Steps {
		row := fmt.Sprintf(`#plan tbody tr:nth-child(%d)`, i+1)
		got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(row+` td:first-child`)))
		action, aerr := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(row+` .action`)))
		if err != nil || aerr != nil || got != ps.Step || !strings.EqualFold(action, string(ps.Action)) {
			t.Errorf("the preview's line %d shows %s %q (%v %v), want %s %s as the engine plans it", i+1, got, action, err, aerr, ps.Step, ps.Action)
		}
	}
	if plan.Step("create").Action != onceflow.ReplayKept || plan.Step("task").Action != onceflow.ReplayKept || plan.Step("notify").Action != onceflow.ReplayRun {
		t.Fatalf("engine plan: create %s, task %s, notify %s", plan.Step("create").Action, plan.Step("task").Action, plan.Step("notify").Action)
	}
	noCanary("the replay preview")
	screenshot("console-review-item.png")
	if it, _ := b.client.ReviewGet(ctx, b.runID, "notify"); it.State != store.StateNeedsReview {
		t.Fatalf("the preview changed the item: %s", it.State)
	}
	creates, tasks, notifies := b.dest.count("/create"), b.dest.count("/task"), b.dest.count("/notify")
	// The destination holds the replayed request, so the page opens on a step still at
	// work, and the live region must show it complete without a reload.
	release := b.dest.hold()
	do("confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")),
		chromedp.Evaluate[chromedp.Void](`window.onceflowTestMarker = "same page"`))
	if state := text("#step-state"); state == "completed" {
		t.Fatalf("the step is %s while the destination still holds its request", state)
	}
	release()
	do("see the item complete", chromedp.WaitVisible(chromedp.CSS(`#step-state .st-completed`)))
	if marker, err := chromedp.Run(bctx, chromedp.Evaluate[string](`window.onceflowTestMarker || "reloaded"`)); err != nil || marker != "same page" {
		t.Fatalf("the page was %s (%v), want the live region updated in place", marker, err)
	}
	if c, k, n := b.dest.count("/create")-creates, b.dest.count("/task")-tasks, b.dest.count("/notify")-notifies; c != 0 || k != 0 || n != 1 {
		t.Fatalf("after the replay the destination got %d and %d requests for the kept steps create and task (want 0) and %d for the replayed step notify (want 1)", c, k, n)
	}
	noCanary("the completed item")
	evs, err := b.client.Audit(ctx, onceflow.AuditQuery{RunID: b.runID})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		if e.Type == store.EventReviewReplayed && e.Actor == "token:ops" {
			found = true
		}
	}
	if !found {
		t.Fatal("the replay is not in the audit trail with actor token:ops")
	}
}

// startChromium starts headless Chromium (exe) in a window of 1360×1000 for the test: its
// context ends after 90 s, or when the test does.
func startChromium(t *testing.T, exe string) context.Context {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1360, 1000))...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	bctx, cancel = context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return bctx
}
