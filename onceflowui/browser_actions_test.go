package onceflowui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// chrome is a headless Chromium signed in to a bundle's console.
type chrome struct {
	t   *testing.T
	b   *bundle
	ctx context.Context
}

// newChrome starts Chromium (skipped without it, failed under CI=true) for b's console.
func newChrome(t *testing.T, b *bundle) *chrome {
	t.Helper()
	exe := chromium(t)
	bctx := startChromium(t, exe)
	return &chrome{t: t, b: b, ctx: bctx}
}

func (c *chrome) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.ctx, steps...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

func (c *chrome) text(sel string) string {
	c.t.Helper()
	// Read in one script, as a live region may replace the node at any time.
	s, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`(function (e) { return e ? e.innerText : null; })(document.querySelector(`+strconv.Quote(sel)+`))`))
	if err != nil {
		c.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (c *chrome) eval(js string) bool {
	c.t.Helper()
	v, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		c.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// screenshot writes the page to name in screenshotDir.
func (c *chrome) screenshot(name string) {
	c.t.Helper()
	png, err := chromedp.Run(c.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir(c.t), name), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chrome) signIn(secret string) {
	c.t.Helper()
	c.do("sign in", chromedp.Navigate(c.b.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), secret), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("who")))
}

// typeInto replaces what the text box sel holds by typing text, as a person would (each
// key an input event).
func (c *chrome) typeInto(sel, text string) {
	c.t.Helper()
	c.do("type into "+sel, chromedp.Evaluate[chromedp.Void](`document.querySelector(`+strconv.Quote(sel)+`).value = ""`),
		chromedp.SendKeys(chromedp.CSS(sel), text))
}

