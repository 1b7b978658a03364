package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onceflow/onceflow/store"
)

// Summary is the outcome of a demo run.
type Summary struct {
	// DBURL names the database the demo used, for --db.
	DBURL string `json:"db_url"`
	// API is the base URL onceflow served while the demo ran, and AdminToken a token it
	// accepted; both are gone when Run returns.
	API        string `json:"api"`
	AdminToken string `json:"admin_token"`
	// Serving is set while onceflow keeps serving after the scenario (Config.Serve):
	// then API, Console and AdminToken are the running server's, until ctx ends.
	Serving bool   `json:"serving,omitempty"`
	Console string `json:"console,omitempty"`
	Seed    uint64 `json:"seed"`
	// Speedup is how many times shorter than the files the retry delays and http timeouts
	// were.
	Speedup int `json:"speedup"`
	// Workflows are the example files served.
	Workflows    []string           `json:"workflows"`
	Forms        FormStats          `json:"forms"`
	Payments     PaymentStats       `json:"payments"`
	Destinations []DestinationStats `json:"destinations"`
	Runs         int                `json:"runs"`
	// RunsByWorkflow counts runs by workflow and state; RunsByState by state.
	RunsByWorkflow map[string]map[string]int `json:"runs_by_workflow"`
	RunsByState    map[string]int            `json:"runs_by_state"`
	// ReviewReasons counts the steps waiting for review by reason code.
	ReviewReasons map[string]int `json:"review_reasons"`
	ReviewItems   []ReviewItem   `json:"review_items"`
	// RefusedTransitions are the guarded transitions that changed nothing (a payment for
	// a cancelled order): the step and those after it ended skipped.
	RefusedTransitions []RefusedTransition `json:"refused_transitions"`
	Ledger             LedgerStats         `json:"ledger"`
	Engine             EngineStats         `json:"engine"`
	// OrdersByState counts the shop's orders by their state at the end.
	OrdersByState map[string]int `json:"orders_by_state"`
	// Invoices is what the monthly-invoices schedule did (nil if it did not get to run).
	Invoices     *InvoiceStats `json:"invoices"`
	Invariants   []Invariant   `json:"invariants"`
	InvariantsOK bool          `json:"invariants_ok"`
	// Next lists commands to look at what happened; ShowRun is a run worth looking at.
	Next        []Hint        `json:"next"`
	ShowRun     int64         `json:"-"`
	Elapsed     time.Duration `json:"-"`
	ElapsedSecs float64       `json:"elapsed_seconds"`
}

// ReviewItem is a step parked in needs_review.
type ReviewItem struct {
	RunID       int64  `json:"run_id"`
	Workflow    string `json:"workflow"`
	Entity      string `json:"entity"`
	Step        string `json:"step"`
	EffectKey   string `json:"effect_key"`
	Reason      string `json:"reason"`
	LastOutcome string `json:"last_outcome"`
	Error       string `json:"error"`
	// Response is the destination's answer to the latest attempt, if it answered.
	Response string `json:"response,omitempty"`
}

// RefusedTransition is a transition step that found its entity in a state it may not
// leave that way.
type RefusedTransition struct {
	RunID  int64  `json:"run_id"`
	RunKey string `json:"run_key"`
	Entity string `json:"entity"`
	Step   string `json:"step"`
}

// LedgerStats says what the effect ledger deduplicated.
type LedgerStats struct {
	// Reused counts steps completed from the ledger without acting: their effect key had
	// been completed by another run. ReusedByStep counts them by workflow/step.
	Reused       int            `json:"steps_completed_from_ledger"`
	ReusedByStep map[string]int `json:"by_step"`
	// Waits counts times a step waited because another run held its key in flight.
	Waits int `json:"waits_for_key_in_flight"`
	// KeyConflicts counts keys completed with a different request.
	KeyConflicts int `json:"key_conflicts"`
}

// EngineStats counts what the engine did, from the audit trail.
type EngineStats struct {
	// Attempts counts step executions.
	Attempts int `json:"attempts"`
	// RetriesScheduled counts retries after an error that left the effect undone (503,
	// 429, 451).
	RetriesScheduled int `json:"retries_scheduled"`
	// UnknownOutcomesRetried counts retries, with the same key, after an attempt whose
	// effect may have happened (a late answer, a dropped connection).
	UnknownOutcomesRetried int `json:"unknown_outcomes_retried"`
	// ConditionFalse counts steps skipped by their when: condition.
	ConditionFalse int `json:"skipped_by_condition"`
}

// Invariant is one property the demo checks.
type Invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Hint is a command to look further, and why.
type Hint struct {
	Command string `json:"command"`
	Why     string `json:"why"`
}

