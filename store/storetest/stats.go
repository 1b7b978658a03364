package storetest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

var statsTests = []subtest{
	{"Empty", testStatsEmpty},
	{"Counts", testStatsCounts},
	{"ReusedSteps", testStatsReusedSteps},
	{"ActivityCountsTheTrail", testStatsActivity},
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
	// Without the steps, the rest is the same; and the counts of runs follow a run's
	// changes of state and its deletion.
	st, err := h.s.StatsGet(h.ctx, store.StatsGetParams{Now: at(30 * time.Second), WithoutSteps: true})
	if err != nil {
		h.t.Fatal(err)
	}
	lines := statLines(st)
	var noSteps []string
	for _, l := range append(slices.Clone(want), "due orders 1", "due other 1") {
		if !strings.HasPrefix(l, "step ") {
			noSteps = append(noSteps, l)
		}
	}
	slices.Sort(noSteps)
	wantEqual(h.t, "stats without the steps", fmt.Sprint(lines), fmt.Sprint(noSteps))
	if _, err := h.s.ReviewAbandon(h.ctx, action(b, "x", at(time.Hour))); err != nil {
		h.t.Fatal(err)
	}
	failed := 0
	for _, c := range h.stats(at(time.Hour)).Runs {
		if c.Workflow == "orders" && c.State == store.StateFailed {
			failed += int(c.Count)
		}
	}
	wantEqual(h.t, "failed runs after an abandon", failed, 1)
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

// StatsActivity counts, per slice, exactly the events of its types that the audit trail
// lists from its start on, derived and stored alike, and returns the latest failures
// newest first.
func testStatsActivity(h *harness) {
	r1 := h.run("r1", step("a"), step("b", "a"))
	r2 := h.run("r2", step("a"))
	r3 := h.run("r3", step("a"))
	res := h.claim(store.StepClaimParams{Now: base})
	for _, cs := range res.Claimed {
		switch cs.Step.RunID {
		case r1.ID:
			h.mustRecord(succeed(cs, at(time.Second), `{}`))
		case r2.ID:
			h.mustRecord(giveUp(cs, at(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
		case r3.ID:
			h.mustRecord(giveUp(cs, at(2*time.Second), store.OutcomePermanent, store.StateFailed, store.ReasonPermanentError))
		}
	}
	h.mustRecord(retry(h.claimOne(at(3*time.Second), "w1"), at(4*time.Second), at(10*time.Minute)))
	h.mustRecord(succeed(h.claimOne(at(20*time.Minute), "w1"), at(21*time.Minute), `{}`))
	h.newRun(store.RunInsertParams{RunKey: "r4", Steps: []store.StepInsert{step("a")}, Now: at(30 * time.Minute)})
	_ = r1

	trail := h.events(store.EventListParams{Limit: 100000})
	for _, tc := range []struct {
		since  time.Time
		bucket time.Duration
	}{{at(-time.Minute), 5 * time.Minute}, {base, time.Minute}, {at(5 * time.Minute), 5 * time.Minute}, {at(25 * time.Minute), time.Hour}, {at(time.Hour), time.Minute}} {
		got, err := h.s.StatsActivity(h.ctx, store.StatsActivityParams{Since: tc.since, Bucket: tc.bucket, Failures: 10})
		if err != nil {
			h.t.Fatalf("StatsActivity: %v", err)
		}
		want := &store.Activity{}
		var failures []int64
		for _, e := range trail {
			if e.At.Before(tc.since) || !slices.Contains(store.ActivityTypes, e.Type) {
				continue
			}
			want.AddActivity(int(e.At.Sub(tc.since)/tc.bucket), e.Type, 1)
			if e.Type == store.EventStepNeedsReview || e.Type == store.EventStepFailed {
				failures = append([]int64{e.ID}, failures...)
			}
		}
		wantEqual(h.t, fmt.Sprintf("activity from %s per %s", tc.since.Sub(base), tc.bucket), fmt.Sprint(got.Buckets), fmt.Sprint(want.Buckets))
		var ids []int64
		for _, e := range got.Failures {
			ids = append(ids, e.ID)
		}
		wantEqual(h.t, fmt.Sprintf("failures from %s", tc.since.Sub(base)), fmt.Sprint(ids), fmt.Sprint(failures))
	}
	got, err := h.s.StatsActivity(h.ctx, store.StatsActivityParams{Since: at(-time.Minute), Bucket: time.Hour, Failures: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(got.Failures) != 1 || got.Failures[0].Type != store.EventStepFailed || got.Failures[0].RunID != r3.ID {
		h.t.Errorf("the latest failure: %+v, want run %d's step.failed", got.Failures, r3.ID)
	}
	if len(got.Buckets) != 1 || got.Buckets[0] != (store.ActivityBucket{Started: 4, Completed: 2, Retried: 1, Parked: 1, Failed: 1}) {
		h.t.Errorf("the hour's activity: %+v, want 4 started, 2 completed, 1 retried, 1 parked, 1 failed", got.Buckets)
	}
}
