package auditgolden

import (
	"context"
	"errors"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// The every-state story is the upgrade fixture's: BuildEveryState, told by one release,
// leaves a database holding runs in every state at EveryStateAt, when the process stops;
// the database is dumped, loaded, migrated by another release, whose engine
// FinishEveryState lets finish every run. Both halves register the same definitions
// (RegisterEveryState), as the same workflow files would.

// EveryStateAt is when BuildEveryState stops and FinishEveryState starts.
var EveryStateAt = Base.Add(time.Hour)

// RegisterEveryState registers the story's workflows and schedule on the driver's client.
func RegisterEveryState(d *Driver) {
	d.T.Helper()
	registerEveryState(d, NewGate())
}

func registerEveryState(d *Driver, gate *Gate) {
	d.T.Helper()
	act := d.Act(100 * time.Millisecond)
	one := func(name, entity, key string, s onceflow.Step) onceflow.Workflow {
		s.ID, s.EffectKey = "do", key
		if s.Do == nil {
			s.Do = act
		}
		return onceflow.Workflow{Name: name, Entity: entity, Steps: []onceflow.Step{s}}
	}
	d.Register(
		onceflow.Workflow{Name: "orders", Entity: "order:{input.order}", Steps: []onceflow.Step{
			{ID: "reserve", EffectKey: "reserve:{input.order}", Do: act},
			{ID: "charge", Needs: []string{"reserve"}, EffectKey: "charge:{input.order}", Do: act},
			{ID: "notify", Needs: []string{"charge"}, EffectKey: "notify:{input.order}", Do: act},
		}},
		onceflow.Workflow{Name: "trial", Entity: "account:{input.account}", Steps: []onceflow.Step{
			{ID: "welcome", EffectKey: "welcome:{input.account}", Do: act},
			{ID: "upsell", Needs: []string{"welcome"}, EffectKey: "upsell:{input.account}", Do: act,
				When: func(*onceflow.StepContext) (bool, error) { return false, nil }},
			{ID: "nudge", Needs: []string{"welcome"}, EffectKey: "nudge:{input.account}", Delay: 90 * time.Minute, Do: act},
		}},
		onceflow.Workflow{Name: "export", Entity: "export:{input.export}", Steps: []onceflow.Step{
			{ID: "upload", EffectKey: "upload:{input.export}", OnFailure: onceflow.Fail,
				Do: func(context.Context, *onceflow.StepContext) (any, error) {
					return nil, onceflow.PermanentError(errors.New("bucket not found (404)"))
				}},
			{ID: "announce", Needs: []string{"upload"}, EffectKey: "announce:{input.export}", Do: act},
		}},
		onceflow.Workflow{Name: "refund", Entity: "refund:{input.refund}", Steps: []onceflow.Step{
			{ID: "approve", EffectKey: "approve:{input.refund}", Do: act},
			{ID: "pay", Needs: []string{"approve"}, EffectKey: "pay:{input.refund}", Do: act},
		}},
		one("payment", "payment:{input.payment}", "capture:{input.payment}", onceflow.Step{OnUnknown: onceflow.ReviewUnknown,
			Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				if sc.Attempt == 1 {
					d.Dest.Act(sc.EffectKey)
					return nil, onceflow.UnknownOutcomeError(errors.New("connection reset after the request was sent"))
				}
				return act(ctx, sc)
			}}),
		onceflow.Workflow{Name: "shipment", Entity: "parcel:{input.parcel}", Steps: []onceflow.Step{
			{ID: "label", EffectKey: "label:{input.parcel}", Do: act},
			{ID: "dispatch", Needs: []string{"label"}, EffectKey: "dispatch:{input.parcel}",
				Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
					var in struct {
						AddressOK bool `json:"address_ok"`
					}
					if err := sc.DecodeInput(&in); err != nil {
						return nil, err
					}
					if !in.AddressOK {
						return nil, onceflow.PermanentError(errors.New("carrier refused the address (422)"))
					}
					return act(ctx, sc)
				}},
		}},
		one("digest", "team:{input.team}", "digest:{input.team}:{input.week}", onceflow.Step{}),
		one("invoice", "invoice:{input.invoice}", "send:{input.invoice}", onceflow.Step{
			Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				if sc.RunKey == "inv-late" && sc.Attempt == 1 {
					gate.Pass(ctx)
				}
				return act(ctx, sc)
			}}),
		one("sync", "account:{input.account}", "push:{input.account}", onceflow.Step{
			Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				if sc.Attempt == 1 {
					return nil, onceflow.RetryAfterError(errors.New("rate limited (429)"), 75*time.Minute)
				}
				return act(ctx, sc)
			}}),
		one("reminder", "account:{input.account}", "remind:{input.account}", onceflow.Step{Delay: 2 * time.Hour}),
		one("transfer", "transfer:{input.transfer}", "transfer:{input.transfer}", onceflow.Step{}),
		one("newsletter", "list:{input.list}", "newsletter:{input.list}:{input.issue}", onceflow.Step{}),
		one("report", "", "report:{run.key}", onceflow.Step{}),
	)
	d.Schedule(onceflow.Schedule{Name: "report-20m", Workflow: "report", Cron: "*/20 * * * *"})
}

