package onceflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

// execution is one claimed step being worked on.
type execution struct {
	step   *store.Step
	cancel context.CancelCauseFunc
	log    *slog.Logger
}

// inflight tracks the steps this client is executing, for heartbeats and shutdown.
type inflight struct {
	mu    sync.Mutex
	steps map[int64]*execution
	wg    sync.WaitGroup
}

func (f *inflight) add(e *execution) {
	f.mu.Lock()
	f.steps[e.step.ID] = e
	f.mu.Unlock()
}

func (f *inflight) remove(id int64) {
	f.mu.Lock()
	delete(f.steps, id)
	f.mu.Unlock()
}

func (f *inflight) ids() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]int64, 0, len(f.steps))
	for id := range f.steps {
		ids = append(ids, id)
	}
	return ids
}

func (f *inflight) cancel(id int64, cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.steps[id]; ok {
		e.cancel(cause)
	}
}

func (f *inflight) cancelAll(cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.steps {
		e.cancel(cause)
	}
}

// Causes of an interrupted step context.
var (
	errLeaseLost = errors.New("the step's lease was lost to another worker")
	errShutdown  = errors.New("the worker is shutting down")
)

// stepContext builds what a step function sees.
func stepContext(run *store.Run, st *store.Step, outputs map[string]json.RawMessage, attempt int, prev store.Outcome) *StepContext {
	return &StepContext{
		RunID: run.ID, RunKey: run.RunKey, Workflow: run.Workflow, Entity: run.Entity,
		Step: st.Name, EffectKey: st.EffectKey, Attempt: attempt, PreviousOutcome: classOfOutcome(prev),
		Input: run.Input, Outputs: outputs,
	}
}

func classOfOutcome(o store.Outcome) ErrorClass {
	switch o {
	case store.OutcomeRetryable:
		return Retryable
	case store.OutcomePermanent:
		return Permanent
	case store.OutcomeUnknown:
		return Unknown
	}
	return ""
}

// prepare derives a candidate's effect key and fingerprint. It runs inside the claim
// transaction: no I/O.
func (c *Client) prepare(cand *store.ClaimCandidate) (store.EffectSpec, error) {
	_, sd := c.step(cand.Step.Workflow, cand.Step.Name)
	if sd == nil {
		return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonStepNotDefined,
			Err: fmt.Errorf("workflow %q has no step %q in this worker's definition", cand.Step.Workflow, cand.Step.Name)}
	}
	sc := stepContext(cand.Run, cand.Step, cand.Outputs, cand.Step.Attempt+1, cand.Step.LastOutcome)
	if due, err := dueTime(sd, cand, sc); err != nil {
		// A time the run does not have may belong to a step whose condition is false.
		if sd.When != nil {
			if ok, werr := sd.When(sc); werr == nil && !ok {
				return store.EffectSpec{Skip: store.ReasonConditionFalse}, nil
			}
		}
		return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonNotBeforeInvalid, Err: err}
	} else if due.After(c.clock.now()) {
		return store.EffectSpec{WaitUntil: due}, nil
	}
	if sd.When != nil {
		ok, err := sd.When(sc)
		if err != nil {
			return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonConditionError, Err: err}
		}
		if !ok {
			return store.EffectSpec{Skip: store.ReasonConditionFalse}, nil
		}
	}
	data, err := sc.templateData(sd.keyRoots)
	if err != nil {
		return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonInvalidKey, Err: err}
	}
	key, err := sd.effectKey.Render(data)
	if err != nil {
		return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonInvalidKey, Err: err}
	}
	if err := ValidateKey("effect key", key); err != nil {
		return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonInvalidKey, Err: err}
	}
	spec := store.EffectSpec{Key: key}
	if sd.Fingerprint != nil {
		sc.EffectKey = key
		v, err := sd.Fingerprint(sc)
		if err != nil {
			return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonFingerprintFailed, Err: err}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonFingerprintFailed, Err: err}
		}
		sum := sha256.Sum256(b)
		spec.Fingerprint = hex.EncodeToString(sum[:])
	}
	return spec, nil
}

// dueTime is when a candidate may run: Delay after it first became due (its NextAt before
// it ever waited or ran) and not before NotBefore; zero when neither applies.
func dueTime(sd *stepDef, cand *store.ClaimCandidate, sc *StepContext) (time.Time, error) {
	var due time.Time
	if st := cand.Step; sd.Delay > 0 && st.Attempt == 0 && st.Reason == "" {
		due = st.NextAt.Add(sd.Delay)
	}
	if sd.NotBefore != nil {
		t, err := sd.NotBefore(sc)
		if err != nil {
			return time.Time{}, err
		}
		if t.After(due) {
			due = t
		}
	}
	return due, nil
}

