package transitionstep

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Payment events drive an order through a guarded transition: the first payment marks it
// paid and lets fulfilment run; a second payment event, and an event for a cancelled
// order, change nothing and fulfil nothing.
func TestPaymentsTransitionOrders(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	paid, err := New(Spec{Entity: "order:{input.order_id}", From: []string{"pending"}, Initial: "pending", To: "paid"}, st)
	if err != nil {
		t.Fatal(err)
	}
	cancel, err := New(Spec{Entity: "order:{input.order_id}", From: []string{"pending"}, Initial: "pending", To: "cancelled"}, st)
	if err != nil {
		t.Fatal(err)
	}
	reviewed, err := New(Spec{Entity: "order:{input.order_id}", From: []string{"pending"}, Initial: "pending", To: "paid", Review: true}, st)
	if err != nil {
		t.Fatal(err)
	}
	fulfilled := map[string]int{}
	fulfil := func(_ context.Context, sc *onceflow.StepContext) (any, error) {
		var in struct {
			OrderID string `json:"order_id"`
		}
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		fulfilled[in.OrderID]++
		return nil, nil
	}
	for _, w := range []onceflow.Workflow{
		{Name: "payment", Steps: []onceflow.Step{
			{ID: "mark_paid", EffectKey: "order-paid:{input.payment_id}", Do: paid.Do},
			{ID: "fulfil", Needs: []string{"mark_paid"}, EffectKey: "fulfil:{input.payment_id}", Do: fulfil},
		}},
		{Name: "cancel", Steps: []onceflow.Step{{ID: "cancel", EffectKey: "order-cancel:{input.order_id}", Do: cancel.Do}}},
		{Name: "strict-payment", Steps: []onceflow.Step{{ID: "mark_paid", EffectKey: "order-paid-strict:{input.payment_id}", Do: reviewed.Do}}},
	} {
		if err := c.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	start := func(wf, key string, in map[string]any) int64 {
		r, err := c.Start(ctx, wf, key, in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Work(ctx); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	first := start("payment", "evt_1", map[string]any{"order_id": "1001", "payment_id": "pi_1"})
	second := start("payment", "evt_2", map[string]any{"order_id": "1001", "payment_id": "pi_2"})
	start("cancel", "cancel-1002", map[string]any{"order_id": "1002"})
	late := start("payment", "evt_3", map[string]any{"order_id": "1002", "payment_id": "pi_3"})
	strict := start("strict-payment", "evt_4", map[string]any{"order_id": "1002", "payment_id": "pi_4"})

	if fulfilled["1001"] != 1 || fulfilled["1002"] != 0 {
		t.Fatalf("fulfilments %v, want order 1001 once and 1002 never", fulfilled)
	}
	check := func(run int64, step string, state store.State, reason store.Reason) {
		t.Helper()
		steps, err := st.StepListByRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if s.Name == step && (s.State != state || s.Reason != reason) {
				t.Fatalf("run %d %s: %s %q, want %s %q (%s)", run, step, s.State, s.Reason, state, reason, s.LastError)
			}
		}
	}
	check(first, "mark_paid", store.StateCompleted, "")
	check(second, "mark_paid", store.StateSkipped, ReasonInvalid)
	check(second, "fulfil", store.StateSkipped, store.ReasonDependencySkipped)
	check(late, "mark_paid", store.StateSkipped, ReasonInvalid)
	check(strict, "mark_paid", store.StateNeedsReview, ReasonInvalid)
	for key, want := range map[string]string{"order:1001": "paid", "order:1002": "cancelled"} {
		e, err := st.EntityGetByKey(ctx, key)
		if err != nil || e.State != want {
			t.Fatalf("%s: %+v %v, want %s", key, e, err, want)
		}
	}
}

// A transition's entity key follows the key rules before the store sees it: a key with a
// NUL, an escape or a bidi override, or one longer than 255 bytes, parks the step as a
// permanent error (retrying bad data would not help) and changes no entity.
func TestTransitionEntityFollowsTheKeyRules(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	paid, err := New(Spec{Entity: "order:{input.order_id}", From: []string{"pending"}, Initial: "pending", To: "paid"}, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "payment", Steps: []onceflow.Step{{ID: "mark_paid", EffectKey: "order-paid:{run.key}", Do: paid.Do}}}); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a\x00b", "a\x1b[2Jb", "a\u202eb", strings.Repeat("9", 300)} {
		run, err := c.Start(ctx, "payment", fmt.Sprint("p-", i), map[string]any{"order_id": id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Work(ctx); err != nil {
			t.Fatal(err)
		}
		steps, err := st.StepListByRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s := steps[0]; s.State != store.StateNeedsReview || s.Reason != store.ReasonPermanentError || !strings.Contains(s.LastError, "entity") {
			t.Errorf("order_id %.20q: step %s (%s) %q, want needs_review with a permanent error about the entity", id, s.State, s.Reason, s.LastError)
		}
		if _, err := st.EntityGetByKey(ctx, "order:"+id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("order_id %.20q: the entity was written (%v)", id, err)
		}
	}
}
