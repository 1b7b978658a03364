package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

var retentionTests = []subtest{
	{"PurgesOldFinishedRuns", testPurgeOldRuns},
	{"KeepsUnfinishedRuns", testPurgeKeepsUnfinished},
	{"LedgerRetention", testPurgeLedger},
	{"LedgerKeptForUnfinishedRuns", testPurgeLedgerKeptForUnfinished},
	{"RetentionAfterLostLease", testPurgeRetentionAfterLostLease},
	{"DryRunReportsWhatPurgeDeletes", testPurgeDryRun},
	{"AuditEvents", testPurgeAuditEvents},
	{"Concurrent", testPurgeConcurrent},
}

// Times of the retention tests: runs finish around base, the cutoff for runs is an hour
// later, and the purge happens on day 100.
var (
	purgeCutoff = at(time.Hour)
	purgeNow    = at(100 * 24 * time.Hour)
)

// completeRun inserts at now a one-step run whose step send completes effect key key at
// now+1s, kept until retain (zero: forever), and returns the run.
func (h *harness) completeRun(runKey, key string, now, retain time.Time) *store.Run {
	h.t.Helper()
	run := h.runWithKeys(runKey, now, map[string]string{"send": key, "send.fp": "F"}, step("send"))
	c := h.claimOne(now, "w1")
	if c.Step.RunID != run.ID {
		h.t.Fatalf("claimed a step of run %d, want run %d", c.Step.RunID, run.ID)
	}
	p := succeed(c, now.Add(time.Second), `{"ok": true}`)
	p.RetainUntil = retain
	h.mustRecord(p)
	h.wantRunState(run.ID, store.StateCompleted)
	return run
}

// purge calls RetentionPurge and requires it to succeed.
func (h *harness) purge(p store.RetentionPurgeParams) *store.PurgeReport {
	h.t.Helper()
	if p.Now.IsZero() {
		p.Now = purgeNow
	}
	if p.Actor == "" {
		p.Actor = "ops:alice"
	}
	r, err := h.s.RetentionPurge(h.ctx, p)
	if err != nil {
		h.t.Fatalf("RetentionPurge(%+v): %v", p, err)
	}
	if r == nil {
		h.t.Fatal("RetentionPurge returned a nil report")
	}
	wantEqual(h.t, "report's DryRun", r.DryRun, p.DryRun)
	return r
}

// wouldPurge is what purging runs and keys should report, from the rows as they are now.
func (h *harness) wouldPurge(runs []*store.Run, keys ...string) store.PurgeReport {
	h.t.Helper()
	var r store.PurgeReport
	for _, run := range runs {
		r.Runs.Observe(h.getRun(run.ID).UpdatedAt)
		for _, s := range h.steps(run.ID) {
			r.Steps.Observe(s.UpdatedAt)
		}
		for _, a := range h.attempts(run.ID) {
			r.Attempts.Observe(a.StartedAt)
		}
		for _, e := range h.runEvents(run.ID) {
			r.Events.Observe(e.At)
		}
	}
	for _, k := range keys {
		r.Effects.Observe(h.effect(k).CompletedAt)
	}
	return r
}

// wantReport compares a report's counts and times with want's (not Batches nor DryRun).
func (h *harness) wantReport(what string, got *store.PurgeReport, want store.PurgeReport) {
	h.t.Helper()
	for _, k := range []struct {
		kind      string
		got, want store.PurgeCount
	}{
		{"runs", got.Runs, want.Runs}, {"steps", got.Steps, want.Steps}, {"attempts", got.Attempts, want.Attempts},
		{"events", got.Events, want.Events}, {"effects", got.Effects, want.Effects},
	} {
		if k.got.Count != k.want.Count || !k.got.Oldest.Equal(k.want.Oldest) || !k.got.Newest.Equal(k.want.Newest) {
			h.t.Errorf("%s: %s = %d (oldest %s, newest %s), want %d (oldest %s, newest %s)", what, k.kind,
				k.got.Count, k.got.Oldest, k.got.Newest, k.want.Count, k.want.Oldest, k.want.Newest)
		}
	}
}

