// Package backoff computes retry delays: exponential growth from an initial interval, capped,
// with full jitter so that many failing steps do not retry in lockstep.
package backoff

import (
	"math"
	"time"
)

// Policy is the shape of the exponential curve.
type Policy struct {
	// Initial is the ceiling of the first retry's delay.
	Initial time.Duration
	// Max caps every delay.
	Max time.Duration
	// Multiplier is the growth per retry (2 doubles).
	Multiplier float64
}

// Ceiling returns the largest delay for the retry after attempt number attempt (1-based):
// min(Max, Initial × Multiplier^(attempt-1)).
func (p Policy) Ceiling(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	c := float64(p.Initial) * math.Pow(p.Multiplier, float64(attempt-1))
	if c > float64(p.Max) || math.IsInf(c, 0) || math.IsNaN(c) {
		return p.Max
	}
	return time.Duration(c)
}

// Delay returns the full-jitter delay for the retry after attempt: Ceiling(attempt) scaled
// by r, a uniform random number in [0, 1).
func (p Policy) Delay(attempt int, r float64) time.Duration {
	if r < 0 {
		r = 0
	}
	if r >= 1 {
		r = math.Nextafter(1, 0)
	}
	return time.Duration(float64(p.Ceiling(attempt)) * r)
}
