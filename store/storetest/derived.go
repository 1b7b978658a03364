package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

// A backend may keep the events of the happy path in the rows that hold their facts and
// build them again when the audit trail is read (store/derive.go). These cases pin what
// that must never change: the attempts of a run while they are in flight, the entity an
// event names after a correction, the events of a key whose step was given another key,
// and the trail as a whole while steps move from claimed to ended.
var derivedTests = []subtest{
	{"InFlightAttemptVisible", testInFlightAttemptVisible},
	{"InFlightRetryVisible", testInFlightRetryVisible},
	{"EntityAtEventTime", testEntityAtEventTime},
	{"AuditByOldKey", testAuditByOldKey},
	{"TrailNeverChanges", testTrailNeverChanges},
}

// testInFlightAttemptVisible: an attempt in flight is listed with the run's attempts (the
// run view) while it runs, in claim order among those that ended, and a review item of
// the same run shows the step running.
func testInFlightAttemptVisible(h *harness) {
	run := h.run("r1", step("a"), step("b"))
	res := h.claim(store.StepClaimParams{Now: base})
	h.wantClaimed(res, 0, 0, 0, h.step(run.ID, "a"), h.step(run.ID, "b"))
	a, b := res.Claimed[0], res.Claimed[1]
	h.mustRecord(giveUp(a, at(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))

	atts := h.attempts(run.ID)
	if len(atts) != 2 {
		h.t.Fatalf("attempts while b runs = %d, want 2", len(atts))
	}
	if x := atts[0]; x.StepName != "a" || x.Number != 1 || x.Outcome != store.OutcomePermanent || x.EndedAt.IsZero() || x.ResponseStatus != 422 {
		h.t.Errorf("attempt of a = %+v, want attempt 1 ended permanent (422)", x)
	}
	if x := atts[1]; x.StepName != "b" || x.StepID != b.Step.ID || x.Number != 1 || x.Worker != defaultOwner || !x.EndedAt.IsZero() ||
		x.Outcome != "" || x.EffectKey != keyOf(run, "b") {
		h.t.Errorf("attempt of b in flight = %+v, want attempt 1 of w1 under %s, not ended", x, keyOf(run, "b"))
	}
	h.wantTime("in-flight attempt StartedAt", atts[1].StartedAt, base)

	items, err := h.s.ReviewList(h.ctx, store.ReviewListParams{RunID: run.ID})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(items) != 1 || items[0].StepName != "a" || items[0].ResponseStatus != 422 {
		h.t.Fatalf("review items = %+v, want step a with its 422", items)
	}
	running, err := h.s.ReviewGetByStep(h.ctx, run.ID, "b")
	if err != nil {
		h.t.Fatal(err)
	}
	if running.State != store.StateProcessing || running.Attempts != 1 || running.ResponseStatus != 0 {
		h.t.Errorf("review item of the running step = %+v, want processing, attempt 1, no answer yet", running)
	}

	// Once it ended, the same attempt, in the same place.
	h.mustRecord(succeed(b, at(2*time.Second), `{}`))
	atts = h.attempts(run.ID)
	if len(atts) != 2 || atts[1].StepName != "b" || atts[1].Outcome != store.OutcomeSuccess || atts[1].ResponseStatus != 200 {
		h.t.Fatalf("attempts once b ended = %+v", atts)
	}
	h.wantTime("ended attempt StartedAt", atts[1].StartedAt, base)
	h.wantTime("ended attempt EndedAt", atts[1].EndedAt, at(2*time.Second))
	if atts[0].ID == 0 || atts[1].ID == 0 || atts[0].ID == atts[1].ID {
		h.t.Errorf("ended attempts' IDs %d and %d, want two different non-zero IDs", atts[0].ID, atts[1].ID)
	}
}

// testInFlightRetryVisible: the second attempt of a step, in flight after a retryable
// failure, is listed after the first in the run view; the step's review item counts it
// and shows the first one's answer; once it is parked, the review queue lists the item
// with both attempts counted and the second one's answer.
func testInFlightRetryVisible(h *harness) {
	run := h.run("r1", step("a"))
	c := h.claimOne(base, "w1")
	h.mustRecord(retry(c, at(time.Second), at(10*time.Second)))
	c = h.claimOne(at(10*time.Second), "w2")
	wantEqual(h.t, "second claim's attempt", c.Step.Attempt, 2)

	atts := h.attempts(run.ID)
	if len(atts) != 2 {
		h.t.Fatalf("attempts while the retry runs = %+v, want 2", atts)
	}
	if x := atts[0]; x.Number != 1 || x.Worker != "w1" || x.Outcome != store.OutcomeRetryable || x.ResponseStatus != 503 || x.EndedAt.IsZero() {
		h.t.Errorf("first attempt = %+v, want attempt 1 of w1 ended retryable (503)", x)
	}
	if x := atts[1]; x.Number != 2 || x.Worker != "w2" || x.Outcome != "" || !x.EndedAt.IsZero() || x.EffectKey != keyOf(run, "a") {
		h.t.Errorf("attempt in flight = %+v, want attempt 2 of w2 under %s, not ended", x, keyOf(run, "a"))
	}
	h.wantTime("retry in flight StartedAt", atts[1].StartedAt, at(10*time.Second))
	it, err := h.s.ReviewGetByStep(h.ctx, run.ID, "a")
	if err != nil {
		h.t.Fatal(err)
	}
	if it.State != store.StateProcessing || it.Attempts != 2 || it.ResponseStatus != 503 {
		h.t.Errorf("review item of the retry in flight = %+v, want processing, attempt 2, the first attempt's 503", it)
	}

	h.mustRecord(giveUp(c, at(11*time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	items, err := h.s.ReviewList(h.ctx, store.ReviewListParams{RunID: run.ID})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(items) != 1 || items[0].Attempts != 2 || items[0].ResponseStatus != 422 || items[0].State != store.StateNeedsReview {
		h.t.Errorf("review items once parked = %+v, want step a, attempt 2, its 422", items)
	}
	if atts := h.attempts(run.ID); len(atts) != 2 || atts[1].Number != 2 || atts[1].Outcome != store.OutcomePermanent {
		h.t.Errorf("attempts once parked = %+v, want the second one ended permanent", atts)
	}
}

// testEntityAtEventTime: a correction that changes a run's entity changes the entity of
// the events that follow it, never of those before it: listed by run, they keep the entity
// they had; listed by entity, each entity lists the events that named it.
func testEntityAtEventTime(h *harness) {
	run := h.chain("1001", `{"email":"bad"}`)
	before := h.runEvents(run.ID)
	if _, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Step: "c", Input: json.RawMessage(`{"email":"ada@example.com"}`),
		BaseInput: json.RawMessage(`{"email":"bad"}`), Entity: "order:1001-fixed", Diff: json.RawMessage(`{"email":"ada@example.com"}`),
		Actor: "alice", Now: at(time.Hour)}); err != nil {
		h.t.Fatal(err)
	}
	h.mustRecord(succeed(h.claimOne(at(time.Hour), "w1"), at(time.Hour+time.Second), `{}`))
	h.mustRecord(succeed(h.claimOne(at(time.Hour+time.Second), "w1"), at(time.Hour+2*time.Second), `{}`))
	h.wantRunState(run.ID, store.StateCompleted)
	all := h.runEvents(run.ID)
	if len(all) <= len(before) {
		h.t.Fatalf("%d events after the replay, %d before", len(all), len(before))
	}
	var old, fixed []string
	for i, e := range all {
		want := "order:1001-fixed"
		if i < len(before) {
			want = "order:1001"
			if b := before[i]; b.ID != e.ID || b.Type != e.Type || b.Entity != e.Entity || string(b.Detail) != string(e.Detail) {
				h.t.Errorf("event %d changed after the correction: %+v %s, was %+v %s", e.ID, e, e.Detail, b, b.Detail)
			}
		}
		if e.Entity != want {
			h.t.Errorf("event %d %s names entity %q, want %q", e.ID, e.Type, e.Entity, want)
		}
		if e.Entity == "order:1001" {
			old = append(old, fmt.Sprint(e.ID))
		} else {
			fixed = append(fixed, fmt.Sprint(e.ID))
		}
	}
	for entity, want := range map[string][]string{"order:1001": old, "order:1001-fixed": fixed} {
		var got []string
		for _, e := range h.events(store.EventListParams{Entity: entity}) {
			got = append(got, fmt.Sprint(e.ID))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			h.t.Errorf("events of entity %s = %v, want %v", entity, got, want)
		}
	}
}

// testAuditByOldKey: a step whose effect key changes (a replay with a corrected input
// renders another key) keeps its attempts under the key they were made with: the audit
// trail of the old key lists them, that of the new key the attempts after it.
func testAuditByOldKey(h *harness) {
	run := h.runWithKeys("r1", base, map[string]string{"send": "k-old", "send.fp": "F"}, step("send"))
	c := h.claimOne(base, "w1")
	h.mustRecord(giveUp(c, at(time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	in := json.RawMessage(`{"send":"k-new","send.fp":"F"}`)
	if _, err := h.s.RunReplay(h.ctx, store.RunReplayParams{RunID: run.ID, Step: "send", Input: in, BaseInput: run.Input, Entity: run.Entity,
		Diff: json.RawMessage(`{"send":"k-new"}`), Actor: "alice", Now: at(time.Minute)}); err != nil {
		h.t.Fatal(err)
	}
	h.mustRecord(succeed(h.claimOne(at(time.Minute), "w1"), at(time.Minute+time.Second), `{}`))
	h.wantTypes("events of k-old", h.events(store.EventListParams{EffectKey: "k-old"}), store.EventStepClaimed, store.EventStepNeedsReview,
		store.EventReviewReplayed)
	h.wantTypes("events of k-new", h.events(store.EventListParams{EffectKey: "k-new"}), store.EventStepClaimed, store.EventStepCompleted)
	for _, e := range h.events(store.EventListParams{EffectKey: "k-old"}) {
		if e.Attempt != 1 || e.EffectKey != "k-old" || e.StepName != "send" {
			h.t.Errorf("event %d %s of k-old: attempt %d key %q", e.ID, e.Type, e.Attempt, e.EffectKey)
		}
	}
}

// testTrailNeverChanges: what EventList showed is shown again, event by event, after every
// later call: a step claimed, then recorded, retried, reaped, recorded late; a run
// cancelled with a step in flight; a run purged is the one exception (its events go).
func testTrailNeverChanges(h *harness) {
	seen := map[int64]string{}
	check := func(when string) {
		h.t.Helper()
		all := h.events(store.EventListParams{})
		byID := map[int64]bool{}
		for i, e := range all {
			if i > 0 && e.ID <= all[i-1].ID {
				h.t.Errorf("%s: event IDs not increasing: %d after %d", when, e.ID, all[i-1].ID)
			}
			byID[e.ID] = true
			s := fmt.Sprintf("%s %s %d %d %s %s %s %d %s %s %s", e.At.UTC().Format(time.RFC3339Nano), e.Type, e.RunID, e.StepID, e.Workflow, e.Entity,
				e.EffectKey, e.Attempt, e.Actor, e.Reason, e.Detail)
			if was, ok := seen[e.ID]; ok && was != s {
				h.t.Errorf("%s: event %d was\n  %s\nnow\n  %s", when, e.ID, was, s)
			}
			seen[e.ID] = s
		}
		for id := range seen {
			if !byID[id] {
				h.t.Errorf("%s: event %d is gone", when, id)
			}
		}
	}
	r1 := h.run("r1", step("a"), step("b", "a"))
	r2 := h.run("r2", step("a"))
	r3 := h.run("r3", step("a"), step("b"))
	check("started")
	res := h.claim(store.StepClaimParams{Now: base})
	check("claimed")
	byRun := map[int64]*store.ClaimedStep{}
	for _, c := range res.Claimed {
		if c.Step.Name == "a" {
			byRun[c.Run.ID] = c
		}
	}
	h.mustRecord(retry(byRun[r1.ID], at(time.Second), at(2*time.Second)), succeed(byRun[r2.ID], at(time.Second), `{}`))
	check("recorded")
	if _, err := h.s.RunCancel(h.ctx, store.RunCancelParams{RunID: r3.ID, Actor: "alice", Now: at(time.Second)}); err != nil {
		h.t.Fatal(err)
	}
	check("cancelled")
	late := h.claimOne(at(2*time.Second), "w2")
	check("claimed again")
	if n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(time.Hour), Decide: retryAt(at(time.Hour))}); err != nil || n == 0 {
		h.t.Fatalf("reap: %d, %v", n, err)
	}
	check("reaped")
	h.record(succeed(late, at(time.Hour+time.Second), `{}`))
	for _, c := range res.Claimed {
		if c.Run.ID == r3.ID {
			h.record(succeed(c, at(time.Hour+time.Second), `{}`))
		}
	}
	check("recorded late")
	// The late success was kept: a is reused, then b runs.
	for now := at(time.Hour); h.getRun(r1.ID).State != store.StateCompleted; now = now.Add(time.Second) {
		if now.After(at(time.Hour + time.Minute)) {
			h.t.Fatalf("run r1 is %s", h.getRun(r1.ID).State)
		}
		for _, c := range h.claim(store.StepClaimParams{Now: now}).Claimed {
			h.mustRecord(succeed(c, now.Add(time.Second), `{}`))
		}
		check("claimed and recorded")
	}
	check("completed")
}
