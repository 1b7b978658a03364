package auditgolden

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/triggers/queue"
)

// Scenario is one story of the golden audit test.
type Scenario struct {
	// Name names its golden files.
	Name string
	// About says what it covers.
	About string
	// Run tells the story to a fresh driver.
	Run func(d *Driver)
	// Twice lists the effect keys the story performs twice on purpose (a key whose
	// retention ended is performed again); every other key is performed at most once.
	Twice []string
}

// Scenarios lists the golden audit test's scenarios. A scenario, once its golden files are
// committed, is never changed (that would change its audit trail); new coverage is a new
// scenario with golden files of its own.
func Scenarios() []Scenario {
	return []Scenario{
		{"happy-path", "a 3-step chain completes", happyPath, nil},
		{"delay-and-skip", "a delayed step and a step whose condition is false", delayAndSkip, nil},
		{"retries", "a retryable error twice with backoff, once with a Retry-After, then a success", retries, nil},
		{"ledger-reuse", "a key completed by one run is reused by another (another workflow); a different request under it is a conflict", ledgerReuse, nil},
		{"reaped-lease", "a lease expires and is reaped, the late success is kept and reused; a vanished worker's step is retried with its key", reapedLease, nil},
		{"review-replay", "a permanent error parks a step; a correction that changes the entity is replayed and completes", reviewReplay, nil},
		{"review-actions", "review items retried by hand, resolved by hand and abandoned", reviewActions, nil},
		{"cancel", "a run cancelled with a step in flight and steps pending; the in-flight record arrives after", cancel, nil},
		{"schedules", "late and skipped ticks under catch_up all and latest, an on-time tick, a fan-out over a list", schedules, nil},
		{"queue-rejections", "queue messages: one started, a redelivery, and rejected ones kept for review", queueRejections, nil},
		{"retention-purge", "a finished run and an expired key purged, a run in review kept, the key performed again", retentionPurge, []string{"digest:t-1:2026-W09"}},
		{"repeated-start", "a start repeated with the same input and with another one", repeatedStart, nil},
	}
}

// Act returns a step function that takes latency on the clock and performs its effect at
// the destination.
func (d *Driver) Act(latency time.Duration) onceflow.StepFunc {
	return func(_ context.Context, sc *onceflow.StepContext) (any, error) {
		d.Clock.Advance(latency)
		sc.RecordResponse(200, "ok")
		return d.Dest.Act(sc.EffectKey), nil
	}
}

// Due moves the clock to the time the step of run is due, and fails the test unless it is
// in the future.
func (d *Driver) Due(runID int64, step string) {
	d.T.Helper()
	steps, err := d.Store.StepListByRun(d.Ctx, runID)
	d.Check("steps", err)
	for _, s := range steps {
		if s.Name == step {
			wait := s.NextAt.Sub(d.Clock.Now())
			if wait <= 0 {
				d.T.Fatalf("run %d step %s is due already (%v)", runID, step, s.NextAt)
			}
			d.Advance(wait)
			return
		}
	}
	d.T.Fatalf("run %d has no step %s", runID, step)
}

func happyPath(d *Driver) {
	d.Register(onceflow.Workflow{Name: "orders", Entity: "order:{input.order_id}", RequiredInput: []string{"order_id"},
		Steps: []onceflow.Step{
			{ID: "reserve", EffectKey: "reserve:{input.order_id}", Do: d.Act(120 * time.Millisecond)},
			{ID: "charge", Needs: []string{"reserve"}, EffectKey: "charge:{input.order_id}", Do: d.Act(340 * time.Millisecond)},
			{ID: "notify", Needs: []string{"charge"}, EffectKey: "notify:{input.order_id}", Do: d.Act(80 * time.Millisecond)},
		}})
	d.Start("orders", "evt-1001", map[string]any{"order_id": 1001, "items": 2})
	d.Advance(250 * time.Millisecond)
	d.Start("orders", "evt-1002", map[string]any{"order_id": 1002, "items": 1})
	d.Advance(time.Second)
	d.Work()
}

