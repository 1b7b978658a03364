package onceflow

import (
	"context"
	"time"

	"github.com/onceflow/onceflow/store"
)

// leaderLoop runs do every interval until ctx ends, on one process at a time: before each
// round it acquires or renews the leadership called name, for three intervals, and only
// the leader runs do. A leader that stops is replaced once its leadership expires. When
// active is set and says there is nothing to do, the round is skipped without competing
// for the leadership.
func (c *Client) leaderLoop(ctx context.Context, name string, interval time.Duration, active func() bool, do func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if (active == nil || active()) && c.lead(ctx, name, interval) {
			do(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lead acquires or renews the leadership called name for three intervals and reports
// whether this process holds it.
func (c *Client) lead(ctx context.Context, name string, interval time.Duration) bool {
	leader, err := c.store.LeaderAttempt(ctx, store.LeaderAttemptParams{
		Name: name, Owner: c.cfg.WorkerID, Now: c.now(ctx), TTL: 3 * interval,
	})
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.log.Warn(name+": leader election failed", "error", err)
		}
		return false
	case !leader:
		c.log.Debug(name + ": another process leads")
	}
	return leader
}