// claim hands out up to limit due steps to this client.
func (c *Client) claim(ctx context.Context, limit int) (*store.ClaimResult, error) {
	if c.writes != nil {
		// Claimed in the next batch of writes, which reports it (commitWrites).
		return c.claimSteps(ctx, limit)
	}
	now := c.now(ctx)
	res, err := c.store.StepClaim(ctx, c.claimParams(now, limit))
	if err == nil {
		c.claimed(now, res)
		if res.Parked > 0 {
			c.log.Warn("steps sent to review when claimed: a key conflict, or an effect key that cannot be built; see the review queue",
				"steps", res.Parked)
		}
		if n := len(res.Claimed) + res.Reused + res.Skipped + res.Parked + res.Waiting; n > 0 {
			c.observeCommit(CommitClaims, n, c.clock.now().Sub(now), nil)
		}
	} else {
		c.observeCommit(CommitClaims, 0, c.clock.now().Sub(now), err)
	}
	return res, err
}

// claimParams are the arguments of this client's claims at now.
func (c *Client) claimParams(now time.Time, limit int) store.StepClaimParams {
	return store.StepClaimParams{
		Owner:     c.cfg.WorkerID,
		Now:       now,
		LeaseFor:  c.cfg.LeaseFor,
		Limit:     limit,
		Workflows: c.claimable(),
		Prepare:   c.prepareMasked,
		WaitFor:   c.cfg.EffectWait,
	}
}

// execute runs one claimed step and records its result; then, while Serve claims (chain
// reports true) and the record's transaction claimed a due step for this worker
// (writeItem), that step too. base is cancelled on a hard stop.
func (c *Client) execute(base context.Context, cs *store.ClaimedStep, chain func() bool) {
	for cs != nil {
		cs = c.executeOne(base, cs, chain != nil && chain())
	}
}

// executeOne runs one claimed step and records its result. With chain set, the record's
// transaction may claim a due step for this worker, which executeOne returns.
func (c *Client) executeOne(base context.Context, cs *store.ClaimedStep, chain bool) *store.ClaimedStep {
	st := cs.Step
	log := c.log.With("run_id", cs.Run.ID, "workflow", cs.Run.Workflow, "entity", cs.Run.Entity,
		"step", st.Name, "effect_key", st.EffectKey, "attempt", st.Attempt)
	_, sd := c.step(st.Workflow, st.Name)
	if sd == nil { // the workflow list we claimed for guarantees a definition
		log.Error("claimed a step with no definition")
		return nil
	}
	sc := stepContext(cs.Run, st, cs.Outputs, st.Attempt, cs.PreviousOutcome)
	sc.clock = c.clock.now
	sc.Progress = st.Progress
	if cp, ok := c.store.(store.StepCheckpointer); ok {
		sc.checkpointer, sc.checkpointAt = cp, store.StepCheckpointParams{StepID: st.ID, Owner: c.cfg.WorkerID, Attempt: st.Attempt}
	}
	ctx, cancel := context.WithCancelCause(base)
	ctx, cancelTimeout := context.WithTimeout(ctx, sd.Timeout)
	c.inflight.add(&execution{step: st, cancel: cancel, log: log})
	started := c.clock.now()
	out, err := callStep(ctx, sd.Do, sc)
	cause := context.Cause(ctx)
	cancelTimeout()
	cancel(nil)
	c.inflight.remove(st.ID)

	p := c.decide(sd, st, out, err, cause)
	if p.ResponseStatus == 0 && p.ResponseExcerpt == "" {
		p.ResponseStatus, p.ResponseExcerpt = sc.respStatus, sc.respExcerpt
	}
	req := sc.request
	if se := (*StepError)(nil); errors.As(err, &se) && se.Request != nil {
		req = se.Request
	}
	m := c.masker(cs.Run, cs.Outputs)
	p.Request = encodeRequest(maskRequest(m, req))
	c.scrub(m, &p)
	c.observeAttempt(st, p.Outcome, c.clock.now().Sub(started))
	ok, next := c.record(log, p, chain)
	if ok {
		logAttempt(log, p, c.clock.now().Sub(started))
	}
	return next
}