// wantRunGone requires a run and everything of it to be deleted.
func (h *harness) wantRunGone(id int64) {
	h.t.Helper()
	if r, err := h.s.RunGetByID(h.ctx, id); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("RunGetByID(%d) after the purge = %+v, %v; want ErrNotFound", id, r, err)
	}
	wantEqual(h.t, fmt.Sprintf("steps of purged run %d", id), len(h.steps(id)), 0)
	wantEqual(h.t, fmt.Sprintf("attempts of purged run %d", id), len(h.attempts(id)), 0)
	wantEqual(h.t, fmt.Sprintf("events of purged run %d", id), len(h.runEvents(id)), 0)
}

// snapshot is what a run has: its state and how many steps, attempts and events.
func (h *harness) snapshot(id int64) string {
	h.t.Helper()
	return fmt.Sprintf("run %d %s: %d steps, %d attempts, %d events", id, h.getRun(id).State,
		len(h.steps(id)), len(h.attempts(id)), len(h.runEvents(id)))
}

// purgeEvents lists the retention.purged events.
func (h *harness) purgeEvents() []*store.Event {
	h.t.Helper()
	return ofType(h.events(store.EventListParams{Limit: 10000}), store.EventRetentionPurged)
}

func testPurgeOldRuns(h *harness) {
	// Completed after a retry: two attempts.
	retried := h.runWithKeys("retried", base, map[string]string{"send": "K-retried"}, step("send"), step("after", "send"))
	c := h.claimOne(base, "w1")
	h.mustRecord(retry(c, at(time.Second), at(2*time.Second)))
	c = h.claimOne(at(2*time.Second), "w1")
	h.mustRecord(succeed(c, at(3*time.Second), `{}`))
	c = h.claimOne(at(3*time.Second), "w1")
	h.mustRecord(succeed(c, at(4*time.Second), `{}`))
	h.wantRunState(retried.ID, store.StateCompleted)

	// Failed, its dependent cancelled.
	failed := h.runWithKeys("failed", at(5*time.Second), nil, step("charge"), step("ship", "charge"))
	c = h.claimOne(at(5*time.Second), "w1")
	h.mustRecord(giveUp(c, at(6*time.Second), store.OutcomePermanent, store.StateFailed, store.ReasonPermanentError))
	h.wantRunState(failed.ID, store.StateFailed)

	// Finished after the cutoff: kept.
	recent := h.completeRun("recent", "K-recent", at(2*time.Hour), time.Time{})
	keep := h.snapshot(recent.ID)

	want := h.wouldPurge([]*store.Run{retried, failed})
	got := h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff})
	h.wantReport("purge", got, want)
	wantEqual(h.t, "runs purged", got.Runs.Count, 2)
	h.wantRunGone(retried.ID)
	h.wantRunGone(failed.ID)
	wantEqual(h.t, "recent run", h.snapshot(recent.ID), keep)

	// Purging a run does not forget its effects: the key is still completed, kept forever.
	e := h.effect("K-retried")
	if e.State != store.EffectCompleted || !e.RetainUntil.IsZero() {
		h.t.Errorf("ledger row of a purged run: %s retained until %s, want completed forever", e.State, e.RetainUntil)
	}
	again := h.runWithKeys("again", purgeNow, map[string]string{"send": "K-retried"}, step("send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: purgeNow}), 1, 0, 0)
	h.wantStep(again.ID, "send", store.StateCompleted, 0, store.ReasonEffectReused)

	// Nothing left to purge.
	h.wantReport("second purge", h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff}), store.PurgeReport{})
}

