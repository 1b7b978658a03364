package onceflowui_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// chromeSession is a chrome that also reads JSON answers and the audit table of its page.
type chromeSession struct{ *chrome }

// newChromeSession starts Chromium for b's console; it stops when the test ends.
func newChromeSession(t *testing.T, b *bundle) *chromeSession { return &chromeSession{newChrome(t, b)} }

func (br *chromeSession) html() string {
	br.t.Helper()
	s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		br.t.Fatal(err)
	}
	return s
}

// eval runs js in the page and decodes its result into out.
func (br *chromeSession) eval(js string, out any) {
	br.t.Helper()
	s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		br.t.Fatalf("%s: %v", js, err)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		br.t.Fatalf("%s answered %q: %v", js, s, err)
	}
}

// auditRow is a row of the audit page's table.
type auditRow struct {
	ID    int64  `json:"id"`
	Type  string `json:"type"`
	Actor string `json:"actor"`
	Why   string `json:"why"`
}

// rows reads the audit page's table.
func (br *chromeSession) rows() []auditRow {
	br.t.Helper()
	var rows []auditRow
	br.eval(`Promise.resolve(JSON.stringify([...document.querySelectorAll("#audit tbody tr[data-type]")].map(tr => ({
		id: Number(tr.cells[0].textContent), type: tr.dataset.type, actor: tr.dataset.actor, why: tr.querySelector(".why").textContent}))))`, &rows)
	return rows
}

