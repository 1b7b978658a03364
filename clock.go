package onceflow

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/store"
)

// ClockSkewWarning is how far Config.Clock may differ from the database's clock before the
// engine logs a warning: once when the measured skew rises above it, and once when it is
// back within. The engine's decisions do not depend on it; they take the database's
// clock whatever the skew.
const ClockSkewWarning = time.Second

// DefaultClockSync is how often the database's clock is measured while Serve runs, unless
// Config.ClockSync says otherwise.
const DefaultClockSync = 10 * time.Second

// Sources of the engine's time, in ClockStatus.Source.
const (
	// ClockSourceDatabase: the database's clock (the store is a store.ClockSource, as
	// store/postgres is), measured every Config.ClockSync and extrapolated with the
	// monotonic clock in between.
	ClockSourceDatabase = "database"
	// ClockSourceLocal: Config.Clock, on a store whose database lives on this machine
	// (store/sqlite), watched for jumps.
	ClockSourceLocal = "local"
	// ClockSourceConfig: Config.Clock as it is, for every decision (Config.ClockSync
	// negative).
	ClockSourceConfig = "config"
)

// clockJump is the largest change of a clock against the monotonic clock that is not a
// jump. A smaller one cannot matter: a lease has at least LeaseFor-HeartbeatEvery left.
const clockJump = time.Second

// clockRebase is how often the machine's clock is taken as the new reference for jumps, so
// that its slow correction by NTP never adds up to a jump.
const clockRebase = time.Minute

// clockMeasureTimeout bounds one measurement of the database's clock, so that writes
// waiting for the first one are never held longer (they fail on their own if the database
// is unreachable).
const clockMeasureTimeout = 5 * time.Second

// clockRetry is how soon a failed measurement is tried again.
const clockRetry = time.Second

// ClockStatus says where the engine's time comes from (Client.ClockStatus).
type ClockStatus struct {
	// Source is ClockSourceDatabase, ClockSourceLocal or ClockSourceConfig.
	Source string
	// Skew is Config.Clock minus the database's clock at the last measurement (positive
	// when this machine's clock is ahead); zero unless Source is ClockSourceDatabase.
	Skew time.Duration
	// Measured is when the database's clock was last measured (the engine's time then);
	// zero while it never was, and then the engine uses Config.Clock.
	Measured time.Time
	// Err is why the last measurement failed, until one succeeds; the last measured
	// offset is kept meanwhile.
	Err error
}

// SkewText writes the skew as the API and the logs show it: "+90.0s", "-0.3s".
func (s ClockStatus) SkewText() string { return fmt.Sprintf("%+.1fs", s.Skew.Seconds()) }

// engineClock is the one clock of the engine: every time the client writes for other
// processes to compare (a store's Now, a lease, a NextAt, a leadership's TTL, a due time,
// a schedule's cursor) comes from now.
//
// On a store.ClockSource it is the database's clock: measured before the first write
// (sync), again every ClockSync while Serve runs, and extrapolated in between with the
// monotonic clock, so that this machine's clock jumping between measurements does not move
// it. Elsewhere it is Config.Clock, compared with the monotonic clock at every reading: a
// jump (more than clockJump) renews the leases of running steps at once (jumps) and holds
// the reaper off for one LeaseFor (reapHeld), so that no process reaps a lease its owner
// has had no time to renew at the new time. With fixed set (ClockSync negative) it is
// Config.Clock as it is.
//
// now is on the hot path: an atomic load, two clock readings and a comparison.
type engineClock struct {
	local   func() time.Time
	src     store.ClockSource // nil: the machine's clock
	fixed   bool
	every   time.Duration
	log     *slog.Logger
	metrics Metrics
	origin  time.Time // monotonic origin of jumpAt

	base   atomic.Pointer[clockBase]
	jumpAt atomic.Int64 // nanoseconds from origin to the last jump, plus one; 0: none yet
	stale  atomic.Bool  // Config.Clock moved against the monotonic clock: measure again
	jumps  chan struct{}
	resync chan struct{}

	mu       sync.Mutex // one measurement at a time; guards skewHigh and failing
	skewHigh bool
	failing  bool
}

// clockBase is the reference the engine's time is extrapolated from.
type clockBase struct {
	wall     time.Time // the engine's time at mono, without a monotonic reading
	local    time.Time // Config.Clock at mono, without a monotonic reading
	mono     time.Time // when both were read, with its monotonic reading
	measured bool      // wall is the database's clock
	skew     time.Duration
	err      error     // the last measurement's failure
	retryAt  time.Time // monotonic: no measurement is tried before it after a failure
}