// MarshalJSON keeps empty collections as [] and {} rather than null.
func (s *Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	c := plain(*s)
	if c.ReviewItems == nil {
		c.ReviewItems = []ReviewItem{}
	}
	if c.RefusedTransitions == nil {
		c.RefusedTransitions = []RefusedTransition{}
	}
	for _, m := range []*map[string]int{&c.ReviewReasons, &c.RunsByState, &c.OrdersByState, &c.Ledger.ReusedByStep} {
		if *m == nil {
			*m = map[string]int{}
		}
	}
	if c.RunsByWorkflow == nil {
		c.RunsByWorkflow = map[string]map[string]int{}
	}
	c.ElapsedSecs = s.Elapsed.Seconds()
	return json.Marshal(c)
}

// DuplicateEffects is the total over all destinations.
func (s *Summary) DuplicateEffects() int {
	n := 0
	for _, d := range s.Destinations {
		n += d.DuplicateEffects
	}
	return n
}

// RepeatedKeys is the total over all destinations: requests that carried a key seen before.
func (s *Summary) RepeatedKeys() int {
	n := 0
	for _, d := range s.Destinations {
		n += d.RepeatedKeys
	}
	return n
}

// Failures lists the invariants that do not hold.
func (s *Summary) Failures() []string {
	var out []string
	for _, inv := range s.Invariants {
		if !inv.OK {
			out = append(out, inv.Name+": "+inv.Detail)
		}
	}
	return out
}

