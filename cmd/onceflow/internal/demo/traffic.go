package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// caller posts to onceflow's API the way a website back end or a payment provider does.
type caller struct {
	base string
	http *http.Client
}

func newCaller(base string) *caller {
	return &caller{base: base, http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}}
}

func (c *caller) close() { c.http.CloseIdleConnections() }

// answer is an HTTP response, read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to path with headers.
func (c *caller) post(ctx context.Context, path string, header http.Header, body []byte) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// waitRetryAfter waits as long as a Retry-After header asks (whole seconds; 1 s when
// absent or unreadable), or until ctx ends.
func waitRetryAfter(ctx context.Context, h http.Header) error {
	secs, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || secs < 0 || secs > 60 {
		secs = 1
	}
	t := time.NewTimer(time.Duration(secs) * time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fanOut calls do(i) for i in [0, n) from senders goroutines, stopping early when ctx
// ends.
func fanOut(ctx context.Context, n, senders int, do func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := range work {
				do(i)
			}
		})
	}
	for i := range n {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

// together runs do twice at the same instant and waits for both.
func together(do func()) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 2 {
		wg.Go(func() { <-gate; do() })
	}
	close(gate)
	wg.Wait()
}

// runIDs records which run each run key's answers named, to check that every key started
// exactly one run.
type runIDs struct {
	mu   sync.Mutex
	ids  map[string]map[int64]bool // run key → run IDs answered
	errs []string
}

func newRunIDs() *runIDs { return &runIDs{ids: map[string]map[int64]bool{}} }

func (r *runIDs) add(key string, id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids[key] == nil {
		r.ids[key] = map[int64]bool{}
	}
	r.ids[key][id] = true
}

func (r *runIDs) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// problems lists keys answered with more than one run, and the errors noted.
func (r *runIDs) problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.errs...)
	for _, k := range sortedKeys(r.ids) {
		if n := len(r.ids[k]); n > 1 {
			out = append(out, fmt.Sprintf("run key %s was answered with %d different runs", k, n))
		}
	}
	return out
}

// all returns every run ID answered.
func (r *runIDs) all() map[int64]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int64]string{}
	for k, ids := range r.ids {
		for id := range ids {
			out[id] = k
		}
	}
	return out
}