func newEngineClock(cfg Config, log *slog.Logger, m Metrics) *engineClock {
	k := &engineClock{local: cfg.Clock, fixed: cfg.ClockSync < 0, every: cfg.ClockSync, log: log, metrics: m,
		origin: time.Now(), jumps: make(chan struct{}, 1), resync: make(chan struct{}, 1)}
	if src, ok := cfg.Store.(store.ClockSource); ok && !k.fixed {
		k.src = src
	}
	l := cfg.Clock()
	k.base.Store(&clockBase{wall: l.Round(0), local: l.Round(0), mono: time.Now()})
	return k
}

// now returns the engine's time. It never waits for the database.
func (k *engineClock) now() time.Time {
	if k.fixed {
		return k.local()
	}
	b := k.base.Load()
	l := k.local()
	m := time.Now()
	since := m.Sub(b.mono)
	drift := l.Round(0).Sub(b.local) - since // how far Config.Clock moved against the monotonic clock
	jumped := drift > clockJump || drift < -clockJump
	if !b.measured {
		switch {
		case jumped:
			if k.base.CompareAndSwap(b, &clockBase{wall: l.Round(0), local: l.Round(0), mono: m, err: b.err, retryAt: b.retryAt}) {
				k.jumped(m, drift, "this machine's clock")
			}
		case since > clockRebase:
			k.base.CompareAndSwap(b, &clockBase{wall: l.Round(0), local: l.Round(0), mono: m, err: b.err, retryAt: b.retryAt})
		}
		return l
	}
	// The database's clock, extrapolated. This machine's clock moving against the
	// monotonic one (a jump, or a suspended machine waking up) does not move it, but asks
	// for a measurement now, since the monotonic clock stands still while a machine sleeps.
	if jumped && k.stale.CompareAndSwap(false, true) {
		select {
		case k.resync <- struct{}{}:
		default:
		}
	}
	return b.wall.Add(since)
}

// jumped records a jump of the engine's time at m: the leases of running steps are
// renewed at once and the reaper waits one LeaseFor.
func (k *engineClock) jumped(m time.Time, by time.Duration, what string) {
	k.jumpAt.Store(int64(m.Sub(k.origin)) + 1)
	select {
	case k.jumps <- struct{}{}:
	default:
	}
	k.log.Warn("clock jump: "+what+" moved against the monotonic clock; the leases of running steps are renewed now and the lease reaper waits one lease duration",
		"by", by.Round(time.Millisecond))
}

// reapHeld reports whether the engine's time jumped less than leaseFor ago (monotonic):
// leases renewed before the jump may look expired although their owner is alive.
func (k *engineClock) reapHeld(leaseFor time.Duration) bool {
	j := k.jumpAt.Load()
	return j != 0 && time.Since(k.origin) < time.Duration(j-1)+leaseFor
}

// sync measures the database's clock when it never was, when the measurement is due
// (twice ClockSync old, as Serve measures every ClockSync) or when this machine's clock
// moved; otherwise it returns at once. The first measurement is waited for; later ones are
// made by one caller while the others go on with the last offset. After a failure none is
// tried for clockRetry.
func (k *engineClock) sync(ctx context.Context) {
	if k.src == nil {
		return
	}
	b := k.base.Load()
	if !k.due(b) {
		return
	}
	if b.measured {
		if !k.mu.TryLock() {
			return
		}
	} else {
		k.mu.Lock()
	}
	defer k.mu.Unlock()
	if k.due(k.base.Load()) {
		k.measureLocked(ctx)
	}
}

// due reports whether a measurement is due from base b.
func (k *engineClock) due(b *clockBase) bool {
	if b.err != nil && time.Now().Before(b.retryAt) {
		return false
	}
	return !b.measured || k.stale.Load() || time.Since(b.mono) >= 2*k.every
}

