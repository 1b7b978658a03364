package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

var claimTests = []subtest{
	{"HandsOutDueSteps", testClaimDueSteps},
	{"OldestFirstWithinLimit", testClaimLimit},
	{"ConcurrentOwners", testClaimConcurrent},
	{"PrepareError", testClaimPrepareError},
}

func testClaimDueSteps(h *harness) {
	run1 := h.run("r1", step("a"), step("b", "a"))
	run2 := h.newRun(store.RunInsertParams{Workflow: "other", RunKey: "r2", Entity: "entity:r2", Steps: []store.StepInsert{step("x")}})
	run3 := h.newRun(store.RunInsertParams{RunKey: "r3", Entity: "entity:r3", Now: at(time.Minute), Steps: []store.StepInsert{step("a")}})

	var offered []string
	prepare := func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		offered = append(offered, fmt.Sprintf("%s/%s", c.Run.RunKey, c.Step.Name))
		if c.Run.ID != c.Step.RunID || c.Step.State != store.StatePending || c.Step.Waiting != 0 {
			h.t.Errorf("Prepare got run %d and step %+v, want a due pending step of that run", c.Run.ID, c.Step)
		}
		return store.EffectSpec{Key: "key-" + c.Run.RunKey + "-" + c.Step.Name, Fingerprint: "fp-" + c.Step.Name}, nil
	}
	res := h.claim(store.StepClaimParams{Owner: "w1", Now: base, LeaseFor: 30 * time.Second, Prepare: prepare})
	a := h.step(run1.ID, "a")
	h.wantClaimed(res, 0, 0, 0, a)
	wantEqual(h.t, "candidates offered to Prepare", strings.Join(offered, ","), "r1/a")

	cs := res.Claimed[0]
	if cs.Run == nil || cs.Run.ID != run1.ID || cs.Run.RunKey != "r1" {
		h.t.Errorf("claimed step's run = %+v, want run %d", cs.Run, run1.ID)
	}
	wantEqual(h.t, "previous outcome of a first attempt", cs.PreviousOutcome, "")
	for what, s := range map[string]*store.Step{"claimed": cs.Step, "stored": a} {
		if s.ID != a.ID || s.RunID != run1.ID || s.Name != "a" || s.State != store.StateProcessing || s.Attempt != 1 ||
			s.LeaseOwner != "w1" || s.EffectKey != "key-r1-a" || s.Fingerprint != "fp-a" {
			h.t.Errorf("%s step = %+v, want processing attempt 1 for w1 under key-r1-a/fp-a", what, s)
		}
		h.wantTime(what+" step LeaseExpiresAt", s.LeaseExpiresAt, at(30*time.Second))
	}

	atts := h.attempts(run1.ID)
	if len(atts) != 1 {
		h.t.Fatalf("attempts = %d, want 1", len(atts))
	}
	if x := atts[0]; x.RunID != run1.ID || x.StepID != a.ID || x.StepName != "a" || x.Number != 1 || x.EffectKey != "key-r1-a" ||
		x.Worker != "w1" || !x.EndedAt.IsZero() || x.Outcome != "" {
		h.t.Errorf("attempt = %+v, want open attempt 1 of step a by w1 under key-r1-a", x)
	}
	h.wantTime("attempt StartedAt", atts[0].StartedAt, base)

	e := h.wantEffect("key-r1-a", store.EffectInFlight, a)
	wantEqual(h.t, "effect fingerprint", e.Fingerprint, "fp-a")
	h.wantTime("effect CreatedAt", e.CreatedAt, base)
	if len(e.Result) > 0 && string(e.Result) != "null" {
		h.t.Errorf("in-flight effect result = %s, want none", e.Result)
	}

	evs := h.runEvents(run1.ID)
	h.wantTypes("run 1", evs, store.EventRunCreated, store.EventStepClaimed, store.EventRunStateChanged)
	h.wantStepEvent(evs[1], run1, a, "key-r1-a", 1)
	h.wantRunState(run1.ID, store.StateProcessing)
	h.wantRunState(run2.ID, store.StatePending)
	h.wantRunState(run3.ID, store.StatePending)

	// Nothing else is due at base: a is leased, b waits for a, run 3 is due later and x is
	// another workflow.
	h.wantClaimed(h.claim(store.StepClaimParams{Now: base, Owner: "w2"}), 0, 0, 0)
	wantEqual(h.t, "b waiting", h.step(run1.ID, "b").Waiting, 1)

	// A minute later both other workflows' steps are due, oldest first.
	res = h.claim(store.StepClaimParams{Now: at(time.Minute), Owner: "w2", Workflows: []string{"orders", "other"}})
	h.wantClaimed(res, 0, 0, 0, h.step(run2.ID, "x"), h.step(run3.ID, "a"))
	for _, c := range res.Claimed {
		wantEqual(h.t, "lease owner of "+c.Step.Name, c.Step.LeaseOwner, "w2")
		h.wantTime("lease of "+c.Step.Name, c.Step.LeaseExpiresAt, at(time.Minute+defaultLeaseFor))
	}
}