// TestBrowserAudit drives the audit page in headless Chromium: every event newest first;
// filtered by actor and type, it shows the cancel a person made with the note they typed;
// by workflow; paged backwards; a filter that makes no sense is refused with what to fix;
// and the export of a filter, as CSV and as JSON, holds exactly the events the filter
// selects, masked as the page is.
func TestBrowserAudit(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	const note = "customer asked for a refund instead"
	if _, err := b.client.CancelRun(ctx, b.runID, "token:ops", note); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.PauseWorkflow(ctx, "signup", "token:ops", "CRM maintenance "+canarySecret); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.ResumeWorkflow(ctx, "signup", "token:ops", "CRM back"); err != nil {
		t.Fatal(err)
	}
	// 60 reads by one person, for a filter that takes two pages.
	for i := range 60 {
		if err := b.client.RecordOperatorEvent(ctx, onceflow.OperatorEvent{Type: onceflow.EventDataUnmasked, Actor: "cli:pager", RunID: b.runID,
			Workflow: "signup", Reason: "unmasked", Detail: map[string]any{"read": fmt.Sprintf("run %d (%d)", b.runID, i)}}); err != nil {
			t.Fatal(err)
		}
	}
	br := newChromeSession(t, b)
	br.signIn(readSecret)

	// Every event, newest first: the sign-in just made leads.
	br.do("the audit page", chromedp.Navigate(b.srv.URL+"/ui/audit"), chromedp.WaitVisible(chromedp.ID("audit-filter")))
	all := br.rows()
	if len(all) != 50 || all[0].Type != string(store.EventConsoleSignedIn) || all[0].Actor != "token:viewer" {
		t.Fatalf("the audit page shows %d events, the first %+v; want a page of 50, the sign-in first", len(all), all[0])
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("event %d after %d: not newest first", all[i].ID, all[i-1].ID)
		}
	}
	if h := br.html(); strings.Contains(h, canarySecret) || strings.Contains(h, canaryPII) {
		t.Error("the audit page shows a planted canary")
	}

	// By actor and type: the cancel, with its note in the sentence.
	br.do("filter by actor and type", chromedp.SetValue(chromedp.ID("f-actor"), "token:ops"), chromedp.SetValue(chromedp.ID("f-type"), "run.cancelled"),
		chromedp.Click(chromedp.ID("audit-find")), chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-type="run.cancelled"]`)))
	got := br.rows()
	if len(got) != 1 || got[0].Actor != "token:ops" || !strings.Contains(got[0].Why, `note: "`+note+`"`) || !strings.Contains(got[0].Why, "run cancelled by token:ops") {
		t.Fatalf("filtered by actor token:ops and type run.cancelled the page shows %+v, want the cancel with its note", got)
	}
	br.screenshot("console-audit.png")

	// Several types, one workflow.
	br.do("filter by types and workflow", chromedp.Navigate(b.srv.URL+"/ui/audit?type=workflow.paused,workflow.resumed&workflow=signup"),
		chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-type="workflow.resumed"]`)))
	got = br.rows()
	if len(got) != 2 || got[0].Type != "workflow.resumed" || got[1].Type != "workflow.paused" || !strings.Contains(got[0].Why, `note: "CRM back"`) {
		t.Fatalf("the pauses of signup: %+v", got)
	}
	if strings.Contains(br.html(), canarySecret) {
		t.Error("a pause's note shows a configured secret")
	}

	// Paged backwards: 50, then the 10 before them.
	br.do("one person's reads", chromedp.Navigate(b.srv.URL+"/ui/audit?actor=cli:pager"), chromedp.WaitVisible(chromedp.ID("audit-older")))
	first := br.rows()
	br.do("older", chromedp.Click(chromedp.ID("audit-older")), chromedp.WaitVisible(chromedp.ID("audit-newest")))
	older := br.rows()
	if len(first) != 50 || len(older) != 10 || older[0].ID >= first[49].ID {
		t.Fatalf("pages of 60 reads: %d then %d (first of the second %d, last of the first %d)", len(first), len(older), older[0].ID, first[len(first)-1].ID)
	}
	for _, r := range append(first, older...) {
		if r.Actor != "cli:pager" || r.Type != string(onceflow.EventDataUnmasked) {
			t.Fatalf("a page of cli:pager's events shows %+v", r)
		}
	}

	// A filter that makes no sense says what to fix.
	br.do("a bad filter", chromedp.Navigate(b.srv.URL+"/ui/audit?type=DROP+TABLE&since=yesterday"), chromedp.WaitVisible(chromedp.ID("error")))
	if msg, err := chromedp.Run(br.ctx, chromedp.Text(chromedp.ID("error"))); err != nil || !strings.Contains(msg, "is not an event type") {
		t.Fatalf("a bad type: %q (%v)", msg, err)
	}

	// The export of a filter holds what the filter selects, all of it, masked.
	br.do("filter by actor", chromedp.Navigate(b.srv.URL+"/ui/audit?actor=token:ops"), chromedp.WaitVisible(chromedp.ID("export-csv")))
	want, err := b.client.Audit(ctx, onceflow.AuditQuery{Actor: "token:ops", Newest: true})
	if err != nil {
		t.Fatal(err)
	}
	var csvText string
	br.eval(`fetch(document.getElementById("export-csv").href).then(r => r.text()).then(t => JSON.stringify(t))`, &csvText)
	records, err := csv.NewReader(strings.NewReader(csvText)).ReadAll()
	if err != nil {
		t.Fatalf("the CSV export: %v\n%s", err, csvText)
	}
	if len(records) != len(want)+1 || records[0][0] != "id" || records[0][11] != "why" {
		t.Fatalf("the CSV export has %d records, want a header and %d events:\n%s", len(records), len(want), csvText)
	}
	for i, e := range want {
		if rec := records[i+1]; rec[0] != strconv.FormatInt(e.ID, 10) || rec[9] != "token:ops" || rec[11] != e.Why {
			t.Errorf("CSV record %d = %q, want event %d by token:ops: %s", i+1, rec, e.ID, e.Why)
		}
	}
	if !strings.Contains(csvText, note) || strings.Contains(csvText, canarySecret) || strings.Contains(csvText, canaryPII) {
		t.Errorf("the CSV export lacks the note or shows a canary:\n%s", csvText)
	}
	var doc struct {
		Events []struct {
			ID    int64  `json:"id"`
			Actor string `json:"actor"`
			Why   string `json:"why"`
		} `json:"events"`
		Complete bool `json:"complete"`
	}
	var jsonText string
	br.eval(`fetch(document.getElementById("export-json").href).then(r => r.text()).then(t => JSON.stringify(t))`, &jsonText)
	if err := json.Unmarshal([]byte(jsonText), &doc); err != nil {
		t.Fatalf("the JSON export: %v\n%s", err, jsonText)
	}
	if !doc.Complete || len(doc.Events) != len(want) || doc.Events[0].ID != want[0].ID || strings.Contains(jsonText, canarySecret) {
		t.Fatalf("the JSON export: complete %v, %d events (want %d, the newest %d first):\n%s", doc.Complete, len(doc.Events), len(want), want[0].ID, jsonText)
	}
}
