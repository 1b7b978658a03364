package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/onceflow/onceflow/store"
)

var statsTests = []subtest{
	{"Empty", testStatsEmpty},
	{"Counts", testStatsCounts},
	{"ReusedSteps", testStatsReusedSteps},
}

func (h *harness) stats(now time.Time) *store.Stats {
	h.t.Helper()
	st, err := h.s.StatsGet(h.ctx, store.StatsGetParams{Now: now})
	if err != nil {
		h.t.Fatalf("StatsGet: %v", err)
	}
	if st == nil {
		h.t.Fatal("StatsGet returned nil")
	}
	return st
}

// statLines renders stats as sorted lines, for comparison.
func statLines(st *store.Stats) []string {
	var out []string
	for _, c := range st.Runs {
		out = append(out, fmt.Sprintf("run %s %s %d", c.Workflow, c.State, c.Count))
	}
	for _, c := range st.Steps {
		out = append(out, fmt.Sprintf("step %s %s %s %d", c.Workflow, c.Step, c.State, c.Count))
	}
	for _, c := range st.Review {
		out = append(out, fmt.Sprintf("review %s %s %d", c.Workflow, c.Reason, c.Count))
	}
	for _, c := range st.Due {
		out = append(out, fmt.Sprintf("due %s %d", c.Workflow, c.Count))
	}
	slices.Sort(out)
	return out
}

func (h *harness) wantStats(now time.Time, want ...string) {
	h.t.Helper()
	slices.Sort(want)
	if got := statLines(h.stats(now)); !slices.Equal(got, want) {
		h.t.Errorf("StatsGet at %s:\n got %q\nwant %q", now.Sub(base), got, want)
	}
}

func testStatsEmpty(h *harness) {
	h.wantStats(base)
}

// StatsGet counts runs and steps by state, review items by reason, and due steps that are
// not claimed: not those leased, waiting for a dependency or backing off.
func testStatsCounts(h *harness) {
	b := h.run("b", step("x"))
	h.mustRecord(giveUp(h.claimOne(base, "w1"), at(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	c := h.run("c", step("y"))
	h.mustRecord(retry(h.claimOne(at(time.Second), "w1"), at(2*time.Second), at(time.Minute)))
	a := h.run("a", step("send"), step("after", "send"))
	h.claimOne(at(2*time.Second), "w1") // a/send processing; a/after waits for it
	d := h.run("d", step("z"))
	h.newRun(store.RunInsertParams{Workflow: "other", RunKey: "e", Steps: []store.StepInsert{step("q")}})

	runs := map[store.State]int{}
	for _, r := range []*store.Run{a, b, c, d} {
		runs[h.getRun(r.ID).State]++
	}
	var want []string
	for st, n := range runs {
		want = append(want, fmt.Sprintf("run orders %s %d", st, n))
	}
	want = append(want, "run other pending 1",
		"step orders send processing 1", "step orders after pending 1", "step orders x needs_review 1",
		"step orders y retrying 1", "step orders z pending 1", "step other q pending 1",
		"review orders permanent_error 1")
	h.wantStats(at(30*time.Second), append(slices.Clone(want), "due orders 1", "due other 1")...)
	// Once y's backoff is over it is due too; a step due in the future is not.
	h.wantStats(at(time.Minute), append(slices.Clone(want), "due orders 2", "due other 1")...)
	h.wantStats(base.Add(-time.Second), want...)
}

// A step completed from the ledger is listed with its run in ClaimResult.ReusedSteps.
func testStatsReusedSteps(h *harness) {
	h.completeKey("F")
	b := h.runWithKeys("b", at(2*time.Second), map[string]string{"send": "K", "send.fp": "F"}, step("send"))
	res := h.claim(store.StepClaimParams{Now: at(2 * time.Second)})
	h.wantClaimed(res, 1, 0, 0)
	if len(res.ReusedSteps) != 1 {
		h.t.Fatalf("ReusedSteps = %d entries, want 1", len(res.ReusedSteps))
	}
	r := res.ReusedSteps[0]
	if r.Run == nil || r.Run.ID != b.ID || r.Step.Name != "send" || r.Step.EffectKey != "K" || r.Step.State != store.StateCompleted {
		h.t.Errorf("ReusedSteps[0] = run %+v step %+v, want run %d step send, key K, completed", r.Run, r.Step, b.ID)
	}
	if len(h.claim(store.StepClaimParams{Now: at(3 * time.Second)}).ReusedSteps) != 0 {
		h.t.Error("a claim that reused nothing lists reused steps")
	}
}
