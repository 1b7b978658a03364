package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

var incidentTests = []subtest{
	{"EventScan", testEventScan},
	{"RecordGroups", testIncidentRecordGroups},
	{"RecordCursor", testIncidentRecordCursor},
	{"RecordConcurrent", testIncidentRecordConcurrent},
	{"DueMarkClose", testIncidentDueMarkClose},
	{"List", testIncidentList},
}

// review starts a run with one step and parks that step in needs_review with reason at now.
func (h *harness) review(key string, now time.Time, reason store.Reason) *store.Run {
	h.t.Helper()
	run := h.newRun(store.RunInsertParams{RunKey: key, Entity: "lead:" + key, Now: now, Steps: []store.StepInsert{step("notice")}})
	cs := h.claimOne(now, "w1")
	if cs.Run.ID != run.ID {
		h.t.Fatalf("claimed a step of run %d, want run %d", cs.Run.ID, run.ID)
	}
	h.mustRecord(giveUp(cs, now, store.OutcomePermanent, store.StateNeedsReview, reason))
	return run
}

func (h *harness) scan(p store.EventScanParams) *store.EventScanResult {
	h.t.Helper()
	res, err := h.s.EventScan(h.ctx, p)
	if err != nil {
		h.t.Fatalf("EventScan(%+v): %v", p, err)
	}
	return res
}

func testEventScan(h *harness) {
	r1 := h.review("r1", base, store.ReasonPermanentError)
	r2 := h.newRun(store.RunInsertParams{RunKey: "r2", Steps: []store.StepInsert{step("a")}})
	h.mustRecord(succeed(h.claimOne(at(time.Second), "w1"), at(time.Second), `{}`))
	r3 := h.review("r3", at(2*time.Second), store.ReasonAttemptsExhausted)
	all := h.events(store.EventListParams{})
	newest := h.last("events", all, 1)[0].ID

	want := []store.EventType{store.EventStepNeedsReview}
	res := h.scan(store.EventScanParams{Types: want})
	if len(res.Events) != 2 || res.Events[0].RunID != r1.ID || res.Events[1].RunID != r3.ID {
		h.t.Fatalf("EventScan(needs_review) = %d events, want the reviews of runs %d and %d", len(res.Events), r1.ID, r3.ID)
	}
	e := res.Events[1]
	if e.Type != store.EventStepNeedsReview || e.Workflow != defaultWorkflow || e.StepName != "notice" || e.Entity != "lead:r3" ||
		e.Reason != store.ReasonAttemptsExhausted || e.At.IsZero() || len(e.Detail) == 0 {
		h.t.Errorf("scanned event %+v does not carry the event's fields", e)
	}
	wantEqual(h.t, "Through of a scan that read everything", res.Through, newest)

	// Paging: a full page ends at its last event, and the next page starts after it.
	page := h.scan(store.EventScanParams{Types: want, Limit: 1})
	if len(page.Events) != 1 || page.Events[0].RunID != r1.ID {
		h.t.Fatalf("first page = %d events, want the review of run %d", len(page.Events), r1.ID)
	}
	wantEqual(h.t, "Through of a full page", page.Through, page.Events[0].ID)
	page = h.scan(store.EventScanParams{Types: want, AfterID: page.Through, Limit: 1})
	if len(page.Events) != 1 || page.Events[0].RunID != r3.ID {
		h.t.Fatalf("second page = %d events, want the review of run %d", len(page.Events), r3.ID)
	}

	// Nothing new: the position stays; a type never written still advances it.
	again := h.scan(store.EventScanParams{Types: want, AfterID: res.Through})
	if len(again.Events) != 0 || again.Through != res.Through {
		h.t.Errorf("scan after Through = %d events through %d, want none through %d", len(again.Events), again.Through, res.Through)
	}
	none := h.scan(store.EventScanParams{Types: []store.EventType{"no.such_type"}})
	if len(none.Events) != 0 || none.Through != newest {
		h.t.Errorf("scan of an unused type = %d events through %d, want none through %d", len(none.Events), none.Through, newest)
	}
	two := h.scan(store.EventScanParams{Types: []store.EventType{store.EventRunCreated, store.EventStepCompleted}})
	if got := types(two.Events); !slices.Equal(got, []store.EventType{store.EventRunCreated, store.EventRunCreated, store.EventStepCompleted, store.EventRunCreated}) {
		h.t.Errorf("scan of two types = %q (run %d completed its step)", got, r2.ID)
	}
	if _, err := h.s.EventScan(h.ctx, store.EventScanParams{}); err == nil {
		h.t.Error("EventScan without Types: no error")
	}
}