// BuildEveryState tells the first half of the story on a fresh driver and leaves the clock
// at EveryStateAt: runs completed (one of them purged, its key still completed), failed,
// cancelled, with a skipped step, re-keyed by a correction, completed by a late success
// after the reaper took the lease; runs waiting behind a delay, retrying after a
// Retry-After, paused, in review after a permanent error and after an unknown outcome
// (key held); steps in flight under an expired lease and a live one; a schedule that fired.
func BuildEveryState(d *Driver) {
	d.T.Helper()
	gate := NewGate()
	registerEveryState(d, gate)
	d.Fire() // the schedule starts from 09:00

	// Completed, then purged: the ledger keeps its key (kept forever).
	d.Start("digest", "digest-t1-w9", map[string]any{"team": "t-1", "week": "2026-W09"})
	d.Work()
	d.Advance(20 * time.Minute)
	now := d.Clock.Now()
	_, err := d.Store.RetentionPurge(d.Ctx, store.RetentionPurgeParams{Now: now, RunsBefore: now.Add(-10 * time.Minute), Actor: "retention-job"})
	d.Check("purge", err)

	d.Start("orders", "order-1", map[string]any{"order": "o-1"})
	d.Start("trial", "trial-1", map[string]any{"account": "a-1"})
	d.Start("export", "export-1", map[string]any{"export": "e-1"})
	refund := d.Start("refund", "refund-1", map[string]any{"refund": "r-1"})
	_, err = d.Client.CancelRun(d.Ctx, refund.ID, "ops-desk", "request withdrawn")
	d.Check("cancel", err)
	d.Start("payment", "payment-1", map[string]any{"payment": "p-1"})
	rekeyed := d.Start("shipment", "ship-1", map[string]any{"parcel": "s-1", "address_ok": false})
	d.Start("shipment", "ship-2", map[string]any{"parcel": "s-2", "address_ok": false})
	d.Work()
	d.Advance(time.Minute)
	_, err = d.Client.ReviewReplay(d.Ctx, onceflow.ReplayRequest{RunID: rekeyed.ID, Step: "dispatch",
		MergePatch: raw(`{"parcel": "s-1b", "address_ok": true}`), Actor: "ops-desk", Note: "parcel relabelled"})
	d.Check("replay", err)
	d.Work()

	// A late success after the reaper took the lease: kept.
	d.Advance(time.Minute)
	d.Start("invoice", "inv-late", map[string]any{"invoice": "i-1"})
	wait := d.WorkLater()
	gate.Arrived(d.T)
	d.Advance(31 * time.Second)
	if n := d.Reap(); n != 1 {
		d.T.Fatalf("reaped %d, want 1", n)
	}
	gate.Open()
	wait()

	d.Advance(2 * time.Minute) // 09:25
	d.Fire()
	d.Start("sync", "sync-1", map[string]any{"account": "a-2"})
	d.Start("reminder", "remind-1", map[string]any{"account": "a-3"})
	d.Check("pause", pause(d, "newsletter"))
	d.Start("newsletter", "issue-12", map[string]any{"list": "l-1", "issue": 12})
	d.Work()

	d.Advance(20 * time.Minute) // 09:45
	d.Fire()
	d.Work()
	// In flight: a worker that vanished (its lease expires at 09:46:30) and one still at
	// work when the process stops (its lease runs to 10:28).
	claim := func(key, owner string, lease time.Duration) {
		d.T.Helper()
		d.Start("transfer", key, map[string]any{"transfer": key})
		res, err := d.Store.StepClaim(d.Ctx, store.StepClaimParams{Owner: owner, Now: d.Clock.Now(), LeaseFor: lease, Limit: 1,
			Workflows: []string{"transfer"},
			Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) {
				return store.EffectSpec{Key: "transfer:" + key}, nil
			}})
		if err != nil || len(res.Claimed) != 1 {
			d.T.Fatalf("claim %s by %s: %+v, %v", key, owner, res, err)
		}
	}
	claim("x-1", "vanished-worker", 90*time.Second)
	d.Advance(13 * time.Minute) // 09:58
	claim("x-2", "other-worker", 30*time.Minute)
	d.Advance(EveryStateAt.Sub(d.Clock.Now()))
}