func delayAndSkip(d *Driver) {
	d.Register(onceflow.Workflow{Name: "trial", Entity: "account:{input.account}",
		Steps: []onceflow.Step{
			{ID: "welcome", EffectKey: "welcome:{input.account}", Do: d.Act(50 * time.Millisecond)},
			{ID: "nudge", Needs: []string{"welcome"}, EffectKey: "nudge:{input.account}", Delay: 2 * time.Hour, Do: d.Act(50 * time.Millisecond)},
			{ID: "upsell", Needs: []string{"welcome"}, EffectKey: "upsell:{input.account}", Do: d.Act(50 * time.Millisecond),
				When: func(sc *onceflow.StepContext) (bool, error) {
					var in struct{ Plan string }
					err := sc.DecodeInput(&in)
					return in.Plan == "pro", err
				}},
			{ID: "survey", Needs: []string{"upsell"}, EffectKey: "survey:{input.account}", Do: d.Act(50 * time.Millisecond)},
		}})
	r := d.Start("trial", "trial-a-17", map[string]any{"account": "a-17", "plan": "basic"})
	d.Advance(time.Second)
	d.Work()
	d.StepState(r.ID, "nudge", store.StatePending)
	d.Due(r.ID, "nudge")
	d.Work()
	d.StepState(r.ID, "nudge", store.StateCompleted)
}

func retries(d *Driver) {
	d.Register(onceflow.Workflow{Name: "sync", Entity: "account:{input.account}",
		Steps: []onceflow.Step{{ID: "push", EffectKey: "push:{input.account}:{input.version}",
			Retry: onceflow.RetryPolicy{MaxAttempts: 6, Initial: 2 * time.Second, Max: time.Minute},
			Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
				d.Clock.Advance(200 * time.Millisecond)
				switch sc.Attempt {
				case 1, 2:
					sc.RecordResponse(503, "busy")
					return nil, errBusy
				case 3:
					sc.RecordResponse(429, "slow down")
					return nil, onceflow.RetryAfterError(errors.New("rate limited (429)"), 45*time.Second)
				}
				sc.RecordResponse(200, "ok")
				return d.Dest.Act(sc.EffectKey), nil
			}}}})
	r := d.Start("sync", "sync-a-3-v9", map[string]any{"account": "a-3", "version": 9})
	d.Work()
	for range 3 {
		d.StepState(r.ID, "push", store.StateRetrying)
		d.Due(r.ID, "push")
		d.Work()
	}
	d.StepState(r.ID, "push", store.StateCompleted)
}

func ledgerReuse(d *Driver) {
	note := func(workflow string) onceflow.Workflow {
		return onceflow.Workflow{Name: workflow, Entity: "customer:{input.customer}",
			Steps: []onceflow.Step{{ID: "crm-note", EffectKey: "crm-note:{input.customer}", Do: d.Act(100 * time.Millisecond),
				Fingerprint: func(sc *onceflow.StepContext) (any, error) {
					var in struct{ Plan string }
					err := sc.DecodeInput(&in)
					return map[string]any{"plan": in.Plan}, err
				}}}}
	}
	d.Register(note("signup"), note("resubmit"))
	first := d.Start("signup", "form-71", map[string]any{"customer": "c-71", "plan": "basic"})
	d.Work()
	d.Advance(time.Minute)
	again := d.Start("resubmit", "form-71-again", map[string]any{"customer": "c-71", "plan": "basic"})
	d.Work()
	d.Advance(time.Minute)
	other := d.Start("signup", "form-72", map[string]any{"customer": "c-71", "plan": "pro"})
	d.Work()
	d.StepState(first.ID, "crm-note", store.StateCompleted)
	d.StepState(again.ID, "crm-note", store.StateCompleted)
	d.StepState(other.ID, "crm-note", store.StateNeedsReview)
}

func reapedLease(d *Driver) {
	gate := NewGate()
	d.Register(onceflow.Workflow{Name: "invoice", Entity: "invoice:{input.invoice}",
		Steps: []onceflow.Step{{ID: "send", EffectKey: "send:{input.invoice}",
			Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				if sc.Attempt == 1 && sc.RunKey == "inv-1" {
					gate.Pass(ctx)
				}
				return d.Act(100*time.Millisecond)(ctx, sc)
			}}}})
	late := d.Start("invoice", "inv-1", map[string]any{"invoice": "i-1"})
	wait := d.WorkLater()
	gate.Arrived(d.T)
	d.Advance(31 * time.Second)
	if n := d.Reap(); n != 1 {
		d.T.Fatalf("reaped %d steps, want 1", n)
	}
	gate.Open()
	wait()
	d.StepState(late.ID, "send", store.StateCompleted)

	// A worker claims a step and vanishes: the reaper retries it with the same key.
	d.Advance(time.Minute)
	gone := d.Start("invoice", "inv-2", map[string]any{"invoice": "i-2"})
	res, err := d.Store.StepClaim(d.Ctx, store.StepClaimParams{Owner: "vanished-worker", Now: d.Clock.Now(), LeaseFor: 30 * time.Second,
		Limit: 1, Workflows: []string{"invoice"},
		Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "send:i-2"}, nil }})
	if err != nil || len(res.Claimed) != 1 {
		d.T.Fatalf("claim by the vanished worker: %+v, %v", res, err)
	}
	d.Advance(45 * time.Second)
	if n := d.Reap(); n != 1 {
		d.T.Fatalf("reaped %d steps, want 1", n)
	}
	d.Work()
	d.StepState(gone.ID, "send", store.StateCompleted)
}