// hit is a match of event id (run id, at base+d) by policy p for step s and reason r.
func hit(p, s string, r store.Reason, id int64, d time.Duration) store.IncidentHit {
	return store.IncidentHit{Policy: p, Workflow: defaultWorkflow, StepName: s, Reason: r, Window: time.Hour,
		Event: store.IncidentExample{EventID: id, RunID: id, Entity: fmt.Sprintf("lead:%d", id), At: at(d), Error: "refused"}}
}

func (h *harness) recordHits(from, to int64, now time.Time, hits ...store.IncidentHit) []*store.Incident {
	h.t.Helper()
	opened, err := h.s.IncidentRecord(h.ctx, store.IncidentRecordParams{Cursor: "notifier", From: from, To: to, Hits: hits, Actor: "notifier", Now: now})
	if err != nil {
		h.t.Fatalf("IncidentRecord(%d → %d): %v", from, to, err)
	}
	return opened
}

func (h *harness) incidents(p store.IncidentListParams) []*store.Incident {
	h.t.Helper()
	list, err := h.s.IncidentList(h.ctx, p)
	if err != nil {
		h.t.Fatalf("IncidentList(%+v): %v", p, err)
	}
	return list
}

// byFirst indexes incidents by the ID of the event that opened them.
func byFirst(list []*store.Incident) map[int64]*store.Incident {
	out := map[int64]*store.Incident{}
	for _, inc := range list {
		out[inc.First.EventID] = inc
	}
	return out
}

// incidentByFirst returns the incident whose first event is id, ending the case when there
// is none.
func (h *harness) incidentByFirst(id int64) *store.Incident {
	h.t.Helper()
	inc := byFirst(h.incidents(store.IncidentListParams{}))[id]
	if inc == nil {
		h.t.Fatalf("no incident starts at event %d", id)
	}
	return inc
}

func exampleIDs(xs []store.IncidentExample) []int64 {
	var out []int64
	for _, x := range xs {
		out = append(out, x.EventID)
	}
	return out
}

func testIncidentRecordGroups(h *harness) {
	opened := h.recordHits(0, 20, at(2*time.Hour),
		hit("ops", "notice", store.ReasonPermanentError, 1, 0),
		hit("ops", "notice", store.ReasonPermanentError, 2, 10*time.Minute),
		hit("ops", "notice", store.ReasonAttemptsExhausted, 3, 11*time.Minute), // another reason
		hit("ops", "crm", store.ReasonPermanentError, 4, 12*time.Minute),       // another step
		hit("team", "notice", store.ReasonPermanentError, 5, 13*time.Minute),   // another policy
		hit("ops", "notice", store.ReasonPermanentError, 6, 59*time.Minute),
		hit("ops", "notice", store.ReasonPermanentError, 7, time.Hour), // at EndsAt: the next incident
		hit("ops", "notice", store.ReasonPermanentError, 8, 70*time.Minute),
	)
	if got := exampleIDs(firsts(opened)); !slices.Equal(got, []int64{1, 3, 4, 5, 7}) {
		h.t.Fatalf("IncidentRecord opened incidents first at events %v, want [1 3 4 5 7]", got)
	}
	for _, inc := range opened {
		if inc.ID == 0 || inc.Count != 1 || !inc.EndsAt.Equal(inc.OpenedAt.Add(time.Hour)) {
			h.t.Errorf("opened incident %+v: want an ID, count 1 and EndsAt one window after OpenedAt", inc)
		}
	}
	all := byFirst(h.incidents(store.IncidentListParams{}))
	if len(all) != 5 {
		h.t.Fatalf("%d incidents stored, want 5", len(all))
	}
	first := all[1]
	wantEqual(h.t, "count of the first incident", first.Count, 3)
	if got := exampleIDs(first.Repeats); !slices.Equal(got, []int64{2, 6}) {
		h.t.Errorf("repeats of the first incident = %v, want [2 6]", got)
	}
	if first.Policy != "ops" || first.Workflow != defaultWorkflow || first.StepName != "notice" || first.Reason != store.ReasonPermanentError ||
		first.First.RunID != 1 || first.First.Entity != "lead:1" || first.First.Error != "refused" || first.LastEventID != 6 {
		h.t.Errorf("first incident = %+v", first)
	}
	h.wantTime("OpenedAt", first.OpenedAt, base)
	h.wantTime("EndsAt", first.EndsAt, at(time.Hour))
	h.wantTime("LastAt", first.LastAt, at(59*time.Minute))
	h.wantTime("First.At", first.First.At, base)
	if !first.AlertedAt.IsZero() || !first.ClosedAt.IsZero() {
		h.t.Errorf("a new incident is alerted at %s, closed at %s; want neither", first.AlertedAt, first.ClosedAt)
	}
	wantEqual(h.t, "count of the next incident", all[7].Count, 2)
	for _, id := range []int64{3, 4, 5} {
		wantEqual(h.t, fmt.Sprintf("count of the incident of event %d", id), all[id].Count, 1)
	}

	// The repeats kept as examples are capped; the count is not.
	var many []store.IncidentHit
	for i := range int64(10) {
		many = append(many, hit("ops", "crm", store.ReasonPermanentError, 100+i, 20*time.Minute+time.Duration(i)*time.Second))
	}
	if opened := h.recordHits(20, 200, at(2*time.Hour), many...); len(opened) != 0 {
		h.t.Errorf("repeats opened %d incidents", len(opened))
	}
	crm := h.incidentByFirst(4)
	wantEqual(h.t, "count after 10 repeats", crm.Count, 11)
	if got := exampleIDs(crm.Repeats); !slices.Equal(got, []int64{100, 101, 102, 103, 104}) {
		h.t.Errorf("repeats kept = %v, want the first %d", got, store.MaxIncidentRepeats)
	}

	// Each new incident has its audit event, naming the run that opened it.
	evs := ofType(h.events(store.EventListParams{}), store.EventIncidentOpened)
	if len(evs) != 5 {
		h.t.Fatalf("%d incident.opened events, want 5", len(evs))
	}
	d := h.detailOf(evs[0])
	if evs[0].RunID != 1 || evs[0].Entity != "lead:1" || evs[0].StepName != "notice" || evs[0].Reason != store.ReasonPermanentError ||
		evs[0].Actor != "notifier" || d["policy"] != "ops" || fmt.Sprint(d["incident"]) != fmt.Sprint(first.ID) {
		h.t.Errorf("incident.opened event %+v detail %v", evs[0], d)
	}
}