func pause(d *Driver, workflow string) error {
	_, err := d.Client.PauseWorkflow(d.Ctx, workflow, "ops-desk", "list under review")
	return err
}

// FinishEveryState tells the second half of the story, from EveryStateAt, on a driver
// whose database BuildEveryState left (migrated since), with RegisterEveryState done, and
// fails the test unless every run ends completed, failed or cancelled.
func FinishEveryState(d *Driver) {
	d.T.Helper()
	if n := d.Reap(); n != 1 { // x-1's lease expired at 09:46:30
		d.T.Fatalf("reaped %d at 10:00, want 1", n)
	}
	d.Fire() // the 10:00 tick
	d.Work()
	ship := mustRun(d, "shipment", "ship-2")
	_, err := d.Client.ReviewReplay(d.Ctx, onceflow.ReplayRequest{RunID: ship, Step: "dispatch",
		MergePatch: raw(`{"parcel": "s-2b", "address_ok": true}`), Actor: "ops-desk", Note: "parcel relabelled"})
	d.Check("replay", err)
	_, err = d.Client.ReviewResolve(d.Ctx, onceflow.ReviewAction{RunID: mustRun(d, "payment", "payment-1"), Step: "do",
		Actor: "ops-desk", Note: "the processor shows the capture", ItHappened: true})
	d.Check("resolve", err)
	_, err = d.Client.ResumeWorkflow(d.Ctx, "newsletter", "ops-desk", "list approved")
	d.Check("resume", err)
	// The purged run's key is still completed: this run reuses it.
	d.Start("digest", "digest-t1-w9-again", map[string]any{"team": "t-1", "week": "2026-W09"})
	d.Work()

	d.Advance(150 * time.Minute) // 12:30
	if n := d.Reap(); n != 1 {   // x-2's lease ran to 10:28
		d.T.Fatalf("reaped %d at 12:30, want 1", n)
	}
	d.Fire()
	d.Work()

	runs, err := d.Store.RunList(d.Ctx, store.RunListParams{Limit: 1000})
	d.Check("runs", err)
	for _, r := range runs {
		switch r.State {
		case store.StateCompleted, store.StateFailed, store.StateCancelled:
		default:
			d.T.Errorf("run %d (%s %s) is %s after the engine finished", r.ID, r.Workflow, r.RunKey, r.State)
		}
	}
}

func mustRun(d *Driver, workflow, key string) int64 {
	d.T.Helper()
	r, err := d.Store.RunGetByKey(d.Ctx, workflow, key)
	d.Check("run "+key, err)
	return r.ID
}