// refresh measures the database's clock now (Serve, every ClockSync), or reads the
// machine's, so that a jump is noticed while nothing else reads it. It reports whether a
// measurement failed.
func (k *engineClock) refresh(ctx context.Context) (failed bool) {
	if k.src == nil {
		k.now()
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.measureLocked(ctx)
}

// measureLocked reads the database's clock three times and keeps the reading with the
// shortest round trip, taken to be half-way through it. Called with mu held.
func (k *engineClock) measureLocked(parent context.Context) bool {
	ctx, cancel := context.WithTimeout(parent, clockMeasureTimeout)
	defer cancel()
	var (
		best struct {
			wall, local, mono time.Time
			rtt               time.Duration
		}
		ok  bool
		err error
	)
	for range 3 {
		t0 := time.Now()
		db, e := k.src.DatabaseNow(ctx)
		t1 := time.Now()
		l := k.local()
		if e != nil {
			err = e
			break
		}
		if rtt := t1.Sub(t0); !ok || rtt < best.rtt {
			best.wall, best.local, best.mono, best.rtt = db.Add(rtt/2).Round(0).Local(), l.Round(0), t1, rtt
			ok = true
		}
	}
	if !ok {
		for {
			prev := k.base.Load()
			nb := *prev
			nb.err, nb.retryAt = err, time.Now().Add(clockRetry)
			if k.base.CompareAndSwap(prev, &nb) {
				break
			}
		}
		if !k.failing && parent.Err() == nil {
			k.failing = true
			k.log.Warn("cannot read the database's clock; the last measured offset is kept and the measurement tried again", "error", err)
		}
		return false
	}
	skew := best.local.Sub(best.wall)
	prev := k.base.Swap(&clockBase{wall: best.wall, local: best.local, mono: best.mono, measured: true, skew: skew})
	k.stale.Store(false)
	if prev.measured {
		predicted := prev.wall.Add(best.mono.Sub(prev.mono))
		if d := best.wall.Sub(predicted); d > clockJump || d < -clockJump {
			k.jumped(best.mono, d, "the database's clock")
		}
	}
	if k.failing {
		k.failing = false
		k.log.Info("the database's clock is read again", "skew", ClockStatus{Skew: skew}.SkewText())
	}
	k.metrics.Observe(Measurement{Kind: MeasureClockSkew, Duration: skew})
	high := skew > ClockSkewWarning || skew < -ClockSkewWarning
	switch {
	case high && !k.skewHigh:
		k.log.Warn("this machine's clock differs from the database's; every decision uses the database's clock, but fix the machine's (NTP)",
			"skew", ClockStatus{Skew: skew}.SkewText(), "threshold", ClockSkewWarning)
	case !high && k.skewHigh:
		k.log.Info("this machine's clock agrees with the database's again", "skew", ClockStatus{Skew: skew}.SkewText())
	}
	k.skewHigh = high
	return true
}

// status is what ClockStatus reports.
func (k *engineClock) status() ClockStatus {
	switch {
	case k.fixed:
		return ClockStatus{Source: ClockSourceConfig}
	case k.src == nil:
		return ClockStatus{Source: ClockSourceLocal}
	}
	b := k.base.Load()
	s := ClockStatus{Source: ClockSourceDatabase, Err: b.err}
	if b.measured {
		s.Skew, s.Measured = b.skew, b.wall
	}
	return s
}

// Now returns the engine's time: the time it writes into leases, due times, leaderships
// and schedule cursors, and compares with what other processes wrote. On a store whose
// database has a clock every process shares (PostgreSQL) it is the database's clock,
// measured and extrapolated; the first call on a client that has not measured it yet does
// (one round trip). Otherwise it is Config.Clock. Code above the engine that asks the
// store about time (which steps are due, which sessions expired) reads this clock.
func (c *Client) Now() time.Time {
	c.clock.sync(context.Background())
	return c.clock.now()
}

// ClockStatus says where the engine's time comes from and, on a database's clock, how far
// Config.Clock is from it.
func (c *Client) ClockStatus() ClockStatus {
	c.clock.sync(context.Background())
	return c.clock.status()
}

// now is Now for the engine's own writes: ctx bounds the first measurement.
func (c *Client) now(ctx context.Context) time.Time {
	c.clock.sync(ctx)
	return c.clock.now()
}

// clockLoop measures the database's clock every ClockSync, and at once when this
// machine's clock moved, until ctx ends; on a failure it tries again within clockRetry.
// On the machine's clock it reads it as often, so that a jump is noticed while idle.
func (c *Client) clockLoop(ctx context.Context) {
	if c.clock.fixed {
		return
	}
	t := time.NewTimer(c.clock.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.clock.resync:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		wait := c.clock.every
		if c.clock.refresh(ctx) {
			wait = min(wait, clockRetry)
		}
		t.Reset(wait)
	}
}
