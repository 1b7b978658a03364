package demo

import (
	"strings"
	"testing"

	"github.com/onceflow/onceflow/store"
)

// healthy returns a scenario in which every invariant holds: one lead run whose CRM step
// completed, one payment for a paid order, one for a cancelled order that changed nothing.
func healthy() *scenario {
	runs := newRunIDs()
	runs.add("web-1", 1)
	runs.add("evt_1", 2)
	runs.add("evt_2", 3)
	return &scenario{
		sum: &Summary{
			Forms:    FormStats{Forms: 1},
			Payments: PaymentStats{Events: 2},
			Destinations: []DestinationStats{
				{Name: "crm", Deduplicates: true}, {Name: "stock", Deduplicates: true}, {Name: "smtp"},
			},
			RunsByWorkflow: map[string]map[string]int{leadWorkflow: {"completed": 1}, paymentWorkflow: {"completed": 2}},
		},
		kinds: map[string]map[string]string{
			leadWorkflow:    {"crm_lead": "http"},
			paymentWorkflow: {"mark_paid": "transition", "reserve_stock": "http"},
		},
		orders: []order{{ID: "5001", PaymentID: "pi_1"}, {ID: "5002", PaymentID: "pi_2", Cancelled: true}},
		runs:   runs,
		all: []*store.Run{
			{ID: 1, Workflow: leadWorkflow, State: store.StateCompleted},
			{ID: 2, Workflow: paymentWorkflow, State: store.StateCompleted},
			{ID: 3, Workflow: paymentWorkflow, State: store.StateCompleted},
		},
		steps: map[int64][]*store.Step{
			1: {{Name: "crm_lead", State: store.StateCompleted, EffectKey: "lead-create:web-1"}},
			2: {{Name: "mark_paid", State: store.StateCompleted, EffectKey: "order-paid:pi_1"},
				{Name: "reserve_stock", State: store.StateCompleted, EffectKey: "stock-reserve:pi_1"}},
			3: {{Name: "mark_paid", State: store.StateSkipped}, {Name: "reserve_stock", State: store.StateSkipped}},
		},
		paid: map[string]int{"order:5001": 1},
		applied: map[string]applied{
			"crm":   {keys: map[string]string{"lead-create:web-1": "lead web-1"}, actions: map[string]int{"lead web-1": 1}},
			"stock": {keys: map[string]string{"stock-reserve:pi_1": "reservation for order 5001"}, actions: map[string]int{"reservation for order 5001": 1}},
			"smtp":  {keys: map[string]string{}, actions: map[string]int{}},
		},
		settled: true,
	}
}

// failed runs check and returns the names and details of the invariants that failed.
func failed(sc *scenario) string {
	sc.check()
	if sc.sum.InvariantsOK != (len(sc.sum.Failures()) == 0) {
		panic("InvariantsOK disagrees with Failures")
	}
	return strings.Join(sc.sum.Failures(), "\n")
}

// Each broken invariant is caught, and named; the healthy scenario passes.
func TestCheckCatchesEveryBrokenInvariant(t *testing.T) {
	t.Parallel()
	if f := failed(healthy()); f != "" {
		t.Fatalf("healthy scenario fails:\n%s", f)
	}
	tests := []struct {
		name  string
		spoil func(sc *scenario)
		want  string
	}{
		{"duplicate e-mail", func(sc *scenario) { sc.sum.Destinations[2].DuplicateEffects = 1 }, "smtp carried out 1 business action(s) twice"},
		{"completed but not applied", func(sc *scenario) {
			sc.applied["crm"] = applied{keys: map[string]string{}, actions: map[string]int{}}
		}, "is completed but no service carried it out"},
		{"applied twice under the step's key", func(sc *scenario) { sc.applied["crm"].actions["lead web-1"] = 2 }, `crm carried out "lead web-1" 2 times`},
		{"applied but unrecorded", func(sc *scenario) {
			sc.applied["crm"].keys["lead-create:web-2"] = "lead web-2"
			sc.applied["crm"].actions["lead web-2"] = 1
		}, "but no step records it"},
		{"run still processing", func(sc *scenario) { sc.all[0].State = store.StateProcessing }, "run 1 () is processing"},
		{"deadline", func(sc *scenario) { sc.settled = false }, "the deadline passed"},
		{"one key, two runs", func(sc *scenario) { sc.runs.add("web-1", 9) }, "run key web-1 was answered with 2 different runs"},
		{"a run too many", func(sc *scenario) { sc.sum.RunsByWorkflow[leadWorkflow]["completed"] = 2 }, "2 website-lead runs stored for 1 distinct keys"},
		{"paid twice", func(sc *scenario) { sc.paid["order:5001"] = 2 }, "order:5001 was marked paid 2 times"},
		{"never paid", func(sc *scenario) { delete(sc.paid, "order:5001") }, "order:5001 was never marked paid"},
		{"cancelled order paid", func(sc *scenario) { sc.paid["order:5002"] = 1 }, "cancelled order:5002 was marked paid"},
		{"cancelled order reserved", func(sc *scenario) { sc.applied["stock"].actions["reservation for order 5002"] = 1 }, "cancelled order:5002 had stock reserved"},
		{"cancelled order receipted", func(sc *scenario) { sc.applied["smtp"].keys["payment-receipt:pi_2"] = "e-mail" }, "cancelled order:5002 got a payment receipt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := healthy()
			tt.spoil(sc)
			if f := failed(sc); !strings.Contains(f, tt.want) {
				t.Fatalf("failures:\n%s\nwant one containing %q", f, tt.want)
			}
		})
	}
}

// A step parked for review after an unknown outcome records its effect: a person decides
// whether it happened, so the delivery it may have made is not "unrecorded".
func TestCheckAcceptsUnknownOutcomeInReview(t *testing.T) {
	t.Parallel()
	sc := healthy()
	sc.kinds[leadWorkflow]["welcome_email"] = "email"
	sc.steps[1] = append(sc.steps[1], &store.Step{Name: "welcome_email", State: store.StateNeedsReview,
		LastOutcome: store.OutcomeUnknown, EffectKey: "welcome-email:web-1"})
	sc.applied["smtp"].keys["welcome-email:web-1"] = "e-mail to a@example.com: Welcome"
	sc.applied["smtp"].actions["e-mail to a@example.com: Welcome"] = 1
	if f := failed(sc); f != "" {
		t.Fatalf("failures:\n%s", f)
	}
}