func firsts(list []*store.Incident) []store.IncidentExample {
	var out []store.IncidentExample
	for _, inc := range list {
		out = append(out, inc.First)
	}
	return out
}

func testIncidentRecordCursor(h *harness) {
	if pos, found, err := h.s.IncidentCursorGet(h.ctx, "notifier"); err != nil || found || pos != 0 {
		h.t.Fatalf("IncidentCursorGet of a new cursor = %d, %v, %v; want 0, false, nil", pos, found, err)
	}
	record := func(from, to int64, hits ...store.IncidentHit) error {
		_, err := h.s.IncidentRecord(h.ctx, store.IncidentRecordParams{Cursor: "notifier", From: from, To: to, Hits: hits, Actor: "notifier", Now: base})
		return err
	}
	if err := record(5, 9, hit("ops", "notice", store.ReasonPermanentError, 6, 0)); !errors.Is(err, store.ErrCursorMoved) {
		h.t.Errorf("IncidentRecord from 5 on a new cursor: %v, want ErrCursorMoved", err)
	}
	if len(h.incidents(store.IncidentListParams{})) != 0 {
		h.t.Fatal("a refused IncidentRecord wrote incidents")
	}
	h.recordHits(0, 3, base, hit("ops", "notice", store.ReasonPermanentError, 2, 0))
	if pos, found, err := h.s.IncidentCursorGet(h.ctx, "notifier"); err != nil || !found || pos != 3 {
		h.t.Fatalf("IncidentCursorGet = %d, %v, %v; want 3, true, nil", pos, found, err)
	}
	if err := record(0, 4, hit("ops", "notice", store.ReasonPermanentError, 2, 0)); !errors.Is(err, store.ErrCursorMoved) {
		h.t.Errorf("IncidentRecord from a stale position: %v, want ErrCursorMoved", err)
	}
	h.recordHits(3, 3, base) // no events: the position stays
	h.recordHits(3, 8, base, hit("ops", "notice", store.ReasonPermanentError, 5, time.Minute))
	list := h.incidents(store.IncidentListParams{})
	if len(list) != 1 || list[0].Count != 2 {
		h.t.Fatalf("incidents after refused and accepted records = %+v, want 1 with count 2", list)
	}
	if pos, _, _ := h.s.IncidentCursorGet(h.ctx, "notifier"); pos != 8 {
		h.t.Errorf("cursor = %d, want 8", pos)
	}
	if pos, found, _ := h.s.IncidentCursorGet(h.ctx, "other"); found || pos != 0 {
		h.t.Errorf("cursor other = %d, %v; cursors must be independent", pos, found)
	}
	for _, p := range []store.IncidentRecordParams{
		{From: 8, To: 9, Now: base},
		{Cursor: "notifier", From: 8, To: 7, Now: base},
		{Cursor: "notifier", From: 8, To: 9},
		{Cursor: "notifier", From: 8, To: 9, Now: base, Hits: []store.IncidentHit{{Policy: "ops", Event: store.IncidentExample{EventID: 9, At: base}}}},
	} {
		if _, err := h.s.IncidentRecord(h.ctx, p); err == nil || errors.Is(err, store.ErrCursorMoved) {
			h.t.Errorf("IncidentRecord(%+v): %v, want an error about the params", p, err)
		}
	}
}

