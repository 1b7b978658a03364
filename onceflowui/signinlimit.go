package onceflowui

import (
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// signInLimit counts failed sign-ins per client address: Config.SignInFailures may fail
// at once, and one more every SignInWindow/SignInFailures after that. A client at its limit
// is refused every sign-in, right or wrong, until it may try again.
type signInLimit struct {
	mu      sync.Mutex
	every   rate.Limit
	burst   int
	clients map[string]*rate.Limiter
}

// maxTracked bounds the addresses tracked; past it, those back at their full allowance
// are forgotten.
const maxTracked = 10000

func newSignInLimit(failures int, window time.Duration) *signInLimit {
	return &signInLimit{every: rate.Every(window / time.Duration(failures)), burst: failures, clients: map[string]*rate.Limiter{}}
}

// wait is how long addr must wait before it may try to sign in at now: 0 when it may.
func (l *signInLimit) wait(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.clients[addr]
	if lim == nil {
		return 0
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - tokens) / float64(l.every) * float64(time.Second)))
}

// failed counts a failed sign-in of addr at now.
func (l *signInLimit) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.clients[addr]
	if lim == nil {
		if len(l.clients) >= maxTracked {
			for a, x := range l.clients {
				if x.TokensAt(now) >= float64(l.burst) {
					delete(l.clients, a)
				}
			}
		}
		lim = rate.NewLimiter(l.every, l.burst)
		l.clients[addr] = lim
	}
	lim.AllowN(now, 1)
}

// retryAfter is d as a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(int64(math.Ceil(d.Seconds())), 1), 10)
}