func testClaimLimit(h *harness) {
	var steps []*store.Step
	for i := range 5 {
		run := h.newRun(store.RunInsertParams{RunKey: fmt.Sprintf("r%d", i), Now: at(time.Duration(4-i) * time.Second),
			Steps: []store.StepInsert{step("a")}})
		steps = append(steps, h.step(run.ID, "a"))
	}
	// Due times run backwards from insertion: steps[4] is the oldest due.
	now := at(time.Minute)
	h.wantClaimed(h.claim(store.StepClaimParams{Now: now, Limit: 2}), 0, 0, 0, steps[4], steps[3])
	h.wantClaimed(h.claim(store.StepClaimParams{Now: now, Limit: 2}), 0, 0, 0, steps[2], steps[1])
	h.wantClaimed(h.claim(store.StepClaimParams{Now: now, Limit: 2}), 0, 0, 0, steps[0])
	h.wantClaimed(h.claim(store.StepClaimParams{Now: now, Limit: 2}), 0, 0, 0)
}

func testClaimConcurrent(h *harness) {
	const runs, workers = 30, 6
	for i := range runs {
		h.run(fmt.Sprintf("r%02d", i), step("a"))
	}
	var mu sync.Mutex
	owners := map[int64]string{}
	var wg sync.WaitGroup
	for w := range workers {
		owner := fmt.Sprintf("worker-%d", w)
		wg.Go(func() {
			for {
				res, err := h.s.StepClaim(h.ctx, claimDefaults(store.StepClaimParams{Owner: owner, Limit: 2}))
				if err != nil {
					h.t.Errorf("StepClaim by %s: %v", owner, err)
					return
				}
				if len(res.Claimed) == 0 {
					return
				}
				mu.Lock()
				for _, c := range res.Claimed {
					if prev, dup := owners[c.Step.ID]; dup {
						h.t.Errorf("step %d handed to %s and to %s", c.Step.ID, prev, owner)
					}
					owners[c.Step.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wantEqual(h.t, "steps claimed", len(owners), runs)
	list, err := h.s.RunList(h.ctx, store.RunListParams{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range list {
		s := h.step(r.ID, "a")
		if s.State != store.StateProcessing || s.Attempt != 1 || s.LeaseOwner != owners[s.ID] {
			h.t.Errorf("step %d: %s attempt %d owner %q, want processing attempt 1 owned by %q", s.ID, s.State, s.Attempt, s.LeaseOwner, owners[s.ID])
		}
		if atts := h.attempts(r.ID); len(atts) != 1 || atts[0].Worker != owners[s.ID] {
			h.t.Errorf("run %d: %d attempts, want 1 by %s", r.ID, len(atts), owners[s.ID])
		}
	}
}

func testClaimPrepareError(h *harness) {
	cases := []struct {
		name      string
		spec      store.EffectSpec
		err       error
		reason    store.Reason
		lastError string // a substring
	}{
		{"PrepareError", store.EffectSpec{}, &store.PrepareError{Reason: "missing_field", Err: errors.New("input.email is missing")}, "missing_field", "input.email is missing"},
		{"WrappedPrepareError", store.EffectSpec{}, fmt.Errorf("template: %w", &store.PrepareError{Reason: "bad_template", Err: errors.New("unclosed {")}), "bad_template", "unclosed {"},
		{"PlainError", store.EffectSpec{}, errors.New("boom"), store.ReasonInvalidKey, "boom"},
		{"EmptyKey", store.EffectSpec{Fingerprint: "fp"}, nil, store.ReasonInvalidKey, ""},
	}
	for _, tc := range cases {
		h.sub(tc.name, func(h *harness) {
			run := h.run("r", step("a"), step("b", "a"))
			res := h.claim(store.StepClaimParams{Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return tc.spec, tc.err }})
			h.wantClaimed(res, 0, 1, 0)
			a := h.wantStep(run.ID, "a", store.StateNeedsReview, 0, tc.reason)
			if a.LastError == "" || !strings.Contains(a.LastError, tc.lastError) {
				h.t.Errorf("LastError = %q, want it to contain %q", a.LastError, tc.lastError)
			}
			if a.LeaseOwner != "" {
				h.t.Errorf("parked step has lease owner %q", a.LeaseOwner)
			}
			wantEqual(h.t, "attempts", len(h.attempts(run.ID)), 0)
			h.wantStep(run.ID, "b", store.StatePending, 0, "")
			h.wantRunState(run.ID, store.StateNeedsReview)
			e := h.only(h.runEvents(run.ID), store.EventStepNeedsReview)
			if e.StepID != a.ID || e.StepName != "a" || e.Reason != tc.reason {
				h.t.Errorf("step.needs_review = step %d %s reason %q, want step %d a reason %q", e.StepID, e.StepName, e.Reason, a.ID, tc.reason)
			}
			// A parked step is not offered again.
			h.wantClaimed(h.claim(store.StepClaimParams{Now: at(time.Hour)}), 0, 0, 0)
		})
	}
}