func reviewReplay(d *Driver) {
	d.Register(onceflow.Workflow{Name: "shipment", Entity: "parcel:{input.parcel}",
		Steps: []onceflow.Step{
			{ID: "label", EffectKey: "label:{input.parcel}", Do: d.Act(100 * time.Millisecond)},
			{ID: "dispatch", Needs: []string{"label"}, EffectKey: "dispatch:{input.parcel}",
				Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
					var in struct {
						AddressOK bool `json:"address_ok"`
					}
					if err := sc.DecodeInput(&in); err != nil {
						return nil, err
					}
					if !in.AddressOK {
						d.Clock.Advance(100 * time.Millisecond)
						sc.RecordResponse(422, "address rejected")
						return nil, onceflow.PermanentError(errors.New("carrier refused the address (422)"))
					}
					return d.Act(100*time.Millisecond)(ctx, sc)
				}},
		}})
	r := d.Start("shipment", "ship-5", map[string]any{"parcel": "p-5", "address_ok": false})
	d.Work()
	d.StepState(r.ID, "dispatch", store.StateNeedsReview)
	d.Advance(10 * time.Minute)
	_, err := d.Client.ReviewReplay(d.Ctx, onceflow.ReplayRequest{RunID: r.ID, Step: "dispatch",
		MergePatch: raw(`{"parcel": "p-5b", "address_ok": true}`), Actor: "ops-desk", Note: "address corrected, parcel relabelled"})
	d.Check("replay", err)
	d.Advance(time.Second)
	d.Work()
	d.StepState(r.ID, "dispatch", store.StateCompleted)
}

func reviewActions(d *Driver) {
	d.Register(onceflow.Workflow{Name: "payout", Entity: "payout:{input.payout}",
		Steps: []onceflow.Step{
			{ID: "transfer", EffectKey: "transfer:{input.payout}", Retry: onceflow.RetryPolicy{MaxAttempts: 1},
				Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
					if sc.Attempt == 1 {
						d.Clock.Advance(100 * time.Millisecond)
						return nil, errBusy
					}
					return d.Act(100*time.Millisecond)(ctx, sc)
				}},
			{ID: "receipt", Needs: []string{"transfer"}, EffectKey: "receipt:{input.payout}", Do: d.Act(50 * time.Millisecond)},
		}})
	var runs []int64
	for _, p := range []string{"po-1", "po-2", "po-3"} {
		runs = append(runs, d.Start("payout", p, map[string]any{"payout": p}).ID)
	}
	d.Work()
	for _, id := range runs {
		d.StepState(id, "transfer", store.StateNeedsReview)
	}
	d.Advance(5 * time.Minute)
	_, err := d.Client.ReviewRetry(d.Ctx, onceflow.ReviewAction{RunID: runs[0], Step: "transfer", Actor: "ops-desk", Note: "bank is back"})
	d.Check("retry", err)
	d.Advance(time.Minute)
	_, err = d.Client.ReviewResolve(d.Ctx, onceflow.ReviewAction{RunID: runs[1], Step: "transfer", Actor: "ops-desk",
		Note: "paid by hand", Output: map[string]any{"reference": "manual-2"}})
	d.Check("resolve", err)
	d.Advance(time.Minute)
	_, err = d.Client.ReviewAbandon(d.Ctx, onceflow.ReviewAction{RunID: runs[2], Step: "transfer", Actor: "ops-desk", Note: "payout withdrawn"})
	d.Check("abandon", err)
	d.Advance(time.Second)
	d.Work()
	d.StepState(runs[0], "receipt", store.StateCompleted)
	d.StepState(runs[1], "receipt", store.StateCompleted)
	d.StepState(runs[2], "receipt", store.StateCancelled)
}

