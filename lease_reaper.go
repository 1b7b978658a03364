package onceflow

import (
	"context"
	"time"

	"github.com/onceflow/onceflow/store"
)

// reaperLeader is the name of the leadership that decides which of many workers reaps.
const reaperLeader = "reaper"

// reapLoop runs the lease reaper every ReapInterval until ctx ends, on the worker that
// leads the reaper. For one LeaseFor of real time after the engine's time jumped (clock.go)
// it reaps nothing: a lease renewed before the jump may look expired, or not, by the new
// time although its owner is alive and renews it at the new time at once.
func (c *Client) reapLoop(ctx context.Context) {
	c.leaderLoop(ctx, reaperLeader, c.cfg.ReapInterval, nil, func(ctx context.Context) {
		now := c.now(ctx) // notices a jump before the hold-off is looked at
		if c.clock.reapHeld(c.cfg.LeaseFor) {
			c.log.Debug("lease reaper waits: the clock jumped less than a lease duration ago")
			return
		}
		if _, err := c.reap(ctx, now); err != nil && ctx.Err() == nil {
			c.log.Warn("lease reaper failed", "error", err)
		}
	})
}

// Reap finds steps whose worker stopped renewing its lease (it crashed, or lost the
// database) and, since their effect may or may not have happened, schedules them to be
// tried again with the same effect key, or parks them for review where the step says the
// destination cannot deduplicate or its attempts are used up. Serve calls it every
// ReapInterval on the worker that leads the reaper; Reap itself reaps unconditionally. It
// returns how many steps it reaped.
func (c *Client) Reap(ctx context.Context) (int, error) {
	return c.reap(ctx, c.now(ctx))
}

// reap reaps the leases that expired before now: the engine's time, read once for every
// page, so that what is reaped is decided by exactly that time.
func (c *Client) reap(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		decided := newReapLog(func(st *store.Step) store.ReapDecision { return c.reapDecision(st, now) })
		n, err := c.store.StepReapExpired(ctx, store.StepReapParams{Now: now, Limit: 100, Decide: decided.Decide})
		c.reaped(ctx, decided, n)
		total += n
		if err != nil || n < 100 {
			if total > 0 {
				c.log.Info("reaped expired leases", "steps", total)
				c.poke()
			}
			return total, err
		}
	}
}

func (c *Client) reapDecision(st *store.Step, now time.Time) store.ReapDecision {
	_, sd := c.step(st.Workflow, st.Name)
	if sd == nil {
		// Another worker's workflow: it decides when it claims the step again.
		return store.ReapDecision{State: store.StateRetrying, NextAt: now, Reason: store.ReasonLeaseExpired}
	}
	policy := map[string]any{"max_attempts": sd.retry.MaxAttempts, "on_unknown": string(sd.OnUnknown)}
	if st.AttemptBase > 0 {
		policy["attempt_base"] = st.AttemptBase
	}
	switch {
	case sd.OnUnknown == ReviewUnknown:
		return store.ReapDecision{State: store.StateNeedsReview, Reason: store.ReasonOutcomeUnknown,
			Detail: map[string]any{"policy": policy, "why": "the destination cannot deduplicate; a person decides whether the effect happened"}}
	case st.Attempt-st.AttemptBase >= sd.retry.MaxAttempts: // attempts since the last manual retry
		return store.ReapDecision{State: store.StateNeedsReview, Reason: store.ReasonOutcomeUnknown,
			Detail: map[string]any{"policy": policy, "attempts_exhausted": true}}
	}
	return store.ReapDecision{State: store.StateRetrying, NextAt: now, Reason: store.ReasonLeaseExpired,
		Detail: map[string]any{"policy": policy, "why": "retry with the same effect key; the destination deduplicates"}}
}
