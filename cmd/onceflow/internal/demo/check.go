package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/onceflow/onceflow/steps/transitionstep"
	"github.com/onceflow/onceflow/store"
)

// scenario is what collect and check need: the outcome of a played scenario.
type scenario struct {
	sum   *Summary
	store interface {
		store.Store
		store.EntityStore
	}
	ds      *destinations
	kinds   map[string]map[string]string // workflow → step → kind
	orders  []order
	runs    *runIDs
	settled bool

	all     []*store.Run
	steps   map[int64][]*store.Step
	paid    map[string]int // entity → transitions to paid
	applied map[string]applied
}

// collect reads the final state of runs, steps, events, orders and destinations.
func (sc *scenario) collect(ctx context.Context) error {
	sum := sc.sum
	sc.applied = map[string]applied{}
	for _, d := range sc.ds.all() {
		s := d.Stats()
		sum.Destinations = append(sum.Destinations, s)
		sc.applied[s.Name] = d.applied()
	}

	for _, wf := range []string{leadWorkflow, paymentWorkflow} {
		for before := int64(0); ; {
			page, err := sc.store.RunList(ctx, store.RunListParams{Workflow: wf, BeforeID: before, Limit: 500})
			if err != nil {
				return err
			}
			sc.all = append(sc.all, page...)
			if len(page) < 500 {
				break
			}
			before = page[len(page)-1].ID
		}
	}
	sort.Slice(sc.all, func(i, j int) bool { return sc.all[i].ID < sc.all[j].ID })
	sum.Runs = len(sc.all)
	sum.RunsByState, sum.RunsByWorkflow, sum.ReviewReasons = map[string]int{}, map[string]map[string]int{}, map[string]int{}
	sc.steps = map[int64][]*store.Step{}
	for _, r := range sc.all {
		sum.RunsByState[string(r.State)]++
		if sum.RunsByWorkflow[r.Workflow] == nil {
			sum.RunsByWorkflow[r.Workflow] = map[string]int{}
		}
		sum.RunsByWorkflow[r.Workflow][string(r.State)]++
		steps, err := sc.store.StepListByRun(ctx, r.ID)
		if err != nil {
			return err
		}
		sc.steps[r.ID] = steps
		for _, s := range steps {
			switch {
			case s.State == store.StateNeedsReview:
				resp, err := lastResponse(ctx, sc.store, s)
				if err != nil {
					return err
				}
				sum.ReviewReasons[string(s.Reason)]++
				sum.ReviewItems = append(sum.ReviewItems, ReviewItem{RunID: r.ID, Workflow: r.Workflow, Entity: r.Entity,
					Step: s.Name, EffectKey: s.EffectKey, Reason: string(s.Reason), LastOutcome: string(s.LastOutcome), Error: s.LastError,
					Response: resp})
			case s.State == store.StateSkipped && s.Reason == transitionstep.ReasonInvalid:
				sum.RefusedTransitions = append(sum.RefusedTransitions, RefusedTransition{RunID: r.ID, RunKey: r.RunKey, Entity: r.Entity, Step: s.Name})
			}
		}
	}

	sc.paid = map[string]int{}
	reusedBy := map[int64]int{}
	sum.Ledger.ReusedByStep = map[string]int{}
	const page = 1000
	for after := int64(0); ; {
		evs, err := sc.store.EventList(ctx, store.EventListParams{AfterID: after, Limit: page})
		if err != nil {
			return err
		}
		for _, e := range evs {
			switch e.Type {
			case store.EventStepClaimed:
				sum.Engine.Attempts++
			case store.EventStepRetryPlanned:
				if e.Reason == store.ReasonOutcomeUnknown || e.Reason == store.ReasonLeaseExpired {
					sum.Engine.UnknownOutcomesRetried++
				} else {
					sum.Engine.RetriesScheduled++
				}
			case store.EventStepSkipped:
				if e.Reason == store.ReasonConditionFalse {
					sum.Engine.ConditionFalse++
				}
			case store.EventEffectReused:
				sum.Ledger.Reused++
				sum.Ledger.ReusedByStep[e.Workflow+"/"+e.StepName]++
				reusedBy[e.RunID]++
			case store.EventEffectWaiting:
				sum.Ledger.Waits++
			case store.EventEffectConflict:
				sum.Ledger.KeyConflicts++
			case store.EventEntityTransitioned:
				var d struct {
					To string `json:"to"`
				}
				if json.Unmarshal(e.Detail, &d) == nil && d.To == "paid" {
					sc.paid[e.Entity]++
				}
			}
		}
		if len(evs) < page {
			break
		}
		after = evs[len(evs)-1].ID
	}

	sum.OrdersByState = map[string]int{}
	for _, o := range sc.orders {
		e, err := sc.store.EntityGetByKey(ctx, o.entity())
		switch {
		case errors.Is(err, store.ErrNotFound):
			sum.OrdersByState["pending"]++
		case err != nil:
			return err
		default:
			sum.OrdersByState[e.State]++
		}
	}
	sc.hints(reusedBy)
	return nil
}

