package onceflowui_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow"
)

// TestBrowserReveal drives a reveal in headless Chromium: a read session cannot reveal (the
// button is disabled, and the server refuses a forced post); an admin reveals the masked
// e-mail of a run with a reason and sees it once, the reveal audited with the field and
// the reason but not the value; the page loaded again masks it; a correction of the masked
// field shows in the revision diff as changed (masked), its new value revealed on purpose
// too; a secret is never offered nor shown.
func TestBrowserReveal(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	const newEmail = "canary-pii-new@example.com"
	if _, err := b.client.ReviewReplay(ctx, onceflow.ReplayRequest{RunID: b.runID, Step: "notify", Actor: "token:ops", Note: "customer's new address",
		MergePatch: []byte(`{"email": "` + newEmail + `", "phone": "+4915112345"}`)}); err != nil {
		t.Fatal(err)
	}
	revealed := func() []*onceflow.AuditEntry {
		t.Helper()
		evs, err := b.client.Audit(ctx, onceflow.AuditQuery{RunID: b.runID, Types: []onceflow.EventType{onceflow.EventDataRevealed}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	br := newChromeSession(t, b)

	// Read only: the button is disabled, and a forced post is refused.
	br.signIn(readSecret)
	br.do("the run page", chromedp.Navigate(b.srv.URL+"/ui/runs/1"), chromedp.WaitVisible(chromedp.ID("reveal-form")))
	var disabled bool
	br.eval(`Promise.resolve(JSON.stringify(document.getElementById("reveal").disabled))`, &disabled)
	if !disabled {
		t.Error("a read session's reveal button is enabled")
	}
	var status int
	br.eval(`fetch(document.getElementById("reveal-form").action, {method: "POST", body: new URLSearchParams({
		csrf: document.querySelector("#reveal-form [name=csrf]").value, field: "input.email", reason: "curious"})}).then(r => JSON.stringify(r.status))`, &status)
	if status != 403 || len(revealed()) != 0 {
		t.Fatalf("a read session's reveal answered %d, %d reveals audited; want 403 and none", status, len(revealed()))
	}
	br.do("sign out", chromedp.Click(chromedp.CSS(`form.who button`)), chromedp.WaitVisible(chromedp.ID("token")))

	// Admin: the masked correction, then a reveal.
	br.signIn(adminSecret)
	br.do("the run page", chromedp.Navigate(b.srv.URL+"/ui/runs/1"), chromedp.WaitVisible(chromedp.ID("reveal-form")))
	var changes []string
	br.eval(`Promise.resolve(JSON.stringify([...document.querySelectorAll("table.diff tbody tr")].map(tr => tr.textContent.replace(/\s+/g, " ").trim())))`, &changes)
	joined := strings.Join(changes, "\n")
	if !strings.Contains(joined, "emailchanged (masked)") || !strings.Contains(joined, "phone") || strings.Contains(joined, newEmail) {
		t.Fatalf("the revision diff shows %q; want the e-mail changed (masked), beside the phone", changes)
	}
	var options []string
	br.eval(`Promise.resolve(JSON.stringify([...document.querySelectorAll("#reveal-field option")].map(o => o.value)))`, &options)
	for _, want := range []string{"input.email", "revisions.1.before.email", "revisions.1.after.email"} {
		if !strings.Contains(strings.Join(options, " "), want) {
			t.Errorf("the reveal offers %q, not %s", options, want)
		}
	}
	if h := br.html(); strings.Contains(h, canaryPII) || strings.Contains(h, newEmail) || strings.Contains(h, canarySecret) {
		t.Fatal("the run page shows a masked value before any reveal")
	}
	const reason = "the customer asked which address we hold"
	br.do("reveal the e-mail", chromedp.SetValue(chromedp.ID("reveal-field"), "input.email"), chromedp.SendKeys(chromedp.ID("reveal-reason"), reason),
		chromedp.Click(chromedp.ID("reveal")), chromedp.WaitVisible(chromedp.ID("revealed-value")))
	if v, err := chromedp.Run(br.ctx, chromedp.Text(chromedp.ID("revealed-value"))); err != nil || !strings.Contains(v, newEmail) {
		t.Fatalf("the revealed value is %q (%v), want the input's e-mail now, %s", v, err, newEmail)
	}
	br.screenshot("console-reveal.png")
	evs := revealed()
	if len(evs) != 1 || evs[0].Actor != "token:ops" || !strings.Contains(evs[0].Why, "revealed input.email of run 1") || !strings.Contains(evs[0].Why, reason) {
		t.Fatalf("the reveal's audit events: %+v", evs)
	}
	var d map[string]any
	if err := json.Unmarshal(evs[0].Detail, &d); err != nil || d["field"] != "input.email" || d["reason"] != reason {
		t.Fatalf("the reveal's detail %s", evs[0].Detail)
	}
	unmasked, err := b.client.Unmasked("test:audit").Audit(ctx, onceflow.AuditQuery{RunID: b.runID, Types: []onceflow.EventType{onceflow.EventDataRevealed}})
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(unmasked); strings.Contains(string(raw), newEmail) || strings.Contains(string(raw), canaryPII) {
		t.Fatalf("the stored reveal event holds the value: %s", raw)
	}

	// Once: the page loaded again masks it.
	br.do("the run page again", chromedp.Navigate(b.srv.URL+"/ui/runs/1"), chromedp.WaitVisible(chromedp.ID("reveal-form")))
	if h := br.html(); strings.Contains(h, newEmail) {
		t.Fatal("the revealed value shows again on a new load of the page")
	}

	// The value before the correction, from the revision diff.
	br.do("reveal the e-mail before the correction", chromedp.SetValue(chromedp.ID("reveal-field"), "revisions.1.before.email"),
		chromedp.SendKeys(chromedp.ID("reveal-reason"), "which address was corrected"), chromedp.Click(chromedp.ID("reveal")),
		chromedp.WaitVisible(chromedp.ID("revealed-value")))
	if v, err := chromedp.Run(br.ctx, chromedp.Text(chromedp.ID("revealed-value"))); err != nil || !strings.Contains(v, canaryPII) {
		t.Fatalf("the e-mail before the correction is %q (%v), want %s", v, err, canaryPII)
	}

	// A secret is never shown: the memo holds one, and stays masked in what a reveal shows.
	br.do("reveal the memo", chromedp.Navigate(b.srv.URL+"/ui/runs/1"), chromedp.WaitVisible(chromedp.ID("reveal-form")),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("reveal-field").add(new Option("input.memo", "input.memo"))`),
		chromedp.SetValue(chromedp.ID("reveal-field"), "input.memo"), chromedp.SendKeys(chromedp.ID("reveal-reason"), "what does the memo say"),
		chromedp.Click(chromedp.ID("reveal")), chromedp.WaitVisible(chromedp.ID("revealed-value")))
	if h := br.html(); strings.Contains(h, canarySecret) {
		t.Fatal("a reveal showed a configured secret")
	}
	if _, err := b.client.Reveal(ctx, onceflow.RevealRequest{RunID: b.runID, Field: "input.api_token", Reason: "x", Actor: "test"}); err == nil ||
		!strings.Contains(err.Error(), "never revealed") {
		t.Fatalf("a reveal of a secret-named field: %v", err)
	}
	if _, err := b.client.Reveal(ctx, onceflow.RevealRequest{RunID: b.runID, Field: "input.email", Actor: "test"}); err == nil ||
		!strings.Contains(err.Error(), "reason is required") {
		t.Fatalf("a reveal without a reason: %v", err)
	}
}
