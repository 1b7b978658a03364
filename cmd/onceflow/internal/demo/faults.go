package demo

import (
	"hash/fnv"
	"math/rand/v2"
)

// fault is the trouble a destination causes for one request.
type fault int

const (
	faultNone fault = iota
	// faultUnavailable answers 503 before doing anything.
	faultUnavailable
	// faultRateLimited answers 429 with Retry-After: 1 before doing anything.
	faultRateLimited
	// faultDropAfterApply applies the effect, then closes the connection without an answer.
	faultDropAfterApply
	// faultSlowAfterApply applies the effect, then answers only after the caller gave up.
	faultSlowAfterApply
	// faultTempFailure is the SMTP server's 451 after the message was sent: nothing was
	// delivered.
	faultTempFailure
)

func (f fault) String() string {
	switch f {
	case faultUnavailable:
		return "503 unavailable"
	case faultRateLimited:
		return "429 rate limited"
	case faultDropAfterApply:
		return "applied, then connection dropped"
	case faultSlowAfterApply:
		return "applied, then answered too late"
	case faultTempFailure:
		return "451 try again later"
	}
	return "none"
}

// faultPlan decides, from a seed, which requests go wrong. The decision depends only on the
// seed, the destination, the idempotency key and how many requests with that key arrived
// before, never on the order in which concurrent requests happen to arrive, so one seed
// always injects the same faults. Only the first two requests for a key can fail, so every
// effect can succeed within the demo's retry policy.
type faultPlan struct {
	seed uint64
}

// Fault rates of the first request for a key; the second request gets half of each.
const (
	rateUnavailable = 0.10
	rateRateLimited = 0.04
	rateDrop        = 0.08
	rateSlow        = 0.06
)

func (p faultPlan) pick(dest, key string, arrival int) fault {
	if arrival > 2 {
		return faultNone
	}
	h := fnv.New64a()
	h.Write([]byte(dest))
	h.Write([]byte{0})
	h.Write([]byte(key))
	r := rand.New(rand.NewPCG(p.seed, h.Sum64()+uint64(arrival)))
	x := r.Float64()
	if arrival == 2 {
		x *= 2
	}
	for _, c := range []struct {
		rate float64
		f    fault
	}{{rateUnavailable, faultUnavailable}, {rateRateLimited, faultRateLimited}, {rateDrop, faultDropAfterApply}, {rateSlow, faultSlowAfterApply}} {
		if x < c.rate {
			return c.f
		}
		x -= c.rate
	}
	return faultNone
}