// lastResponse returns the destination's answer to the step's latest attempt, if any.
func lastResponse(ctx context.Context, st store.Store, s *store.Step) (string, error) {
	attempts, err := st.AttemptListByRun(ctx, s.RunID)
	if err != nil {
		return "", err
	}
	var last *store.Attempt
	for _, a := range attempts {
		if a.StepID == s.ID && (last == nil || a.Number > last.Number) {
			last = a
		}
	}
	if last == nil || last.ResponseStatus == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d %s", last.ResponseStatus, last.ResponseExcerpt), nil
}

// hints fills in where to look next.
func (sc *scenario) hints(reusedBy map[int64]int) {
	sum := sc.sum
	db := " --db " + sum.DBURL
	add := func(cmd, why string) { sum.Next = append(sum.Next, Hint{Command: cmd, Why: why}) }
	add("onceflow runs list"+db, "every run, newest first")
	if len(sum.ReviewItems) > 0 {
		add("onceflow runs list --state needs_review"+db, "the runs waiting for a person")
		it := sum.ReviewItems[0]
		add(fmt.Sprintf("onceflow runs show %d%s", it.RunID, db), fmt.Sprintf("%s: %s waits for review (%s)", it.Entity, it.Step, it.Reason))
		sum.ShowRun = it.RunID
	}
	var busiest int64
	most := 0
	for _, r := range sc.all {
		if r.State != store.StateCompleted {
			continue
		}
		n := 0
		for _, s := range sc.steps[r.ID] {
			n += s.Attempt
		}
		if n > most {
			busiest, most = r.ID, n
		}
	}
	if busiest > 0 {
		add(fmt.Sprintf("onceflow runs show %d%s", busiest, db), fmt.Sprintf("the completed run retried most: %d attempts", most))
		if sum.ShowRun == 0 {
			sum.ShowRun = busiest
		}
	}
	var reused int64
	for _, r := range sc.all {
		if reusedBy[r.ID] > reusedBy[reused] {
			reused = r.ID
		}
	}
	if reused > 0 {
		add(fmt.Sprintf("onceflow runs show %d%s", reused, db), fmt.Sprintf("%d steps completed from the effect ledger, calling no one", reusedBy[reused]))
	}
	if len(sum.RefusedTransitions) > 0 {
		t := sum.RefusedTransitions[0]
		add(fmt.Sprintf("onceflow runs list --entity %s%s", t.Entity, db), "a cancelled order: the payment event changed nothing")
	}
}

