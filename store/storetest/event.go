package storetest

import (
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

var eventTests = []subtest{
	{"ListAndFields", testEventList},
	{"Append", testEventAppend},
	{"TimeRangeAnyOrder", testEventTimeRangeAnyOrder},
}

func testEventList(h *harness) {
	r1 := h.newRun(store.RunInsertParams{RunKey: "r1", Entity: "lead:1", Steps: []store.StepInsert{step("a"), step("b", "a")}})
	r2 := h.newRun(store.RunInsertParams{RunKey: "r2", Entity: "lead:2", Steps: []store.StepInsert{step("a")}})
	res := h.claim(store.StepClaimParams{})
	h.wantClaimed(res, 0, 0, 0, h.step(r1.ID, "a"), h.step(r2.ID, "a"))
	h.mustRecord(retry(res.Claimed[0], at(time.Second), at(time.Minute)), succeed(res.Claimed[1], at(time.Second), `{}`))
	h.mustRecord(succeed(h.claimOne(at(time.Minute), "w1"), at(61*time.Second), `{}`))
	h.mustRecord(succeed(h.claimOne(at(61*time.Second), "w1"), at(62*time.Second), `{}`))
	h.wantRunState(r1.ID, store.StateCompleted)
	h.wantRunState(r2.ID, store.StateCompleted)

	all := h.events(store.EventListParams{})
	runs := map[int64]*store.Run{r1.ID: r1, r2.ID: r2}
	for i, e := range all {
		if i > 0 && e.ID <= all[i-1].ID {
			h.t.Errorf("event IDs not increasing: %d after %d", e.ID, all[i-1].ID)
		}
		run, ok := runs[e.RunID]
		if !ok || e.Workflow != run.Workflow || e.Entity != run.Entity || e.At.IsZero() || e.Type == "" {
			h.t.Errorf("event %+v does not name its run, workflow, entity, time and type", e)
			continue
		}
		if strings.HasPrefix(string(e.Type), "run.") {
			continue
		}
		if e.StepID == 0 || e.StepName == "" || e.EffectKey != keyOf(run, e.StepName) || e.Attempt < 1 {
			h.t.Errorf("step event %s = step %d %q key %q attempt %d, want the step, its key %q and its attempt",
				e.Type, e.StepID, e.StepName, e.EffectKey, e.Attempt, keyOf(run, e.StepName))
		}
	}
	retried := h.only(all, store.EventStepRetryPlanned)
	h.wantTime("step.retry_scheduled At", retried.At, at(time.Second))

	ids := func(evs []*store.Event) string {
		var out []string
		for _, e := range evs {
			out = append(out, fmt.Sprint(e.ID))
		}
		return strings.Join(out, ",")
	}
	where := func(keep func(*store.Event) bool) []*store.Event {
		var out []*store.Event
		for _, e := range all {
			if keep(e) {
				out = append(out, e)
			}
		}
		return out
	}
	key := keyOf(r1, "a")
	cases := []struct {
		name string
		p    store.EventListParams
		want []*store.Event
	}{
		{"run", store.EventListParams{RunID: r2.ID}, where(func(e *store.Event) bool { return e.RunID == r2.ID })},
		{"entity", store.EventListParams{Entity: "lead:1"}, where(func(e *store.Event) bool { return e.RunID == r1.ID })},
		{"effect key", store.EventListParams{EffectKey: key}, where(func(e *store.Event) bool { return e.EffectKey == key })},
		{"after id", store.EventListParams{AfterID: all[2].ID}, all[3:]},
		{"limit", store.EventListParams{Limit: 2}, all[:2]},
		{"run after id", store.EventListParams{RunID: r1.ID, AfterID: all[2].ID},
			where(func(e *store.Event) bool { return e.RunID == r1.ID && e.ID > all[2].ID })},
		{"no match", store.EventListParams{Entity: "lead:404"}, nil},
	}
	for _, tc := range cases {
		if got := h.events(tc.p); ids(got) != ids(tc.want) {
			h.t.Errorf("EventList %s (%+v) = %q (%s), want %q (%s)", tc.name, tc.p, types(got), ids(got), types(tc.want), ids(tc.want))
		}
	}
	h.wantTypes("events of key "+key, h.events(store.EventListParams{EffectKey: key}),
		store.EventStepClaimed, store.EventStepRetryPlanned, store.EventStepClaimed, store.EventStepCompleted)

	// Paging with AfterID and Limit visits every event once, in order.
	var paged []*store.Event
	for after := int64(0); ; {
		page := h.events(store.EventListParams{AfterID: after, Limit: 3})
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].ID
	}
	if ids(paged) != ids(all) {
		h.t.Errorf("paged events %s, want %s", ids(paged), ids(all))
	}
}

