package onceflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/onceflow/onceflow/store"
)

// Serve claims and executes due steps, keeps their leases alive, reaps expired leases,
// fires the ticks of registered schedules and sends failure notifications (Config.Notify),
// until ctx ends. It then stops claiming,
// lets running steps finish for up to ShutdownGrace, interrupts the rest and releases them
// for a retry with the same effect key, and returns nil. Only one Serve runs per client at
// a time.
func (c *Client) Serve(ctx context.Context) error {
	if !c.serving.TryLock() {
		return errors.New("onceflow: Serve is already running on this client")
	}
	defer c.serving.Unlock()

	// Steps run under base, which outlives ctx so that they can finish during the grace
	// period; it is cancelled when the grace period ends.
	base, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)
	sem := make(chan struct{}, c.cfg.Workers)

	if err := c.refreshPauses(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it began: nothing was claimed
		}
		return fmt.Errorf("onceflow: serve: paused workflows: %w", err)
	}
	if err := c.recordRedaction(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("could not record the workflows' personal-data fields; readers without the workflow files will not mask them", "error", err)
	}
	var loops sync.WaitGroup
	loops.Go(func() { c.clockLoop(ctx) })
	loops.Go(func() { c.pauseLoop(ctx) })
	loops.Go(func() { c.reapLoop(ctx) })
	loops.Go(func() { c.notifyLoop(ctx) })
	loops.Go(func() { c.scheduleLoop(ctx) })
	hbCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	loops.Go(func() { c.heartbeatLoop(hbCtx) })

	c.claimLoop(ctx, base, sem, c.notifications(ctx))

	// Shutdown: wait for running steps, then interrupt them.
	done := make(chan struct{})
	go func() { c.inflight.wg.Wait(); close(done) }()
	grace := time.NewTimer(c.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		c.log.Warn("shutdown grace period over; interrupting running steps", "grace", c.cfg.ShutdownGrace)
		hardStop(errShutdown)
		c.inflight.cancelAll(errShutdown)
		<-done
	}
	stopHeartbeat()
	loops.Wait()
	// The audit events of repeated starts still queued; bounded, so that an unreachable
	// database cannot hold the shutdown.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownGrace)
	defer cancel()
	if err := c.Flush(flushCtx); err != nil {
		c.log.Warn("shutdown: audit events of repeated starts not yet written", "error", err)
	}
	return nil
}

// notifications subscribes to the store's notice that steps may have become due in
// another process, if the store gives one (store.Notifier); nil otherwise. Polling stays
// the fallback either way.
func (c *Client) notifications(ctx context.Context) <-chan struct{} {
	n, ok := c.store.(store.Notifier)
	if !ok {
		return nil
	}
	ch, err := n.Notifications(ctx)
	if err != nil {
		c.log.Warn("store notifications unavailable; polling only", "error", err, "poll_interval", c.cfg.PollInterval)
		return nil
	}
	return ch
}

// claimLoop claims due steps whenever there is a free worker and something may be due: a
// local wake-up, a notification from the store (notes, may be nil) or the poll interval.
func (c *Client) claimLoop(ctx, base context.Context, sem chan struct{}, notes <-chan struct{}) {
	// A worker goes on with the step its record claimed only while Serve claims.
	chain := func() bool { return ctx.Err() == nil }
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		free := cap(sem) - len(sem)
		more := false
		if free > 0 && ctx.Err() == nil {
			res, err := c.claim(ctx, free)
			switch {
			case err != nil && ctx.Err() == nil:
				c.log.Warn("claim failed", "error", err)
			case err == nil:
				for _, cs := range res.Claimed {
					sem <- struct{}{}
					c.inflight.wg.Add(1)
					go func() {
						defer c.inflight.wg.Done()
						defer func() { <-sem; c.poke() }()
						c.execute(base, cs, chain)
					}()
				}
				more = len(res.Claimed) == free || res.Reused > 0 || res.Parked > 0 || res.Skipped > 0
			}
		}
		if more {
			continue
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		poll.Reset(c.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case _, ok := <-notes:
			if !ok {
				notes = nil
			}
		case <-poll.C:
		}
	}
}

// heartbeatLoop renews the leases of running steps every HeartbeatEvery, and at once when
// the engine's time jumped (clock.go), so that their leases move to the new time before
// any reaper looks at them by it.
func (c *Client) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.clock.jumps:
		}
		c.heartbeat(ctx)
	}
}
