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
	// DBPath is the SQLite file the demo used; DBURL names it for --db.
	DBPath string `json:"db"`
	DBURL  string `json:"db_url"`
	Seed   uint64 `json:"seed"`
	// Runs is how many runs the demo started.
	Runs int `json:"runs"`
	// Submissions counts the form posts (each form twice); DuplicateSubmissions those
	// answered with an existing run.
	Submissions          int `json:"form_posts"`
	DuplicateSubmissions int `json:"duplicate_posts_answered"`
	// ResubmittedForms counts runs that repeat an earlier run's submission under a new
	// run key, so that their effects come from the ledger.
	ResubmittedForms int                `json:"resubmitted_forms"`
	Destinations     []DestinationStats `json:"destinations"`
	RunsByState      map[string]int     `json:"runs_by_state"`
	// ReviewReasons counts the steps waiting for review by reason code.
	ReviewReasons map[string]int `json:"review_reasons"`
	ReviewItems   []ReviewItem   `json:"review_items"`
	Engine        EngineStats    `json:"engine"`
	Invariants    []Invariant    `json:"invariants"`
	InvariantsOK  bool           `json:"invariants_ok"`
	Elapsed       time.Duration  `json:"-"`
	ElapsedSecs   float64        `json:"elapsed_seconds"`

	runs  []*store.Run
	steps map[int64][]*store.Step
}

// ReviewItem is a step parked in needs_review.
type ReviewItem struct {
	RunID     int64  `json:"run_id"`
	RunKey    string `json:"run_key"`
	Entity    string `json:"entity"`
	Step      string `json:"step"`
	EffectKey string `json:"effect_key"`
	Reason    string `json:"reason"`
	Error     string `json:"error"`
}

// EngineStats counts what the engine did, from the audit trail.
type EngineStats struct {
	// Attempts counts step executions (claims).
	Attempts int `json:"attempts"`
	// RetriesScheduled counts retries after an error that left the effect undone.
	RetriesScheduled int `json:"retries_scheduled"`
	// UnknownOutcomesRetried counts retries, with the same key, after an attempt whose
	// effect may have happened.
	UnknownOutcomesRetried int `json:"unknown_outcomes_retried"`
	// EffectsReused counts steps completed from the effect ledger without a request.
	EffectsReused int `json:"effects_reused"`
	// EffectWaits counts steps that waited for another run holding the same key.
	EffectWaits int `json:"effect_waits"`
	// KeyConflicts counts steps whose key was completed with a different request.
	KeyConflicts int `json:"key_conflicts"`
}

// Invariant is one property the demo checks.
type Invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// MarshalJSON keeps empty collections as [] and {} rather than null.
func (s *Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	c := plain(*s)
	if c.ReviewItems == nil {
		c.ReviewItems = []ReviewItem{}
	}
	if c.ReviewReasons == nil {
		c.ReviewReasons = map[string]int{}
	}
	if c.RunsByState == nil {
		c.RunsByState = map[string]int{}
	}
	c.ElapsedSecs = s.Elapsed.Seconds()
	return json.Marshal(c)
}

// check evaluates the invariants into sum.
func check(sum *Summary, ds *destinations, tally *startTally, subs []submission, settled bool) {
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
			dup = append(dup, fmt.Sprintf("%s applied %d business actions twice", d.Name, d.DuplicateEffects))
		}
	}
	add("no business action applied twice", dup)

	var lost []string
	type action struct{ dest, name string }
	recorded := map[action]bool{}
	for _, r := range sum.runs {
		var f Form
		_ = json.Unmarshal(r.Input, &f)
		for _, s := range sum.steps[r.ID] {
			d, name := actionOf(ds, s.Name)
			if d == nil {
				continue
			}
			a := action{d.name, name + ":" + f.SubmissionID}
			switch s.State {
			case store.StateCompleted:
				recorded[a] = true
				if n := d.applied(name, f.SubmissionID); n != 1 {
					lost = append(lost, fmt.Sprintf("run %d step %s is completed but %s applied it %d times", r.ID, s.Name, d.name, n))
				}
			case store.StateNeedsReview:
				if s.LastOutcome == store.OutcomeUnknown {
					recorded[a] = true // a person decides whether it happened
				}
			}
		}
	}
	for _, d := range ds.all() {
		d.mu.Lock()
		for a, n := range d.actions {
			if n > 0 && !recorded[action{d.name, a}] {
				lost = append(lost, fmt.Sprintf("%s applied %s but no step records it", d.name, a))
			}
		}
		d.mu.Unlock()
	}
	sort.Strings(lost)
	add("every completed step's effect applied exactly once, none unrecorded", lost)

	var open []string
	if !settled {
		open = append(open, "the deadline passed before every run settled")
	}
	for _, r := range sum.runs {
		if r.State != store.StateCompleted && r.State != store.StateNeedsReview {
			open = append(open, fmt.Sprintf("run %d is %s", r.ID, r.State))
		}
	}
	add("every run completed or waiting for review", open)

	var starts []string
	starts = append(starts, tally.errs...)
	for _, s := range subs {
		if n := tally.created[s.RunKey]; n != 1 {
			starts = append(starts, fmt.Sprintf("run key %s created %d runs", s.RunKey, n))
		}
	}
	if len(sum.runs) != len(subs) {
		starts = append(starts, fmt.Sprintf("%d runs stored for %d run keys", len(sum.runs), len(subs)))
	}
	add("every run key started exactly one run", starts)

	sum.InvariantsOK = true
	for _, inv := range sum.Invariants {
		sum.InvariantsOK = sum.InvariantsOK && inv.OK
	}
}