// testEventTimeRangeAnyOrder: Since and Until select events by their own time exactly, whatever
// order the times of the transactions that appended them came in (a clock that went back,
// engines whose clocks differ): every event, of every kind, at or after Since and before
// Until, and no other, in ID order, paged with AfterID too.
func testEventTimeRangeAnyOrder(h *harness) {
	r1 := h.newRun(store.RunInsertParams{RunKey: "r1", Entity: "lead:1", Now: at(10 * time.Minute), Steps: []store.StepInsert{step("a"), step("b", "a")}})
	r2 := h.newRun(store.RunInsertParams{RunKey: "r2", Entity: "lead:2", Now: at(2 * time.Minute), Steps: []store.StepInsert{step("a")}})
	// Claimed at +5m: r2's step is due, r1's not yet; then at +11m (r1), and +3m (nothing).
	h.mustRecord(succeed(h.claimOne(at(5*time.Minute), "w1"), at(4*time.Minute), `{}`))
	c := h.claimOne(at(11*time.Minute), "w1")
	h.mustRecord(retry(c, at(time.Minute), at(6*time.Minute)))
	h.mustRecord(succeed(h.claimOne(at(12*time.Minute), "w2"), at(13*time.Minute), `{}`))
	h.mustRecord(succeed(h.claimOne(at(14*time.Minute), "w2"), at(7*time.Minute), `{}`))
	h.wantRunState(r1.ID, store.StateCompleted)
	h.wantRunState(r2.ID, store.StateCompleted)
	if ap, ok := h.s.(store.EventAppender); ok {
		for _, d := range []time.Duration{9 * time.Minute, 0, 20 * time.Minute} {
			if err := ap.EventAppend(h.ctx, &store.Event{At: at(d), Type: store.EventDataUnmasked, RunID: r1.ID, Workflow: r1.Workflow, Actor: "cli:ana"}); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	// One transaction with events at several times, the last one.
	var ps []store.RunInsertParams
	for i, d := range []time.Duration{8 * time.Minute, 30 * time.Second, 8 * time.Minute} {
		ps = append(ps, store.RunInsertParams{Workflow: "other", RunKey: fmt.Sprintf("r%d", 3+i%2), Entity: "lead:3", Input: []byte(`{}`),
			InputHash: "h", Steps: []store.StepInsert{step("a")}, Actor: "test", Now: at(d)})
	}
	if _, err := h.s.RunInsertMany(h.ctx, ps); err != nil {
		h.t.Fatal(err)
	}
	all := h.events(store.EventListParams{})
	if len(all) < 12 {
		h.t.Fatalf("%d events, want at least 12", len(all))
	}
	bounds := []time.Duration{-time.Minute, 0, 30 * time.Second, time.Minute, 2 * time.Minute, 4*time.Minute + time.Microsecond, 5 * time.Minute, 7 * time.Minute,
		9 * time.Minute, 10 * time.Minute, 11 * time.Minute, 13 * time.Minute, 20 * time.Minute, time.Hour}
	for _, since := range append([]time.Duration{-1}, bounds...) {
		for _, until := range append([]time.Duration{-1}, bounds...) {
			p := store.EventListParams{}
			if since >= 0 {
				p.Since = at(since)
			}
			if until >= 0 {
				p.Until = at(until)
			}
			var want []string
			for _, e := range all {
				if (p.Since.IsZero() || !e.At.Before(p.Since)) && (p.Until.IsZero() || e.At.Before(p.Until)) {
					want = append(want, fmt.Sprintf("%d %s %s", e.ID, e.Type, e.At.Sub(base)))
				}
			}
			var got []string
			for _, e := range h.events(p) {
				got = append(got, fmt.Sprintf("%d %s %s", e.ID, e.Type, e.At.Sub(base)))
			}
			var paged []string
			for after := int64(0); ; {
				q := p
				q.AfterID, q.Limit = after, 2
				page := h.events(q)
				if len(page) == 0 {
					break
				}
				for _, e := range page {
					paged = append(paged, fmt.Sprintf("%d %s %s", e.ID, e.Type, e.At.Sub(base)))
				}
				after = page[len(page)-1].ID
			}
			if strings.Join(got, "; ") != strings.Join(want, "; ") || strings.Join(paged, "; ") != strings.Join(want, "; ") {
				h.t.Errorf("EventList since %v until %v =\n  %s\npaged\n  %s\nwant\n  %s", since, until,
					strings.Join(got, "\n  "), strings.Join(paged, "\n  "), strings.Join(want, "\n  "))
			}
		}
	}
}
