// Package limit bounds what onceflow sends to one destination: at most N requests in
// flight and R a second (a token bucket with golang.org/x/time/rate), shared by every
// worker of the process, and — when a Gate is given, as store/postgres provides — by every
// process using the same database. A destination that answers 429 with Retry-After slows
// down as a whole: Slow holds back every request to it, not only the step that was told.
//
// A destination is a key: "host:api.crm.example" for a limit by host, or
// "step:workflow/step" for a step's own limit. Keys with the same name share one state.
package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is what a destination accepts. Zero fields do not limit.
type Limit struct {
	// Concurrency is the most requests in flight at once.
	Concurrency int
	// PerSecond is the most requests started per second, on average.
	PerSecond float64
	// Burst is how many requests may start at once after a quiet spell (default 1).
	Burst int
}

// Zero reports whether l limits nothing.
func (l Limit) Zero() bool { return l.Concurrency <= 0 && l.PerSecond <= 0 }

func (l Limit) burst() int {
	if l.Burst <= 0 {
		return 1
	}
	return l.Burst
}

// Gate shares limits between processes. Each method is one short transaction; none waits.
type Gate interface {
	// SlotTake takes one of the n slots of key for owner until hold has passed (so that a
	// process that dies frees its slots); ok is false when all n are taken.
	DestinationSlotTake(ctx context.Context, key string, n int, owner string, hold time.Duration) (slot int, ok bool, err error)
	// SlotRelease gives a slot back.
	DestinationSlotRelease(ctx context.Context, key string, slot int, owner string) error
	// TokenTake takes a token of key's bucket (perSecond, burst; perSecond 0: no rate) and
	// returns 0, or, without taking one, how long to wait before asking again: until a
	// token is due, or until the destination is no longer slowed down.
	DestinationTokenTake(ctx context.Context, key string, perSecond float64, burst int) (wait time.Duration, err error)
	// DestinationSlow holds back every request to key for d.
	DestinationSlow(ctx context.Context, key string, d time.Duration) error
}

// Limiter hands out permission to send to destinations. The zero value is not usable; use
// New.
type Limiter struct {
	gate  Gate
	owner string
	// wait blocks for d or until ctx ends; replaced in tests.
	wait func(ctx context.Context, d time.Duration) error
	now  func() time.Time

	mu    sync.Mutex
	dests map[string]*dest
}

// dest is one destination's state in this process.
type dest struct {
	limit   Limit
	slots   chan struct{} // nil: no concurrency limit
	rate    *rate.Limiter // nil: no rate limit
	mu      sync.Mutex
	blocked time.Time // no request before
}

// Options configure a Limiter.
type Options struct {
	// Gate, when set, shares the limits with other processes.
	Gate Gate
	// Owner names this process in the Gate's slots (e.g. the worker ID).
	Owner string
	// Wait blocks for d or until ctx ends (default: a timer).
	Wait func(ctx context.Context, d time.Duration) error
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// New returns a Limiter.
func New(o Options) *Limiter {
	if o.Wait == nil {
		o.Wait = sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{gate: o.Gate, owner: o.Owner, wait: o.Wait, now: o.Now, dests: map[string]*dest{}}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ErrConflict: a key was configured with two different limits.
var ErrConflict = errors.New("limit: one destination, two limits")

// Check reports whether Register(key, lim) would succeed, registering nothing.
func (l *Limiter) Check(key string, lim Limit) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.dests[key]; ok && d.limit != lim {
		return fmt.Errorf("%w: %s is limited to %+v and %+v", ErrConflict, key, d.limit, lim)
	}
	return nil
}

// Register declares key's limit. Registering the same key again with the same limit is a
// no-op; with another, ErrConflict (a reload keeps the state of unchanged keys, so that
// requests in flight stay counted).
func (l *Limiter) Register(key string, lim Limit) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.dests[key]; ok {
		if d.limit != lim {
			return fmt.Errorf("%w: %s is limited to %+v and %+v", ErrConflict, key, d.limit, lim)
		}
		return nil
	}
	d := &dest{limit: lim}
	if lim.Concurrency > 0 {
		d.slots = make(chan struct{}, lim.Concurrency)
	}
	if lim.PerSecond > 0 {
		d.rate = rate.NewLimiter(rate.Limit(lim.PerSecond), lim.burst())
	}
	l.dests[key] = d
	return nil
}

func (l *Limiter) dest(key string) *dest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dests[key]
}

// Acquire waits until a request may be sent to the destinations keys (a step may fall
// under its host's limit and its own) and returns the function that ends the request. An
// unknown key does not limit. ctx ending while waiting returns its error, holding nothing.
func (l *Limiter) Acquire(ctx context.Context, keys ...string) (release func(), err error) {
	var releases []func()
	done := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	for _, k := range keys {
		d := l.dest(k)
		if d == nil {
			continue
		}
		r, err := l.acquire(ctx, k, d)
		if err != nil {
			done()
			return nil, err
		}
		releases = append(releases, r)
	}
	return done, nil
}

