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
		if strings.HasPrefix(e.Type, "run.") {
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