func cancel(d *Driver) {
	gate := NewGate()
	d.Register(onceflow.Workflow{Name: "refund", Entity: "refund:{input.refund}",
		Steps: []onceflow.Step{
			{ID: "approve", EffectKey: "approve:{input.refund}", Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				gate.Pass(context.WithoutCancel(ctx))
				return d.Act(100*time.Millisecond)(ctx, sc)
			}},
			{ID: "ledger", EffectKey: "ledger:{input.refund}", Do: d.Act(100 * time.Millisecond)},
			{ID: "email", Needs: []string{"approve"}, EffectKey: "email:{input.refund}", Do: d.Act(100 * time.Millisecond)},
		}})
	r := d.Start("refund", "refund-9", map[string]any{"refund": "rf-9"})
	d.Advance(time.Second)
	wait := d.WorkLater()
	gate.Arrived(d.T)
	d.Advance(2 * time.Second)
	res, err := d.Client.CancelRun(d.Ctx, r.ID, "ops-desk", "customer withdrew the request")
	d.Check("cancel", err)
	if strings.Join(res.Running, ",") != "approve" {
		d.T.Fatalf("cancel: running %v, want [approve]", res.Running)
	}
	gate.Open()
	wait()
	d.StepState(r.ID, "approve", store.StateCancelled)
	d.StepState(r.ID, "ledger", store.StateCancelled)
}

func schedules(d *Driver) {
	d.Register(onceflow.Workflow{Name: "report", Steps: []onceflow.Step{{ID: "build", Do: d.Act(time.Second)}}},
		onceflow.Workflow{Name: "invoicing", Entity: "customer:{input.item.customer}",
			Steps: []onceflow.Step{{ID: "bill", EffectKey: "bill:{input.item.customer}:{input.schedule.period}", Do: d.Act(200 * time.Millisecond)}}})
	d.Schedule(onceflow.Schedule{Name: "hourly-report", Workflow: "report", Cron: "0 * * * *", CatchUp: onceflow.CatchUpAll, MaxCatchUp: 2})
	d.Schedule(onceflow.Schedule{Name: "daily-invoices", Workflow: "invoicing", Cron: "0 12 * * *", Timezone: "Europe/Berlin",
		RunKey: "invoice:{item.customer}:{schedule.period}",
		ForEach: &onceflow.FanOut{Fetch: func(_ context.Context, _ onceflow.Tick, cursor string) (onceflow.FanOutPage, error) {
			// One item a page, so that the items' runs are started in order.
			switch cursor {
			case "":
				return onceflow.FanOutPage{Items: []json.RawMessage{raw(`{"customer": "c-1"}`)}, Next: "2"}, nil
			case "2":
				return onceflow.FanOutPage{Items: []json.RawMessage{raw(`{"customer": "c-2"}`)}, Next: "3"}, nil
			}
			return onceflow.FanOutPage{Items: []json.RawMessage{raw(`"not an object"`)}}, nil
		}}})
	d.Advance(5 * time.Minute) // 09:05: the schedules start from now
	d.Fire()
	d.Advance(4*time.Hour + 25*time.Minute) // 13:30: nothing fired ticks since 09:05
	d.Fire()
	d.Work()
	d.Advance(30*time.Minute + 20*time.Second) // 14:00:20: on time
	d.Fire()
	d.Work()
}