// logAttempt logs a recorded attempt at the level its decision deserves: a step that now
// waits for a person, failed for good or whose outcome is unknown is a warning; a retry is
// information; the rest is debug detail.
func logAttempt(log *slog.Logger, p store.StepRecordParams, took time.Duration) {
	args := []any{"outcome", p.Outcome, "next_state", p.NextState, "reason", p.Reason, "duration", took}
	if p.Error != "" {
		args = append(args, "error", p.Error)
	}
	switch {
	case p.NextState == store.StateNeedsReview:
		log.Warn("step waits for review", args...)
	case p.NextState == store.StateFailed:
		log.Warn("step failed", args...)
	case p.Outcome == store.OutcomeUnknown:
		log.Warn("attempt outcome unknown; the step will be retried with the same effect key",
			append(args, "retry_in", p.NextAt.Sub(p.Now))...)
	case p.NextState == store.StateRetrying:
		log.Info("attempt failed; the step will be retried", append(args, "retry_in", p.NextAt.Sub(p.Now))...)
	default:
		log.Debug("step attempt finished", args...)
	}
}

// callStep runs fn, turning a panic into a retryable error.
func callStep(ctx context.Context, fn StepFunc, sc *StepContext) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("step panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(ctx, sc)
}

// decide turns an attempt's result into the step's next state, by the step's policy.
func (c *Client) decide(sd *stepDef, st *store.Step, out any, err error, cause error) store.StepRecordParams {
	now := c.clock.now()
	p := store.StepRecordParams{StepID: st.ID, Owner: c.cfg.WorkerID, Attempt: st.Attempt, Now: now, Actor: c.cfg.WorkerID}
	if sd.Retention > 0 {
		p.RetainUntil = now.Add(sd.Retention) // kept with the ledger row if this completes it
	}
	var se *StepError
	if errors.As(err, &se) {
		p.ResponseStatus, p.ResponseExcerpt = se.ResponseStatus, se.ResponseExcerpt
	}
	if err == nil {
		b, merr := encodeOutput(out)
		if merr == nil {
			p.Complete(b)
			return p
		}
		// The effect happened: keep its key held and let a person decide.
		p.Park(store.OutcomeSuccess, store.ReasonOutputInvalid, nil)
		p.Error = fmt.Sprintf("the step succeeded but its output cannot be stored as JSON: %v", merr)
		return p
	}
	p.Error = err.Error()
	if errors.Is(cause, errShutdown) {
		// Interrupted by shutdown: release it for the next worker, same key.
		p.Retry(store.OutcomeUnknown, now, store.ReasonWorkerShutdown, nil)
		return p
	}
	// The policy that decided, for the audit event of a failure.
	policy := map[string]any{"max_attempts": sd.retry.MaxAttempts, "initial": sd.retry.Initial.String(),
		"max": sd.retry.Max.String(), "multiplier": sd.retry.Multiplier, "max_retry_after": sd.retry.MaxRetryAfter.String(),
		"on_failure": string(sd.OnFailure), "on_unknown": string(sd.OnUnknown)}
	// A manual retry or replay starts a fresh budget: count the attempts since then.
	counted := st.Attempt - st.AttemptBase
	if st.AttemptBase > 0 {
		policy["attempt_base"] = st.AttemptBase
	}
	exhausted := counted >= sd.retry.MaxAttempts
	// giveUp ends the attempts as the step's on_failure says: review, or failed.
	giveUp := func(outcome store.Outcome, reason store.Reason, detail map[string]any) {
		if sd.OnFailure == Fail {
			p.Fail(outcome, reason, detail)
		} else {
			p.Park(outcome, reason, detail)
		}
	}
	// retry makes the step due again after the backoff, or after the destination's
	// Retry-After when it gave one.
	retry := func(outcome store.Outcome, reason store.Reason, after time.Duration) {
		delay := sd.retry.curve().Delay(counted, c.cfg.Rand())
		d := map[string]any{"policy": policy, "backoff": delay.String()}
		if after > 0 {
			delay = after
			d["retry_after"] = after.String()
		}
		p.Retry(outcome, now.Add(delay), reason, d)
	}
	switch ClassOf(err) {
	case Skipped:
		reason := se.Reason
		if reason == "" {
			reason = store.ReasonNothingToDo
		}
		p.Skip(reason)
	case Permanent:
		reason := store.ReasonPermanentError
		if se != nil && se.Reason != "" {
			reason = se.Reason
		}
		giveUp(store.OutcomePermanent, reason, map[string]any{"policy": policy})
	case Unknown:
		switch {
		case sd.OnUnknown == ReviewUnknown:
			p.Park(store.OutcomeUnknown, store.ReasonOutcomeUnknown, map[string]any{"policy": policy})
		case exhausted:
			p.Park(store.OutcomeUnknown, store.ReasonOutcomeUnknown, map[string]any{"policy": policy, "attempts_exhausted": true})
		default:
			retry(store.OutcomeUnknown, store.ReasonOutcomeUnknown, 0)
		}
	default:
		var after time.Duration
		if se != nil {
			after = se.RetryAfter
		}
		switch {
		case exhausted:
			giveUp(store.OutcomeRetryable, store.ReasonAttemptsExhausted, map[string]any{"policy": policy})
		case after > sd.retry.MaxRetryAfter:
			// Honouring it would leave the step retrying for as long as the destination
			// says — years — with nobody told. The effect did not happen: a person decides
			// when to try again.
			p.Park(store.OutcomeRetryable, store.ReasonRetryAfterTooLong,
				map[string]any{"policy": policy, "retry_after": after.String(), "max_retry_after": sd.retry.MaxRetryAfter.String()})
			p.Error = fmt.Sprintf("%s; the destination asked to be tried again in %s, longer than the retry policy's max_retry_after %s: waits for review",
				p.Error, after, sd.retry.MaxRetryAfter)
		default:
			retry(store.OutcomeRetryable, store.ReasonRetryableError, after)
		}
	}
	return p
}