// A replay preview goes stale as soon as the correction box changes: the page says so and
// disables its Confirm; a Confirm forced through is refused by the server, and nothing
// reaches the destination; previewed again, the corrected value is what is sent.
func TestBrowserStalePreviewIsRefused(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	b.serve()
	c := newChrome(t, b)
	c.signIn(adminSecret)

	const typo = `{"phone": "+4915112345", "name": "Tne Fixed"}`
	const fixed = `{"phone": "+4915112345", "name": "Ten Fixed"}`
	c.do("open the item", chromedp.Navigate(b.srv.URL+"/ui/review/1/notify"), chromedp.WaitVisible(chromedp.ID("merge_patch")))
	c.typeInto("#merge_patch", typo)
	c.do("preview", chromedp.Click(chromedp.ID("preview")), chromedp.WaitVisible(chromedp.ID("preview-result")))
	if c.eval(`document.getElementById("confirm").disabled`) || !c.eval(`document.getElementById("stale").hidden`) {
		t.Fatal("a fresh preview is marked stale, or its Confirm is disabled")
	}
	c.typeInto("#merge_patch", fixed)
	if !c.eval(`document.getElementById("confirm").disabled`) || c.eval(`document.getElementById("stale").hidden`) ||
		!c.eval(`document.getElementById("preview-result").classList.contains("stale")`) {
		t.Fatal("after the correction changed, the preview is not marked stale with its Confirm disabled")
	}
	c.screenshot("console-stale-preview.png")
	// Forced through, the stale Confirm is refused: the plan it names is not the plan of
	// the correction in the box.
	notifies := b.dest.count("/notify")
	c.do("force the stale confirm", chromedp.Evaluate[chromedp.Void](`(function () { var b = document.getElementById("confirm");
		b.disabled = false; document.getElementById("replay-form").requestSubmit(b); })()`), chromedp.WaitVisible(chromedp.ID("error")))
	if e := c.text("#error"); !strings.Contains(e, "preview again") {
		t.Fatalf("the stale confirm answered %q", e)
	}
	if it, err := b.client.ReviewGet(ctx, b.runID, "notify"); err != nil || it.State != store.StateNeedsReview {
		t.Fatalf("after the refused confirm the item is %+v (%v), want it still in review", it, err)
	}
	if n := b.dest.count("/notify"); n != notifies {
		t.Fatalf("the refused confirm sent %d requests", n-notifies)
	}

	// Preview again, confirm: the destination gets what the new preview showed.
	c.do("preview again", chromedp.Click(chromedp.ID("preview")), chromedp.WaitVisible(chromedp.ID("preview-result")))
	c.do("confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	c.do("see the item complete", chromedp.WaitVisible(chromedp.CSS(`#step-state .st-completed`)))
	if got := b.dest.lastBody("/notify"); !strings.Contains(got, `"name":"Ten Fixed"`) {
		t.Fatalf("the destination got %s, want the name Ten Fixed", got)
	}
	if n := b.dest.count("/notify"); n != notifies+1 {
		t.Fatalf("the destination got %d requests for notify, want 1", n-notifies)
	}
}

// A bulk confirmation acts on exactly the items of its preview: previewed on two items, it
// abandons the one unchanged, refuses the one retried and parked again since (saying
// why), and leaves alone the item parked after the preview.
func TestBrowserBulkConfirmActsOnThePreview(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	b.serve()
	state := func(runID int64) *onceflow.ReviewItem {
		t.Helper()
		it, err := b.client.ReviewGet(ctx, runID, "notify")
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	park := func(key string) int64 {
		t.Helper()
		run, err := b.client.Start(ctx, "signup", key, map[string]any{"customer_id": "c-" + key, "phone": "12"})
		if err != nil {
			t.Fatal(err)
		}
		b.waitFor("run "+key+" parked", func() bool { return state(run.ID).State == store.StateNeedsReview })
		return run.ID
	}
	second := park("evt-2002")

	c := newChrome(t, b)
	c.signIn(adminSecret)
	c.do("preview an abandon of the workflow's items", chromedp.Navigate(b.srv.URL+"/ui/review?workflow=signup"),
		chromedp.WaitVisible(chromedp.ID("bulk-form")),
		chromedp.SetValue(chromedp.CSS(`#bulk-form select[name="action"]`), "abandon"),
		chromedp.SendKeys(chromedp.CSS(`#bulk-form input[name="note"]`), "customers left"),
		chromedp.Click(chromedp.CSS(`#bulk-form button[name="dry_run"]`)), chromedp.WaitVisible(chromedp.ID("bulk-confirm")))
	if s := c.text("#bulk-summary"); !strings.Contains(s, "would apply to 2,") {
		t.Fatalf("the preview says %q", s)
	}
	c.screenshot("console-bulk-preview.png")

	// Meanwhile a third item is parked, and the first is retried and parked again.
	third := park("evt-2003")
	if _, err := b.client.ReviewRetry(ctx, onceflow.ReviewAction{RunID: b.runID, Step: "notify", Actor: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the first item parked again", func() bool {
		it := state(b.runID)
		return it.State == store.StateNeedsReview && it.Attempts == 2
	})

	c.do("confirm", chromedp.Click(chromedp.ID("bulk-confirm-button")), chromedp.WaitVisible(chromedp.CSS("#bulk-summary.applied")))
	if s := c.text("#bulk-summary"); !strings.Contains(s, "applied to 1, refused for 1") {
		t.Fatalf("the confirmation says %q", s)
	}
	if r := c.text("#bulk-report"); !strings.Contains(r, "changed since") || strings.Contains(r, fmt.Sprintf("run %d ", third)) {
		t.Fatalf("the report:\n%s", r)
	}
	for id, want := range map[int64]store.State{second: store.StateFailed, b.runID: store.StateNeedsReview, third: store.StateNeedsReview} {
		if got := state(id).State; got != want {
			t.Errorf("run %d notify is %s after the confirmation, want %s", id, got, want)
		}
	}
}

// Cancel, Abandon and Pause ask first: one click shows what will happen and changes
// nothing; only the confirmation acts.
func TestBrowserDestructiveActionsAskFirst(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	item := func() store.State {
		t.Helper()
		it, err := b.client.ReviewGet(ctx, b.runID, "notify")
		if err != nil {
			t.Fatal(err)
		}
		return it.State
	}
	c := newChrome(t, b)
	c.signIn(adminSecret)

	c.do("one click on cancel", chromedp.Navigate(b.srv.URL+"/ui/runs/1"), chromedp.WaitVisible(chromedp.ID("cancel")),
		chromedp.SendKeys(chromedp.ID("cancel-note"), "customer withdrew"),
		chromedp.Click(chromedp.ID("cancel")), chromedp.WaitVisible(chromedp.ID("confirm-page")))
	if h, l := c.text("h1"), c.text("#consequences"); h != "Cancel run 1?" || !strings.Contains(l, "notify (needs_review) is cancelled") {
		t.Fatalf("the cancel's confirmation says %q: %q", h, l)
	}
	c.screenshot("console-confirm-cancel.png")
	if run, err := b.store.RunGetByID(ctx, b.runID); err != nil || run.State == store.StateCancelled || item() != store.StateNeedsReview {
		t.Fatalf("one click on cancel acted: run %+v (%v), item %s", run, err, item())
	}
	c.do("go back", chromedp.Click(chromedp.ID("confirm-back")), chromedp.WaitVisible(chromedp.ID("graph")))

	c.do("one click on abandon", chromedp.Navigate(b.srv.URL+"/ui/review/1/notify"), chromedp.WaitVisible(chromedp.ID("abandon")),
		chromedp.Click(chromedp.ID("abandon")), chromedp.WaitVisible(chromedp.ID("confirm-page")))
	if h := c.text("h1"); h != "Abandon run 1 step notify?" {
		t.Fatalf("the abandon's confirmation says %q", h)
	}
	if s := item(); s != store.StateNeedsReview {
		t.Fatalf("one click on abandon left the item %s", s)
	}
	c.do("confirm the abandon", chromedp.Click(chromedp.ID("confirm-action")), chromedp.WaitVisible(chromedp.ID("flash")))
	if s := item(); s != store.StateFailed {
		t.Fatalf("the confirmed abandon left the item %s, want failed", s)
	}

	c.do("one click on pause", chromedp.Navigate(b.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("pause-signup")),
		chromedp.Click(chromedp.ID("pause-signup")), chromedp.WaitVisible(chromedp.ID("confirm-page")))
	if h := c.text("h1"); h != "Pause signup?" {
		t.Fatalf("the pause's confirmation says %q", h)
	}
	if list, err := b.client.PausedWorkflows(ctx); err != nil || len(list) != 0 {
		t.Fatalf("one click on pause paused %+v (%v)", list, err)
	}
	c.do("confirm the pause", chromedp.Click(chromedp.ID("confirm-action")), chromedp.WaitVisible(chromedp.ID("paused-signup")))
	if list, err := b.client.PausedWorkflows(ctx); err != nil || len(list) != 1 || list[0].Workflow != "signup" {
		t.Fatalf("after the confirmed pause the paused workflows are %+v (%v)", list, err)
	}
}