// DuplicateEffects is the total over all destinations.
func (s *Summary) DuplicateEffects() int {
	n := 0
	for _, d := range s.Destinations {
		n += d.DuplicateEffects
	}
	return n
}

// KeyReplays is the total over all destinations: retries the idempotency key made safe.
func (s *Summary) KeyReplays() int {
	n := 0
	for _, d := range s.Destinations {
		n += d.KeyReplays
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
	fmt.Fprintln(tw, "DESTINATION\tREQUESTS RECEIVED\tEFFECTS APPLIED\tKEY REPLAYS\tFAULTS INJECTED\tREJECTED (422)\tDUPLICATE EFFECTS")
	for _, d := range s.Destinations {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", d.Name, d.Requests, d.EffectsApplied, d.KeyReplays, d.FaultsInjected, d.Rejected, d.DuplicateEffects)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	e := s.Engine
	fmt.Fprintf(w, "\nWhat happened\n")
	fmt.Fprintf(w, "  %d form posts made %d runs: each of the %d double submissions got back the run already started.\n",
		s.Submissions, len(s.runs), s.DuplicateSubmissions)
	if s.ResubmittedForms > 0 {
		fmt.Fprintf(w, "  %d forms were sent again under a new request id: %d steps took their result from the effect ledger\n"+
			"    instead of calling a destination again, %d waited for another run holding the same key, %d had changed data (key conflict).\n",
			s.ResubmittedForms, e.EffectsReused, e.EffectWaits, e.KeyConflicts)
	}
	fmt.Fprintf(w, "  %d attempts: %d retries after 503/429 or a refused connection, %d retries after an unknown outcome\n"+
		"    (dropped connection or late answer after the effect was applied), answered by the destinations\n"+
		"    from their idempotency keys %d times without acting again.\n",
		e.Attempts, e.RetriesScheduled, e.UnknownOutcomesRetried, s.KeyReplays())

	fmt.Fprintf(w, "\nRuns by state:")
	for _, st := range store.States {
		if n := s.RunsByState[string(st)]; n > 0 {
			fmt.Fprintf(w, "  %s %d", st, n)
		}
	}
	fmt.Fprintln(w)

	if len(s.ReviewItems) > 0 {
		fmt.Fprintf(w, "\nReview items: %d steps wait for a person; nothing was lost or done twice\n", len(s.ReviewItems))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  RUN\tENTITY\tSTEP\tREASON\tDETAIL")
		for _, it := range s.ReviewItems {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", it.RunID, it.Entity, it.Step, it.Reason, oneLine(it.Error, 90))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
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
	fmt.Fprintf(w, "  %d duplicate effects across %d destinations, in %.1fs\n", s.DuplicateEffects(), len(s.Destinations), s.Elapsed.Seconds())

	fmt.Fprintf(w, "\nWhere to look next (from a source checkout, write 'go run ./cmd/onceflow' for 'onceflow')\n")
	fmt.Fprintf(w, "  onceflow runs list --db %s\n", s.DBURL)
	if len(s.ReviewItems) > 0 {
		fmt.Fprintf(w, "  onceflow runs list --state needs_review --db %s\n", s.DBURL)
		fmt.Fprintf(w, "  onceflow runs show %d --db %s\n", s.ReviewItems[0].RunID, s.DBURL)
	}
	if id := s.busiestRun(); id > 0 {
		fmt.Fprintf(w, "  onceflow runs show %d --db %s\n", id, s.DBURL)
	}
	return nil
}

// busiestRun is a completed run with the most attempts' worth of trouble: the one whose
// steps took the most attempts, a good example of retries made safe.
func (s *Summary) busiestRun() int64 {
	var best int64
	most := 0
	for _, r := range s.runs {
		if r.State != store.StateCompleted {
			continue
		}
		n := 0
		for _, st := range s.steps[r.ID] {
			n += st.Attempt
		}
		if n > most {
			best, most = r.ID, n
		}
	}
	return best
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