// check evaluates the invariants into sc.sum.
func (sc *scenario) check() {
	sum := sc.sum
	add := func(name string, problems []string) {
		inv := Invariant{Name: name, OK: len(problems) == 0}
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
		}
		inv.Detail = strings.Join(problems, "; ")
		sum.Invariants = append(sum.Invariants, inv)
	}

	var dup []string
	for _, d := range sum.Destinations {
		if d.DuplicateEffects > 0 {
			dup = append(dup, fmt.Sprintf("%s carried out %d business action(s) twice", d.Name, d.DuplicateEffects))
		}
	}
	add("no business action carried out twice, at any service or by e-mail", dup)

	// Which destination carried out each effect key, and how often its action happened.
	type done struct {
		dest, action string
		times        int
	}
	byKey := map[string]done{}
	for name, a := range sc.applied {
		for key, action := range a.keys {
			byKey[key] = done{name, action, a.actions[action]}
		}
	}
	var lost []string
	recorded := map[string]bool{}
	for _, r := range sc.all {
		for _, s := range sc.steps[r.ID] {
			kind := sc.kinds[r.Workflow][s.Name]
			if kind != "http" && kind != "email" {
				continue
			}
			switch {
			case s.State == store.StateCompleted:
				recorded[s.EffectKey] = true
				d, ok := byKey[s.EffectKey]
				switch {
				case !ok:
					lost = append(lost, fmt.Sprintf("run %d step %s (%s) is completed but no service carried it out", r.ID, s.Name, s.EffectKey))
				case d.times != 1:
					lost = append(lost, fmt.Sprintf("run %d step %s: %s carried out %q %d times", r.ID, s.Name, d.dest, d.action, d.times))
				}
			case s.State == store.StateNeedsReview && s.LastOutcome == store.OutcomeUnknown:
				recorded[s.EffectKey] = true // a person decides whether it happened
			}
		}
	}
	for _, key := range sortedKeys(byKey) {
		if !recorded[key] {
			d := byKey[key]
			lost = append(lost, fmt.Sprintf("%s carried out %q (key %s) but no step records it", d.dest, d.action, key))
		}
	}
	add("every effect completed in the ledger was carried out at its service once, and nothing else was", lost)

	var open []string
	if !sc.settled {
		open = append(open, "the deadline passed before every run was completed or waiting for review")
	}
	for _, r := range sc.all {
		if r.State != store.StateCompleted && r.State != store.StateNeedsReview {
			open = append(open, fmt.Sprintf("run %d (%s) is %s", r.ID, r.Entity, r.State))
		}
	}
	add("every run completed or waiting for review", open)

	starts := sc.runs.problems()
	want := map[string]int{leadWorkflow: sum.Forms.Forms, paymentWorkflow: sum.Payments.Events}
	for _, wf := range sortedKeys(want) {
		n := 0
		for _, c := range sum.RunsByWorkflow[wf] {
			n += c
		}
		if n != want[wf] {
			starts = append(starts, fmt.Sprintf("%d %s runs stored for %d distinct keys", n, wf, want[wf]))
		}
	}
	add("every form and every payment event started exactly one run", starts)

	var ordersBad []string
	stock, invoices := sc.applied["stock"].actions, sc.applied["invoicing"].actions
	mail := sc.applied["smtp"].keys
	for _, o := range sc.orders {
		e := o.entity()
		switch {
		case sc.paid[e] > 1:
			ordersBad = append(ordersBad, fmt.Sprintf("%s was marked paid %d times", e, sc.paid[e]))
		case o.Cancelled && sc.paid[e] > 0:
			ordersBad = append(ordersBad, fmt.Sprintf("cancelled %s was marked paid", e))
		case !o.Cancelled && sc.paid[e] != 1 && sc.settled:
			ordersBad = append(ordersBad, fmt.Sprintf("%s was never marked paid", e))
		}
		if !o.Cancelled {
			continue
		}
		if stock["reservation for order "+o.ID] > 0 {
			ordersBad = append(ordersBad, fmt.Sprintf("cancelled %s had stock reserved", e))
		}
		if invoices["invoice for order "+o.ID] > 0 {
			ordersBad = append(ordersBad, fmt.Sprintf("cancelled %s was invoiced", e))
		}
		if _, ok := mail["payment-receipt:"+o.PaymentID]; ok {
			ordersBad = append(ordersBad, fmt.Sprintf("cancelled %s got a payment receipt", e))
		}
	}
	add("no order paid twice; cancelled orders neither paid, reserved, invoiced nor receipted", ordersBad)

	sum.InvariantsOK = true
	for _, inv := range sum.Invariants {
		sum.InvariantsOK = sum.InvariantsOK && inv.OK
	}
}