// WriteText prints the summary for a person.
func (s *Summary) WriteText(w io.Writer) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tREQUESTS\tEFFECTS APPLIED\tDUPLICATE EFFECTS\tFAULTS INJECTED\tREJECTED\tREPEATED KEYS\tKEY REPLAYS\tVERIFY PROBES")
	for _, d := range s.Destinations {
		name := d.Name
		if !d.Deduplicates {
			name += " (no dedup)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name, d.Requests, d.EffectsApplied, d.DuplicateEffects, d.FaultsInjected,
			d.Rejected, d.RepeatedKeys, d.KeyReplays, d.VerifyProbes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	faults := map[string]int{}
	for _, d := range s.Destinations {
		for k, v := range d.Faults {
			faults[k] += v
		}
	}
	var parts []string
	for _, f := range []fault{faultUnavailable, faultRateLimited, faultTempFailure, faultSlowAfterApply, faultDropAfterApply} {
		if n := faults[f.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", f, n))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "Faults injected: %s.\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "Each service counts duplicate effects itself, by the business identity of what it was asked (a lead's\n"+
		"external id, an order's invoice, an e-mail's recipient and subject), whatever key came with it.\n"+
		"Repeated keys are retries that reached the service with a key (for e-mail, a Message-ID) it had seen;\n"+
		"key replays, those answered from the stored result; verify probes, the CRM asked whether a lead exists.\n")

	e := s.Engine
	fmt.Fprintf(w, "\nWhat happened\n")
	fmt.Fprintf(w, "  website: %d forms, each posted twice: %d runs created, %d double clicks answered with the run\n"+
		"    already created, %d answered 409 while the twin post was being stored (retried after Retry-After),\n"+
		"    %d repeat of a key with an edited body refused 422.\n",
		s.Forms.Forms, s.Forms.Created, s.Forms.Replayed, s.Forms.InProgress, s.Forms.KeyReused)
	fmt.Fprintf(w, "  payments: %d signed deliveries of %d events (%d of them a second event about a payment already\n"+
		"    handled): %d runs started, %d repeated deliveries recognised by event id.\n",
		s.Payments.Deliveries, s.Payments.Events, s.Payments.SecondEvents, s.Payments.Started, s.Payments.Repeated)
	fmt.Fprintf(w, "  engine: %d attempts; %d retries after 503/429/451, %d retries with the same key after an unknown\n"+
		"    outcome (late answer or dropped connection after the work was done), %d steps skipped by their condition.\n",
		e.Attempts, e.RetriesScheduled, e.UnknownOutcomesRetried, e.ConditionFalse)

	fmt.Fprintf(w, "\nRuns\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var states []store.State
	for _, st := range store.States {
		if s.RunsByState[string(st)] > 0 {
			states = append(states, st)
		}
	}
	head := "  WORKFLOW"
	for _, st := range states {
		head += "\t" + strings.ToUpper(string(st))
	}
	fmt.Fprintln(tw, head+"\tTOTAL")
	for _, wf := range sortedKeys(s.RunsByWorkflow) {
		line, total := "  "+wf, 0
		for _, st := range states {
			n := s.RunsByWorkflow[wf][string(st)]
			line += fmt.Sprintf("\t%d", n)
			total += n
		}
		fmt.Fprintf(tw, "%s\t%d\n", line, total)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(s.ReviewItems) > 0 {
		fmt.Fprintf(w, "\nReview items: %d steps wait for a person, each with its reason; nothing was lost or done twice\n", len(s.ReviewItems))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  RUN\tENTITY\tSTEP\tREASON\tDETAIL")
		for _, it := range s.ReviewItems {
			detail := it.Error
			if it.Response != "" {
				detail = "answered " + it.Response
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", it.RunID, it.Entity, it.Step, it.Reason, oneLine(detail, 110))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nEffect ledger: %d steps completed from the ledger without calling anyone, their key already completed\n", s.Ledger.Reused)
	if len(s.Ledger.ReusedByStep) > 0 {
		var parts []string
		for _, k := range sortedKeys(s.Ledger.ReusedByStep) {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.Ledger.ReusedByStep[k]))
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "  %d times a step waited for another run holding the same key; %d key conflicts.\n", s.Ledger.Waits, s.Ledger.KeyConflicts)

	var orders []string
	for _, st := range sortedKeys(s.OrdersByState) {
		orders = append(orders, fmt.Sprintf("%d %s", s.OrdersByState[st], st))
	}
	fmt.Fprintf(w, "\nOrders: %s\n", strings.Join(orders, ", "))
	if len(s.RefusedTransitions) > 0 {
		var ents []string
		for _, t := range s.RefusedTransitions {
			ents = append(ents, t.Entity)
		}
		sort.Strings(ents)
		fmt.Fprintf(w, "  %d payment event(s) for cancelled orders changed nothing (%s): mark_paid refused the\n"+
			"  transition and was skipped, and with it the reservation, the invoice and the receipt.\n", len(ents), strings.Join(ents, ", "))
	}

	if v := s.Invoices; v != nil {
		fmt.Fprintf(w, "\nMonthly invoices: the schedule's tick %s fired (its clock brought forward) and walked the\n"+
			"  billing system's %d customers in %d list requests; onceflow was restarted in the middle of the list.\n"+
			"  %d invoice runs, %d invoices issued, %d sent, %d repeated keys answered from the first result.\n"+
			"  Invoices per customer for period %s: %s\n", v.Tick, v.Customers, v.ListRequests, v.Runs, v.Invoices, v.InvoicesSent, v.Repeated,
			v.Period, v.perCustomer())
	}

	fmt.Fprintf(w, "\nInvariants\n")
	for _, inv := range s.Invariants {
		mark := "ok  "
		if !inv.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s", mark, inv.Name)
		if inv.Detail != "" {
			fmt.Fprintf(w, ": %s", inv.Detail)
		}
		fmt.Fprintln(w)
	}
	runs := fmt.Sprintf("%d runs", s.Runs)
	if s.Invoices != nil {
		runs = fmt.Sprintf("%d runs (%d from forms and payments, %d invoice runs)", s.Runs+s.Invoices.Runs, s.Runs, s.Invoices.Runs)
	}
	fmt.Fprintf(w, "  %d duplicate effects across %d services, %s in %.1fs (retry delays and http timeouts %d× shorter than the files say)\n",
		s.DuplicateEffects(), len(s.Destinations), runs, s.Elapsed.Seconds(), s.Speedup)

	fmt.Fprintf(w, "\nWhere to look next (from a source checkout, write 'go run ./cmd/onceflow' for 'onceflow')\n")
	width := 0
	for _, h := range s.Next {
		width = max(width, len(h.Command))
	}
	for _, h := range s.Next {
		fmt.Fprintf(w, "  %-*s  # %s\n", width, h.Command, h.Why)
	}
	switch {
	case s.Serving:
		fmt.Fprintf(w, "\nonceflow keeps serving this database, and the simulated services stay up, until Ctrl-C:\n")
		fmt.Fprintf(w, "  console:       %s\n", s.Console)
		fmt.Fprintf(w, "  sign-in token: %s\n", s.AdminToken)
		if s.ShowRun > 0 {
			fmt.Fprintf(w, "  the API:       curl -H 'Authorization: Bearer %s' %s/v1/runs/%d\n", s.AdminToken, s.API, s.ShowRun)
		}
	case s.ShowRun > 0:
		fmt.Fprintf(w, "  While the demo ran, the API answered the same at %s; it stopped with the demo\n", s.API)
		fmt.Fprintf(w, "  (onceflow demo --serve keeps it, with the web console, until Ctrl-C):\n")
		fmt.Fprintf(w, "    curl -H 'Authorization: Bearer %s' %s/v1/runs/%d\n", s.AdminToken, s.API, s.ShowRun)
	}
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