// WaitError is returned by Acquire when a request would have to wait for a destination
// longer than its context allows — the destination was slowed down by a 429 for longer,
// or its rate allows no request before then: nothing is held, and the request can be
// tried again after Wait instead of waiting in vain.
type WaitError struct {
	Key  string
	Wait time.Duration
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("%s is held back for another %s, longer than the request may wait", e.Key, e.Wait)
}

// pause waits d for key, or returns a *WaitError at once when ctx would end first.
func (l *Limiter) pause(ctx context.Context, key string, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && d > time.Until(dl) {
		return &WaitError{Key: key, Wait: d}
	}
	return l.wait(ctx, d)
}

func (l *Limiter) acquire(ctx context.Context, key string, d *dest) (func(), error) {
	// Slowed down by a 429: wait it out.
	for {
		d.mu.Lock()
		until := d.blocked
		d.mu.Unlock()
		left := until.Sub(l.now())
		if left <= 0 {
			break
		}
		if err := l.pause(ctx, key, left); err != nil {
			return nil, err
		}
	}
	if d.slots != nil {
		select {
		case d.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	free := func() {
		if d.slots != nil {
			<-d.slots
		}
	}
	if d.rate != nil {
		r := d.rate.ReserveN(l.now(), 1)
		if err := l.pause(ctx, key, r.DelayFrom(l.now())); err != nil {
			r.Cancel()
			free()
			return nil, err
		}
	}
	if l.gate == nil {
		return free, nil
	}
	shared, err := l.acquireShared(ctx, key, d.limit)
	if err != nil {
		free()
		return nil, err
	}
	return func() { shared(); free() }, nil
}

// acquireShared takes a token and a slot of the Gate, polling while none is free.
func (l *Limiter) acquireShared(ctx context.Context, key string, lim Limit) (func(), error) {
	for {
		wait, err := l.gate.DestinationTokenTake(ctx, key, lim.PerSecond, lim.burst())
		if err != nil {
			return nil, fmt.Errorf("limit %s: %w", key, err)
		}
		if wait <= 0 {
			break
		}
		if err := l.pause(ctx, key, wait); err != nil {
			return nil, err
		}
	}
	if lim.Concurrency <= 0 {
		return func() {}, nil
	}
	hold := 10 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		hold = time.Until(dl) + 30*time.Second
	}
	poll := 10 * time.Millisecond
	for {
		slot, ok, err := l.gate.DestinationSlotTake(ctx, key, lim.Concurrency, l.owner, hold)
		if err != nil {
			return nil, fmt.Errorf("limit %s: %w", key, err)
		}
		if ok {
			return func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				_ = l.gate.DestinationSlotRelease(ctx, key, slot, l.owner) // else it expires after hold
			}, nil
		}
		if err := l.wait(ctx, poll); err != nil {
			return nil, err
		}
		poll = time.Duration(math.Min(float64(2*poll), float64(250*time.Millisecond)))
	}
}

// Slow holds back every request to the destinations keys for d, in this process and,
// with a Gate, in the others: a destination that answered 429 with Retry-After d. The
// caller bounds d (the step's RetryPolicy.MaxRetryAfter): a destination's word alone must
// not hold a host back for years.
func (l *Limiter) Slow(ctx context.Context, d time.Duration, keys ...string) error {
	if d <= 0 {
		return nil
	}
	var errs []error
	for _, k := range keys {
		st := l.dest(k)
		if st == nil {
			continue
		}
		until := l.now().Add(d)
		st.mu.Lock()
		if until.After(st.blocked) {
			st.blocked = until
		}
		st.mu.Unlock()
		if l.gate != nil {
			errs = append(errs, l.gate.DestinationSlow(ctx, k, d))
		}
	}
	return errors.Join(errs...)
}

// HostKey is the key of a limit by host: host is a name or address ("api.crm.example"),
// optionally with a port ("127.0.0.1:8080"), compared without case.
func HostKey(host string) string { return "host:" + strings.ToLower(host) }

// StepKey is the key of a step's own limit.
func StepKey(workflow, step string) string { return "step:" + workflow + "/" + step }

// HostKeys returns the keys of the limits that apply to a request to hostport (a URL's
// Host): the limit of the host with this port, and of the host on any port.
func (l *Limiter) HostKeys(hostport string) []string {
	var out []string
	for _, k := range []string{HostKey(hostport), HostKey(hostOnly(hostport))} {
		if l.dest(k) != nil && (len(out) == 0 || out[0] != k) {
			out = append(out, k)
		}
	}
	return out
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
