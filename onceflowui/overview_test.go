package onceflowui_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

// cardRE reads a card of the overview: its number and what it counts.
var cardRE = regexp.MustCompile(`<span class="n"[^>]*>(\d+)</span> ([a-z ]+)`)

// failureRE reads the run of each line of the overview's recent failures.
var failureRE = regexp.MustCompile(`(?s)<table class="events" id="failures">.*?</table>`)
var failureRunRE = regexp.MustCompile(`<td><a href="/ui/runs/(\d+)">`)

// The overview counts what the database holds however many events the last hour has: with
// more than 20,000 events (where it used to stop reading), its cards agree with count
// queries on the database, and its recent failures start with the newest.
func TestOverviewCountsWhatTheDatabaseHolds(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	since := time.Now().Add(-time.Hour)
	ok := func(context.Context, *onceflow.StepContext) (any, error) { return map[string]int{"ok": 1}, nil }
	err := b.client.Register(onceflow.Workflow{Name: "tally", Steps: []onceflow.Step{
		{ID: "one", Do: ok},
		{ID: "two", Needs: []string{"one"}, Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			var in struct{ N int }
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			if in.N%40 == 0 {
				return nil, onceflow.PermanentError(fmt.Errorf("run %d refused", in.N))
			}
			return map[string]int{"ok": 2}, nil
		}},
		{ID: "three", Needs: []string{"one"}, OnFailure: onceflow.Fail, Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			var in struct{ N int }
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			if in.N%55 == 0 {
				return nil, onceflow.PermanentError(errors.New("given up"))
			}
			return nil, nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	const runs = 2400
	for from := 0; from < runs; from += 400 {
		var items []onceflow.StartItem
		for n := from + 1; n <= from+400; n++ {
			items = append(items, onceflow.StartItem{RunKey: "tally-" + strconv.Itoa(n), Input: map[string]int{"n": n}})
		}
		if _, err := b.client.StartMany(ctx, "tally", items); err != nil {
			t.Fatal(err)
		}
	}
	for {
		n, err := b.client.Work(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}

	events := 0
	for after := int64(0); ; {
		evs, err := b.client.Audit(ctx, onceflow.AuditQuery{AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		events += len(evs)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].ID
	}
	if events <= 20000 {
		t.Fatalf("the trail holds %d events, want more than 20,000", events)
	}

	db, err := sql.Open("sqlite", "file:"+b.path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	us := since.UnixMicro()
	want := map[string]int{
		"runs started in the last hour": count(`SELECT count(*) FROM runs WHERE created_at >= ?`, us),
		"steps completed":               count(`SELECT count(*) FROM steps WHERE state = 'completed' AND updated_at >= ?`, us),
		"steps parked or failed":        count(`SELECT count(*) FROM steps WHERE state IN ('needs_review', 'failed') AND updated_at >= ?`, us),
		"waiting for review":            count(`SELECT count(*) FROM steps WHERE state = 'needs_review'`),
	}
	if want["runs started in the last hour"] != runs+1 || want["steps parked or failed"] < 90 {
		t.Fatalf("the database holds %v", want)
	}
	br := b.browser()
	br.signIn(readSecret)
	_, page := br.get("/ui/")
	got := map[string]int{}
	for _, m := range cardRE.FindAllStringSubmatch(page, -1) {
		got[m[2]], _ = strconv.Atoi(m[1])
	}
	for card, n := range want {
		if got[card] != n {
			t.Errorf("the overview shows %d %s, the database holds %d", got[card], card, n)
		}
	}
	newest := count(`SELECT run_id FROM events WHERE type IN ('step.needs_review', 'step.failed') ORDER BY id DESC LIMIT 1`)
	lines := failureRunRE.FindAllStringSubmatch(failureRE.FindString(page), -1)
	if len(lines) != 10 || lines[0][1] != strconv.Itoa(newest) {
		t.Errorf("the recent failures list runs %v, want 10 starting with run %d, the newest failure", lines, newest)
	}
}