func queueRejections(d *Driver) {
	tr, err := queue.NewHandler(queue.Config{Workflow: "orders-in", Source: "nats:ORDERS/onceflow", RunKey: "{headers.Event-Id}"}, "nats")
	d.Check("queue", err)
	// The companion's step starts the message's run again; a start refused as a conflict
	// appends its run.deduplicated with the next commit, which Flush makes the one before
	// the step's record.
	rejected := tr.Companion(d.Client)
	for i := range rejected.Steps {
		do := rejected.Steps[i].Do
		rejected.Steps[i].Do = func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			out, err := do(ctx, sc)
			if ferr := d.Client.Flush(ctx); ferr != nil {
				return nil, ferr
			}
			return out, err
		}
	}
	d.Register(onceflow.Workflow{Name: "orders-in", Entity: "order:{input.order_id}", RequiredInput: []string{"order_id"},
		Steps: []onceflow.Step{{ID: "accept", EffectKey: "accept:{input.order_id}", Do: d.Act(100 * time.Millisecond)}}},
		rejected)
	msgs := []struct {
		id, event, payload, want string
	}{
		{"m-1", "e-1", `{"order_id": 31}`, queue.Started},
		{"m-1", "e-1", `{"order_id": 31}`, queue.Duplicate},
		{"m-2", "e-2", `order 32, please`, queue.Rejected},
		{"m-3", "e-3", `{"order_id": 33, "a": ` + strings.Repeat(`{"a": `, 64) + `1` + strings.Repeat(`}`, 65), queue.Rejected},
		{"m-4", "e-4", `{"note": "no order id"}`, queue.Rejected},
		{"m-5", "e-1", `{"order_id": 35}`, queue.Rejected},
	}
	for _, m := range msgs {
		out, err := tr.Handle(d.Ctx, d.Client, queue.Message{ID: m.id, Headers: map[string]string{"Event-Id": m.event}, Payload: []byte(m.payload),
			Identity: "seq-" + m.id})
		d.Check("handle "+m.id, err)
		if out != m.want {
			d.T.Fatalf("message %s: %s, want %s", m.id, out, m.want)
		}
		d.Flush()
		d.Advance(time.Second)
	}
	d.Work()
}

func retentionPurge(d *Driver) {
	d.Register(onceflow.Workflow{Name: "digest", Entity: "team:{input.team}",
		Steps: []onceflow.Step{{ID: "mail", EffectKey: "digest:{input.team}:{input.week}", Retention: 24 * time.Hour, Do: d.Act(100 * time.Millisecond)}}},
		onceflow.Workflow{Name: "audit-export", Steps: []onceflow.Step{{ID: "upload", EffectKey: "export:{run.key}",
			Do: func(context.Context, *onceflow.StepContext) (any, error) {
				return nil, onceflow.PermanentError(errors.New("bucket not found (404)"))
			}}}})
	old := d.Start("digest", "digest-t1-w9", map[string]any{"team": "t-1", "week": "2026-W09"})
	kept := d.Start("audit-export", "export-w9", map[string]any{"week": "2026-W09"})
	d.Work()
	d.StepState(kept.ID, "upload", store.StateNeedsReview)
	d.Advance(48 * time.Hour)
	purge := func() {
		d.T.Helper()
		now := d.Clock.Now()
		rep, err := d.Store.RetentionPurge(d.Ctx, store.RetentionPurgeParams{Now: now, RunsBefore: now.Add(-24 * time.Hour), Actor: "retention-job"})
		d.Check("purge", err)
		d.T.Logf("purge: %+v", rep)
	}
	purge()
	if _, err := d.Store.RunGetByID(d.Ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
		d.T.Fatalf("run %d after the purge: %v, want it deleted", old.ID, err)
	}
	d.Advance(time.Minute)
	again := d.Start("digest", "digest-t1-w9-resend", map[string]any{"team": "t-1", "week": "2026-W09"})
	d.Work()
	d.StepState(again.ID, "mail", store.StateCompleted)
	d.Advance(time.Minute)
	purge()
}

func repeatedStart(d *Driver) {
	d.Register(onceflow.Workflow{Name: "signup", Entity: "account:{input.account}",
		Steps: []onceflow.Step{{ID: "open", EffectKey: "open:{input.account}", Do: d.Act(100 * time.Millisecond)}}})
	first := d.Start("signup", "form-501", map[string]any{"account": "a-501", "plan": "basic"})
	d.Advance(time.Second)
	if r := d.Start("signup", "form-501", map[string]any{"account": "a-501", "plan": "basic"}); !r.Duplicate || r.ID != first.ID {
		d.T.Fatalf("repeated start: %+v, want a duplicate of run %d", r, first.ID)
	}
	d.Flush()
	d.Advance(time.Second)
	_, err := d.Client.Start(d.Ctx, "signup", "form-501", map[string]any{"account": "a-501", "plan": "pro"})
	var conflict *onceflow.RunConflictError
	if !errors.As(err, &conflict) {
		d.T.Fatalf("start with another input: %v, want a RunConflictError", err)
	}
	d.Flush()
	d.Advance(time.Second)
	d.Work()
	d.Advance(time.Minute)
	if r := d.Start("signup", "form-501", map[string]any{"plan": "basic", "account": "a-501"}); !r.Duplicate {
		d.T.Fatalf("start after completion: %+v, want a duplicate", r)
	}
	d.Flush()
}
