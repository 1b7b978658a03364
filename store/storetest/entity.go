package storetest

import (
	"errors"
	"time"

	"github.com/onceflow/onceflow/store"
)

var entityTests = []subtest{
	{"GuardedTransitions", testEntityTransitions},
}

// Transitions change an entity only from an allowed state, once per effect key, each with
// its event.
func testEntityTransitions(h *harness) {
	es := h.s
	ctx := h.t.Context()
	if _, err := es.EntityGetByKey(ctx, "order:1"); !errors.Is(err, store.ErrNotFound) {
		h.t.Fatalf("unknown entity: %v, want ErrNotFound", err)
	}
	pay := store.EntityTransitionParams{Key: "order:1", From: []string{"pending"}, Initial: "pending", To: "paid",
		EffectKey: "order-paid:pi_1", RunID: 1, StepID: 1, StepName: "mark_paid", Workflow: "payment", Actor: "w1", Now: base}
	res, err := es.EntityTransition(ctx, pay)
	if err != nil || !res.Applied || res.Replayed || res.From != "pending" || res.State != "paid" {
		h.t.Fatalf("first transition: %+v %v", res, err)
	}
	// The same effect key again (a retry after a crash): reported, not applied again.
	again := pay
	again.Now = at(time.Second)
	res, err = es.EntityTransition(ctx, again)
	if err != nil || !res.Applied || !res.Replayed || res.State != "paid" {
		h.t.Fatalf("replayed transition: %+v %v", res, err)
	}
	// Another event for the same order: refused, the state stays.
	other := pay
	other.EffectKey, other.RunID, other.Now = "order-paid:pi_2", 2, at(2*time.Second)
	res, err = es.EntityTransition(ctx, other)
	if err != nil || res.Applied || res.State != "paid" {
		h.t.Fatalf("second payment: %+v %v", res, err)
	}
	ship := store.EntityTransitionParams{Key: "order:1", From: []string{"paid"}, To: "fulfilled", EffectKey: "order-ship:1", RunID: 3, Now: at(3 * time.Second)}
	if res, err = es.EntityTransition(ctx, ship); err != nil || !res.Applied || res.From != "paid" {
		h.t.Fatalf("fulfil: %+v %v", res, err)
	}
	e, err := es.EntityGetByKey(ctx, "order:1")
	if err != nil || e.State != "fulfilled" || e.Version != 2 || e.EffectKey != "order-ship:1" || e.RunID != 3 {
		h.t.Fatalf("entity %+v %v", e, err)
	}
	evs := h.events(store.EventListParams{Entity: "order:1"})
	h.wantTypes("entity events", evs, store.EventEntityTransitioned, store.EventEntityRefused, store.EventEntityTransitioned)
	wantEqual(h.t, "refusal reason", evs[1].Reason, store.ReasonTransitionInvalid)
}