func testIncidentRecordConcurrent(h *harness) {
	const recorders = 8
	hits := []store.IncidentHit{
		hit("ops", "notice", store.ReasonPermanentError, 1, 0),
		hit("ops", "notice", store.ReasonPermanentError, 2, time.Second),
		hit("ops", "crm", store.ReasonPermanentError, 3, 2*time.Second),
	}
	var mu sync.Mutex
	var won, moved int
	var wg sync.WaitGroup
	for range recorders {
		wg.Go(func() {
			_, err := h.s.IncidentRecord(h.ctx, store.IncidentRecordParams{Cursor: "notifier", From: 0, To: 3, Hits: hits, Actor: "notifier", Now: base})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrCursorMoved):
				moved++
			default:
				h.t.Errorf("IncidentRecord: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || moved != recorders-1 {
		h.t.Fatalf("%d recorders applied the same events and %d found the cursor moved; want 1 and %d", won, moved, recorders-1)
	}
	all := byFirst(h.incidents(store.IncidentListParams{}))
	if len(all) != 2 || all[1] == nil || all[3] == nil || all[1].Count != 2 || all[3].Count != 1 {
		h.t.Errorf("incidents after concurrent records = %d, want 2 counting 2 and 1 events", len(all))
	}
}

func testIncidentDueMarkClose(h *harness) {
	h.recordHits(0, 10, base,
		hit("ops", "notice", store.ReasonPermanentError, 1, 0),
		hit("ops", "notice", store.ReasonPermanentError, 2, time.Minute),
		hit("ops", "crm", store.ReasonPermanentError, 3, 30*time.Minute),
	)
	all := byFirst(h.incidents(store.IncidentListParams{}))
	a, b := all[1], all[3]
	due := func(now time.Duration) []int64 {
		h.t.Helper()
		list, err := h.s.IncidentListDue(h.ctx, store.IncidentListDueParams{Now: at(now)})
		if err != nil {
			h.t.Fatalf("IncidentListDue: %v", err)
		}
		var ids []int64
		for _, inc := range list {
			ids = append(ids, inc.ID)
		}
		return ids
	}
	mark := func(f func(store.IncidentMarkParams) (bool, error), id int64, now time.Duration) bool {
		h.t.Helper()
		ok, err := f(store.IncidentMarkParams{ID: id, Actor: "notifier", Now: at(now)})
		if err != nil {
			h.t.Fatalf("mark incident %d: %v", id, err)
		}
		return ok
	}
	alert := func(p store.IncidentMarkParams) (bool, error) { return h.s.IncidentMarkAlerted(h.ctx, p) }
	closeInc := func(p store.IncidentMarkParams) (bool, error) { return h.s.IncidentClose(h.ctx, p) }

	if got := due(0); !slices.Equal(got, []int64{a.ID, b.ID}) {
		h.t.Fatalf("due at once = %v, want both new incidents %v", got, []int64{a.ID, b.ID})
	}
	for _, tc := range []struct {
		policies []string
		want     int
	}{{[]string{"ops"}, 2}, {[]string{"team", "ops"}, 2}, {[]string{"team"}, 0}} {
		list, err := h.s.IncidentListDue(h.ctx, store.IncidentListDueParams{Now: base, Policies: tc.policies})
		if err != nil || len(list) != tc.want {
			h.t.Errorf("IncidentListDue(policies %q) = %d incidents, %v; want %d", tc.policies, len(list), err, tc.want)
		}
	}
	if !mark(alert, a.ID, time.Second) {
		h.t.Error("IncidentMarkAlerted of a new incident = false")
	}
	if mark(alert, a.ID, 2*time.Second) {
		h.t.Error("IncidentMarkAlerted twice = true, want false the second time")
	}
	if got := due(time.Second); !slices.Equal(got, []int64{b.ID}) {
		h.t.Errorf("due after alerting %d = %v, want [%d]", a.ID, got, b.ID)
	}
	mark(alert, b.ID, 31*time.Minute)
	if got := due(59 * time.Minute); len(got) != 0 {
		h.t.Errorf("due within both windows = %v, want none", got)
	}
	if got := due(time.Hour); !slices.Equal(got, []int64{a.ID}) {
		h.t.Errorf("due when the first window ends = %v, want [%d]", got, a.ID)
	}
	if got := due(2 * time.Hour); !slices.Equal(got, []int64{a.ID, b.ID}) {
		h.t.Errorf("due after both windows = %v, want both", got)
	}
	if !mark(closeInc, a.ID, time.Hour) {
		h.t.Error("IncidentClose of an open incident = false")
	}
	if mark(closeInc, a.ID, 2*time.Hour) {
		h.t.Error("IncidentClose twice = true, want false the second time")
	}
	if got := due(2 * time.Hour); !slices.Equal(got, []int64{b.ID}) {
		h.t.Errorf("due after closing %d = %v, want [%d]", a.ID, got, b.ID)
	}
	closed := h.incidentByFirst(1)
	h.wantTime("AlertedAt", closed.AlertedAt, at(time.Second))
	h.wantTime("ClosedAt", closed.ClosedAt, at(time.Hour))
	evs := ofType(h.events(store.EventListParams{}), store.EventIncidentClosed)
	if len(evs) != 1 {
		h.t.Fatalf("%d incident.closed events, want 1", len(evs))
	}
	d := h.detailOf(evs[0])
	if fmt.Sprint(d["incident"]) != fmt.Sprint(a.ID) || fmt.Sprint(d["count"]) != "2" || fmt.Sprint(d["repeats"]) != "1" || evs[0].Actor != "notifier" {
		h.t.Errorf("incident.closed event %+v detail %v, want incident %d with count 2 and 1 repeat", evs[0], d, a.ID)
	}

	// A hit within the window of a closed incident opens a new one.
	opened := h.recordHits(10, 11, at(time.Hour), hit("ops", "notice", store.ReasonPermanentError, 11, 50*time.Minute))
	if len(opened) != 1 || opened[0].ID == a.ID {
		h.t.Errorf("a hit after its incident closed opened %d incidents, want a new one", len(opened))
	}

	for _, f := range []func(store.IncidentMarkParams) (bool, error){alert, closeInc} {
		if _, err := f(store.IncidentMarkParams{ID: 999999, Now: base}); !errors.Is(err, store.ErrNotFound) {
			h.t.Errorf("marking an unknown incident: %v, want ErrNotFound", err)
		}
	}
}

func testIncidentList(h *harness) {
	h.recordHits(0, 10, base,
		hit("ops", "notice", store.ReasonPermanentError, 1, 0),
		hit("team", "notice", store.ReasonPermanentError, 1, 0),
		hit("ops", "crm", store.ReasonPermanentError, 2, time.Minute),
	)
	h.recordHits(10, 11, base, store.IncidentHit{Policy: "ops", Workflow: "payments", StepName: "invoice", Reason: store.ReasonPermanentError, Window: time.Hour,
		Event: store.IncidentExample{EventID: 11, RunID: 11, At: base}})
	all := h.incidents(store.IncidentListParams{})
	if len(all) != 4 {
		h.t.Fatalf("%d incidents, want 4", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			h.t.Errorf("IncidentList is not newest first: %d after %d", all[i].ID, all[i-1].ID)
		}
	}
	if _, err := h.s.IncidentClose(h.ctx, store.IncidentMarkParams{ID: all[0].ID, Now: base}); err != nil {
		h.t.Fatal(err)
	}
	for _, tc := range []struct {
		p    store.IncidentListParams
		want int
	}{
		{store.IncidentListParams{Policy: "ops"}, 3},
		{store.IncidentListParams{Policy: "team"}, 1},
		{store.IncidentListParams{Workflow: "payments"}, 1},
		{store.IncidentListParams{Open: true}, 3},
		{store.IncidentListParams{Limit: 2}, 2},
		{store.IncidentListParams{BeforeID: all[1].ID}, 2},
	} {
		if got := len(h.incidents(tc.p)); got != tc.want {
			h.t.Errorf("IncidentList(%+v) = %d incidents, want %d", tc.p, got, tc.want)
		}
	}
}
