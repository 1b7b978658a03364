// Package bodybudget bounds the request bodies an HTTP server holds in memory at once,
// across requests: before a handler reads a body it takes the body's size from a budget
// of bytes, and gives it back when the request has been answered — what is parsed from a
// body lives as long as its handler. A request that finds no room within a short wait is
// refused (the caller answers 503 with Retry-After), its body unread, so that many large
// bodies at once — webhooks are read before their signature can be checked — cannot
// exhaust memory.
package bodybudget

import (
	"context"
	"errors"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// Wait is how long a request waits for room before Take gives up.
const Wait = time.Second

// ErrFull: the budget stayed full for Wait.
var ErrFull = errors.New("the request bodies held in memory are at their limit")

// Budget is a budget of body bytes. Use New.
type Budget struct {
	sem *semaphore.Weighted
	max int64
}

// New returns a budget of max bytes (at least 1).
func New(size int64) *Budget {
	size = max(size, 1)
	return &Budget{sem: semaphore.NewWeighted(size), max: size}
}

// Max is the budget's size in bytes.
func (b *Budget) Max() int64 { return b.max }

// hold is what one request took, given back when it is answered.
type hold struct{ n int64 }

type holdKey struct{}

// Hold gives every request passing through it the part of the budget Take takes for it,
// and gives that back once next has answered it.
func (b *Budget) Hold(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := &hold{}
		defer func() {
			if h.n > 0 {
				b.sem.Release(h.n)
			}
		}()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), holdKey{}, h)))
	})
}

// Take takes room for r's body before it is read: its announced size, or limit (the most
// the handler reads) when it announces none or more; nothing for an empty body. It waits
// up to Wait for room, then returns ErrFull (or the request context's error when the client
// went away). A request that did not pass through Hold takes nothing.
func (b *Budget) Take(r *http.Request, limit int64) error {
	h, ok := r.Context().Value(holdKey{}).(*hold)
	if !ok || r.ContentLength == 0 {
		return nil
	}
	n := r.ContentLength
	if n < 0 || n > limit {
		n = limit
	}
	n = min(n, b.max)
	if !b.sem.TryAcquire(n) {
		ctx, cancel := context.WithTimeout(r.Context(), Wait)
		err := b.sem.Acquire(ctx, n)
		cancel()
		if err != nil {
			if r.Context().Err() != nil {
				return r.Context().Err()
			}
			return ErrFull
		}
	}
	h.n += n
	return nil
}