func encodeOutput(out any) (json.RawMessage, error) {
	switch v := out.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, errors.New("the json.RawMessage is not valid JSON")
		}
		return v, nil
	}
	return json.Marshal(out)
}

// record stores an attempt's result, retrying briefly if the database is unavailable. If
// it cannot, the lease expires and the reaper retries the step with the same key. It
// reports whether the decision was applied to the step, and returns the step its
// transaction claimed for this worker when chain is set (writeItem).
func (c *Client) record(log interface {
	Error(string, ...any)
	Warn(string, ...any)
	Info(string, ...any)
}, p store.StepRecordParams, chain bool) (bool, *store.ClaimedStep) {
	delay := 50 * time.Millisecond
	for i := 0; ; i++ {
		// Group-committed with the results of the other steps finishing now: this returns
		// once the transaction holding this record has committed.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.recordStep(ctx, p, chain)
		cancel()
		entryErr := res.err
		if err == nil {
			switch {
			case errors.Is(entryErr, store.ErrStepCancelled):
				log.Info("attempt recorded; its run was cancelled while it ran, so the step stays cancelled", "outcome", p.Outcome)
			case errors.Is(entryErr, store.ErrLeaseLost):
				log.Warn("result recorded after the lease was lost", "error", entryErr)
			case entryErr != nil:
				log.Error("the attempt's record was refused", "error", entryErr)
			}
			c.poke()
			return entryErr == nil, res.next
		}
		if i == 5 {
			log.Error("could not record the attempt; the lease will expire and the step will be retried with the same effect key", "error", err)
			return false, nil
		}
		time.Sleep(delay)
		delay *= 2
	}
}

// heartbeat extends the leases of running steps and interrupts those it lost.
func (c *Client) heartbeat(ctx context.Context) {
	ids := c.inflight.ids()
	if len(ids) == 0 {
		return
	}
	lost, err := c.store.StepHeartbeat(ctx, store.StepHeartbeatParams{Owner: c.cfg.WorkerID, Now: c.now(ctx), LeaseFor: c.cfg.LeaseFor, StepIDs: ids})
	if err != nil {
		c.log.Warn("heartbeat failed", "error", err, "steps", len(ids))
		return
	}
	for _, id := range lost {
		c.inflight.logger(id, c.log).Warn("lease lost; interrupting the step")
		c.inflight.cancel(id, errLeaseLost)
	}
}

// Work executes every step that is due now, up to Workers at a time, and returns when none
// is left due. It is for tests, scripts and one-shot processing; long-running processes
// use Serve. Work must not run while Serve runs on the same client.
func (c *Client) Work(ctx context.Context) (int, error) {
	if err := c.refreshPauses(ctx); err != nil {
		return 0, fmt.Errorf("onceflow: work: paused workflows: %w", err)
	}
	if err := c.recordRedaction(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("could not record the workflows' personal-data fields; readers without the workflow files will not mask them", "error", err)
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		res, err := c.claim(ctx, c.cfg.Workers)
		if err != nil {
			return total, fmt.Errorf("onceflow: work: %w", err)
		}
		if len(res.Claimed) == 0 && res.Reused == 0 && res.Parked == 0 && res.Skipped == 0 && res.Waiting == 0 {
			return total, nil
		}
		// A step postponed (a delay not over, its key in flight elsewhere) is due later, not
		// now: the next claim looks past it at the steps behind it.
		var wg sync.WaitGroup
		for _, cs := range res.Claimed {
			wg.Go(func() { c.execute(ctx, cs, nil) })
		}
		wg.Wait()
		total += len(res.Claimed) + res.Reused + res.Skipped
	}
}