func testPurgeKeepsUnfinished(h *harness) {
	// A run in review: one branch completed, the other parked, long before the cutoff.
	review := h.runWithKeys("review", base, nil, step("crm"), step("mail"))
	c := h.claimOne(base, "w1")
	h.mustRecord(succeed(c, at(time.Second), `{}`))
	c = h.claimOne(base, "w1")
	h.mustRecord(retry(c, at(time.Second), at(2*time.Second)))
	c = h.claimOne(at(2*time.Second), "w1")
	h.mustRecord(giveUp(c, at(3*time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	h.wantRunState(review.ID, store.StateNeedsReview)

	// A run whose failed branch would make it failed, but whose other branch waits for review.
	mixed := h.runWithKeys("mixed", at(4*time.Second), nil, step("charge"), step("notify"))
	c = h.claimOne(at(4*time.Second), "w1")
	h.mustRecord(giveUp(c, at(5*time.Second), store.OutcomePermanent, store.StateFailed, store.ReasonPermanentError))
	c = h.claimOne(at(4*time.Second), "w1")
	h.mustRecord(giveUp(c, at(5*time.Second), store.OutcomeUnknown, store.StateNeedsReview, store.ReasonOutcomeUnknown))
	h.wantRunState(mixed.ID, store.StateNeedsReview)

	// Runs still at work: retrying, processing, pending.
	retrying := h.run("retrying", step("a"))
	c = h.claimOne(at(6*time.Second), "w1")
	h.mustRecord(retry(c, at(7*time.Second), at(time.Hour*24*365)))
	processing := h.run("processing", step("a"))
	h.claimOne(at(8*time.Second), "w1")
	pending := h.run("pending", step("a"), step("b", "a"))
	c = h.claimOne(at(9*time.Second), "w1")
	h.mustRecord(succeed(c, at(10*time.Second), `{}`))

	unfinished := []*store.Run{review, mixed, retrying, processing, pending}
	before := map[int64]string{}
	for _, r := range unfinished {
		before[r.ID] = h.snapshot(r.ID)
	}
	h.wantReport("purge", h.purge(store.RetentionPurgeParams{RunsBefore: purgeNow}), store.PurgeReport{})
	for _, r := range unfinished {
		wantEqual(h.t, "run "+r.RunKey+" after the purge", h.snapshot(r.ID), before[r.ID])
	}
}

func testPurgeLedger(h *harness) {
	expired := at(90 * 24 * time.Hour)
	h.completeRun("forever", "K-forever", base, time.Time{})
	h.completeRun("expired", "K-expired", at(time.Minute), expired)
	h.completeRun("at-now", "K-at-now", at(2*time.Minute), purgeNow)
	h.completeRun("unexpired", "K-unexpired", at(3*time.Minute), purgeNow.Add(time.Second))
	h.wantTime("stored RetainUntil", h.effect("K-expired").RetainUntil, expired)
	if e := h.effect("K-forever"); !e.RetainUntil.IsZero() {
		h.t.Errorf("RetainUntil of a key kept forever = %s, want zero", e.RetainUntil)
	}
	// In flight, under an expired lease: the effect may exist, so the key stays.
	h.runWithKeys("in-flight", at(4*time.Minute), map[string]string{"send": "K-in-flight"}, step("send"))
	h.claimOne(at(4*time.Minute), "w1")

	want := h.wouldPurge(nil, "K-expired", "K-at-now")
	got := h.purge(store.RetentionPurgeParams{}) // no RunsBefore: runs are kept
	h.wantReport("purge", got, want)
	h.wantNoEffect("K-expired")
	h.wantNoEffect("K-at-now")
	for _, k := range []string{"K-forever", "K-unexpired"} {
		if e := h.effect(k); e.State != store.EffectCompleted {
			h.t.Errorf("effect %s = %s, want completed", k, e.State)
		}
	}
	wantEqual(h.t, "in-flight key", h.effect("K-in-flight").State, store.EffectInFlight)
	wantEqual(h.t, "runs after a purge without RunsBefore", len(h.listRuns()), 5)

	// That is what a retention means: a purged key is free, and a new run acts again.
	again := h.runWithKeys("again", purgeNow, map[string]string{"send": "K-expired"}, step("send"))
	res := h.claim(store.StepClaimParams{Now: purgeNow, Owner: "w2"})
	h.wantClaimed(res, 0, 0, 0, h.step(again.ID, "send"))
	h.wantEffect("K-expired", store.EffectInFlight, h.step(again.ID, "send"))
	// A key kept forever is reused, never acted on again.
	kept := h.runWithKeys("kept", purgeNow, map[string]string{"send": "K-forever", "send.fp": "F"}, step("send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: purgeNow, Owner: "w2"}), 1, 0, 0)
	h.wantStep(kept.ID, "send", store.StateCompleted, 0, store.ReasonEffectReused)
}

// listRuns lists every run.
func (h *harness) listRuns() []*store.Run {
	h.t.Helper()
	runs, err := h.s.RunList(h.ctx, store.RunListParams{Limit: 1000})
	if err != nil {
		h.t.Fatalf("RunList: %v", err)
	}
	return runs
}

func testPurgeLedgerKeptForUnfinished(h *harness) {
	expired := at(time.Hour)
	// The run that completed K-own waits for review in another step.
	own := h.runWithKeys("own", base, map[string]string{"send": "K-own"}, step("send"), step("other"))
	c := h.claimOne(base, "w1")
	p := succeed(c, at(time.Second), `{}`)
	p.RetainUntil = expired
	h.mustRecord(p)
	c = h.claimOne(base, "w1")
	h.mustRecord(giveUp(c, at(2*time.Second), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	h.wantRunState(own.ID, store.StateNeedsReview)

	// K-shared was completed by a finished run, and another run parked on it with a
	// different request: the person who reviews it must still find the completed effect.
	h.completeRun("done", "K-shared", at(3*time.Second), expired)
	conflict := h.runWithKeys("conflict", at(4*time.Second), map[string]string{"send": "K-shared", "send.fp": "G"}, step("send"))
	h.wantClaimed(h.claim(store.StepClaimParams{Now: at(4 * time.Second)}), 0, 1, 0)
	h.wantRunState(conflict.ID, store.StateNeedsReview)

	h.wantReport("purge", h.purge(store.RetentionPurgeParams{}), store.PurgeReport{})
	h.effect("K-own")
	h.effect("K-shared")
}

func testPurgeRetentionAfterLostLease(h *harness) {
	h.runWithKeys("a", base, map[string]string{"send": "K"}, step("send"))
	c := h.claimOne(base, "w1")
	n, err := h.s.StepReapExpired(h.ctx, store.StepReapParams{Now: at(time.Minute), Decide: retryAt(at(time.Hour))})
	if err != nil || n != 1 {
		h.t.Fatalf("StepReapExpired = %d, %v; want 1", n, err)
	}
	p := succeed(c, at(2*time.Minute), `{}`)
	p.RetainUntil = at(time.Hour)
	h.wantLeaseLost(p)
	e := h.effect("K")
	wantEqual(h.t, "ledger state after a lost lease's success", e.State, store.EffectCompleted)
	h.wantTime("RetainUntil kept after a lost lease", e.RetainUntil, at(time.Hour))
}

// purgeFixture builds runs and keys of every kind and returns those a purge at purgeNow
// with RunsBefore purgeCutoff deletes: of 11 runs, 8 finished before the cutoff (5 with
// expired keys, 3 with keys kept forever); 2 finished after it, with keys not yet
// expired; 1 waits for review.
func (h *harness) purgeFixture() (runs []*store.Run, keys []string) {
	h.t.Helper()
	for i := range 5 {
		key := fmt.Sprintf("K-expired-%d", i)
		runs = append(runs, h.completeRun("old-"+key, key, at(time.Duration(i)*time.Minute), at(time.Duration(i)*time.Hour)))
		keys = append(keys, key)
	}
	for i := range 3 {
		key := fmt.Sprintf("K-forever-%d", i)
		runs = append(runs, h.completeRun("old-"+key, key, at(time.Duration(10+i)*time.Minute), time.Time{}))
	}
	for i := range 2 {
		key := fmt.Sprintf("K-unexpired-%d", i)
		h.completeRun("new-"+key, key, at(2*time.Hour+time.Duration(i)*time.Minute), purgeNow.Add(24*time.Hour))
	}
	review := h.runWithKeys("review", at(30*time.Minute), nil, step("a"))
	c := h.claimOne(at(30*time.Minute), "w1")
	h.mustRecord(giveUp(c, at(31*time.Minute), store.OutcomePermanent, store.StateNeedsReview, store.ReasonPermanentError))
	h.wantRunState(review.ID, store.StateNeedsReview)
	return runs, keys
}

func testPurgeDryRun(h *harness) {
	runs, keys := h.purgeFixture()
	want := h.wouldPurge(runs, keys...)
	eventsBefore := len(h.events(store.EventListParams{Limit: 10000}))
	p := store.RetentionPurgeParams{RunsBefore: purgeCutoff, BatchSize: 3}

	dry := h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff, BatchSize: 3, DryRun: true})
	h.wantReport("dry run", dry, want)
	wantEqual(h.t, "dry run's batches", dry.Batches, 0)
	wantEqual(h.t, "events after a dry run", len(h.events(store.EventListParams{Limit: 10000})), eventsBefore)
	wantEqual(h.t, "runs after a dry run", len(h.listRuns()), 11)
	h.wantReport("second dry run", h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff, DryRun: true}), want)

	got := h.purge(p)
	h.wantReport("purge after the dry run", got, want)
	h.wantReport("purge equals dry run", got, *dry)
	if got.Batches < 3 {
		h.t.Errorf("purge of %d runs and %d keys in batches of 3 took %d batches, want at least 3", len(runs), len(keys), got.Batches)
	}
	for _, r := range runs {
		h.wantRunGone(r.ID)
	}
	wantEqual(h.t, "runs left", len(h.listRuns()), 3)
	h.wantReport("dry run after the purge", h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff, DryRun: true}), store.PurgeReport{})
}

func testPurgeAuditEvents(h *harness) {
	runs, keys := h.purgeFixture()
	want := h.wouldPurge(runs, keys...)
	got := h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff, BatchSize: 4, Actor: "ops:alice"})
	h.wantReport("purge", got, want)

	evs := h.purgeEvents()
	wantEqual(h.t, "retention.purged events", len(evs), got.Batches)
	sums := map[string]int64{}
	for i, e := range evs {
		if e.Actor != "ops:alice" || e.RunID != 0 || !e.At.Equal(purgeNow) {
			h.t.Errorf("purge event %d: actor %q run %d at %s, want ops:alice, run 0, at %s", i, e.Actor, e.RunID, e.At, purgeNow)
		}
		d := h.detailOf(e)
		if s, _ := d["runs_before"].(string); s == "" {
			h.t.Errorf("purge event %d: detail %s has no runs_before", i, e.Detail)
		} else if ts, err := time.Parse(time.RFC3339Nano, s); err != nil || !ts.Equal(purgeCutoff) {
			h.t.Errorf("purge event %d: runs_before = %q, want %s", i, s, purgeCutoff)
		}
		for _, k := range []string{"runs", "steps", "attempts", "events", "effects"} {
			n, err := d[k].(interface{ Int64() (int64, error) }).Int64()
			if err != nil {
				h.t.Fatalf("purge event %d: detail %s: %s is not a number", i, e.Detail, k)
			}
			sums[k] += n
		}
	}
	for k, n := range map[string]int{"runs": want.Runs.Count, "steps": want.Steps.Count, "attempts": want.Attempts.Count,
		"events": want.Events.Count, "effects": want.Effects.Count} {
		wantEqual(h.t, "sum of "+k+" over the purge events", sums[k], int64(n))
	}

	// A purge that finds nothing records itself too.
	h.wantReport("nothing left", h.purge(store.RetentionPurgeParams{RunsBefore: purgeCutoff, Actor: "cron"}), store.PurgeReport{})
	evs = h.purgeEvents()
	wantEqual(h.t, "purge events after an empty purge", len(evs), got.Batches+1)
	empty := h.last("purge events", evs, 1)[0]
	wantEqual(h.t, "empty purge's actor", empty.Actor, "cron")
	for _, k := range []string{"runs", "steps", "attempts", "events", "effects"} {
		wantEqual(h.t, "empty purge's "+k, fmt.Sprint(h.detailOf(empty)[k]), "0")
	}

	// A later purge with a later cutoff deletes the rest, but never the events of earlier
	// purges, which belong to no run.
	late := purgeNow.Add(1000 * 24 * time.Hour)
	last := h.purge(store.RetentionPurgeParams{Now: late, RunsBefore: late})
	wantEqual(h.t, "runs deleted by the late purge", last.Runs.Count, 2)
	wantEqual(h.t, "keys deleted by the late purge", last.Effects.Count, 2)
	wantEqual(h.t, "purge events after the late purge", len(h.purgeEvents()), len(evs)+last.Batches)
	wantEqual(h.t, "runs left", len(h.listRuns()), 1) // the one in review
}

func testPurgeConcurrent(h *harness) {
	runs, keys := h.purgeFixture()
	want := h.wouldPurge(runs, keys...)
	reports := make([]*store.PurgeReport, 4)
	errs := make([]error, len(reports))
	var wg sync.WaitGroup
	for i := range reports {
		wg.Go(func() {
			reports[i], errs[i] = h.s.RetentionPurge(h.ctx, store.RetentionPurgeParams{
				Now: purgeNow, RunsBefore: purgeCutoff, BatchSize: 1, Actor: fmt.Sprintf("purger-%d", i),
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		h.t.Fatalf("concurrent purges: %v", err)
	}
	sum := &store.PurgeReport{}
	for _, r := range reports {
		sum.Add(r)
	}
	h.wantReport("sum of concurrent purges", sum, want)
	for _, r := range runs {
		h.wantRunGone(r.ID)
	}
}
