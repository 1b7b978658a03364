package storetest

import (
	"encoding/json"
	"time"

	"github.com/onceflow/onceflow/store"
)

// testEventAppend: a backend that implements store.EventAppender appends one event on its
// own, found by EventList with its fields intact.
func testEventAppend(h *harness) {
	ap, ok := h.s.(store.EventAppender)
	if !ok {
		h.t.Skip("the store does not append events on their own")
	}
	r := h.newRun(store.RunInsertParams{RunKey: "r1", Entity: "lead:1", Steps: []store.StepInsert{step("a")}})
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	e := &store.Event{At: at, Type: store.EventDataUnmasked, RunID: r.ID, Workflow: r.Workflow, Actor: "cli:ana", Reason: store.ReasonUnmasked,
		Detail: json.RawMessage(`{"read":"run 1"}`)}
	if err := ap.EventAppend(h.ctx, e); err != nil {
		h.t.Fatal(err)
	}
	evs, err := h.s.EventList(h.ctx, store.EventListParams{RunID: r.ID})
	if err != nil {
		h.t.Fatal(err)
	}
	var got *store.Event
	for _, ev := range evs {
		if ev.Type == store.EventDataUnmasked {
			got = ev
		}
	}
	if got == nil || got.Actor != "cli:ana" || got.Reason != store.ReasonUnmasked || !got.At.Equal(at) || got.Workflow != r.Workflow {
		h.t.Fatalf("appended event %+v, events %d", got, len(evs))
	}
	var d map[string]any
	if err := json.Unmarshal(got.Detail, &d); err != nil || d["read"] != "run 1" {
		h.t.Fatalf("detail %s", got.Detail)
	}
}
