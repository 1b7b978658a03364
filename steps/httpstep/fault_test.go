package httpstep

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// faultyDestination applies each effect once per Idempotency-Key and answers a repeat with
// the first answer, as a destination that deduplicates does; misbehave decides, for the
// n-th request, how it answers after applying the effect (true: it misbehaved).
type faultyDestination struct {
	*httptest.Server
	mu        sync.Mutex
	requests  map[string]int // Idempotency-Key → requests
	applied   map[string]int // Idempotency-Key → applications
	misbehave func(n int, w http.ResponseWriter, r *http.Request) bool
	n         atomic.Int64
}

func newFaultyDestination(t *testing.T, misbehave func(n int, w http.ResponseWriter, r *http.Request) bool) *faultyDestination {
	d := &faultyDestination{requests: map[string]int{}, applied: map[string]int{}, misbehave: misbehave}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		d.requests[key]++
		if d.applied[key] == 0 {
			d.applied[key] = 1
		}
		d.mu.Unlock()
		if d.misbehave(int(d.n.Add(1)), w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": %q}`, "lead-"+key)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *faultyDestination) counts(key string) (requests, applied int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests[key], d.applied[key]
}

// faultRun runs one http step to its end through the engine on SQLite with a manual clock
// and returns the step and its attempts.
func faultRun(t *testing.T, spec Spec, onUnknown onceflow.UnknownAction) (*store.Step, []*store.Attempt) {
	t.Helper()
	ctx := context.Background()
	s := newStep(t, spec, nil)
	e := newManualEngine(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{
		ID: "crm", EffectKey: "lead-create:{input.n}", Do: s.Do, OnUnknown: onUnknown,
		Retry: onceflow.RetryPolicy{MaxAttempts: 5, Initial: time.Second},
	}}})
	st := e.st
	run, err := e.c.Start(ctx, "w", "k", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	e.work(t, 5)
	steps, err := st.StepListByRun(ctx, run.ID)
	if err != nil || len(steps) != 1 {
		t.Fatalf("steps %v, %v", steps, err)
	}
	atts, err := st.AttemptListByRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return steps[0], atts
}

// A destination that applies the effect and then answers too slowly (past the step's
// timeout), resets the connection, or sends a response larger than the limit: the step
// never loses the effect and never repeats it. After a slow answer or a reset the outcome
// is unknown, and the step is sent again under the same key (the destination answers the
// repeat from its record) or, where the destination cannot deduplicate, parked for review
// without a second request. A response over the 1 MB limit is read only up to it: the
// effect is recorded once, with the status in place of the cut body.
func TestDestinationFaults(t *testing.T) {
	const key = "lead-create:1"
	slow := func(release <-chan struct{}) func(int, http.ResponseWriter, *http.Request) bool {
		return func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n > 1 {
				return false
			}
			select { // past the step's timeout: the caller gives up first
			case <-r.Context().Done():
			case <-release:
			}
			return true
		}
	}
	reset := func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n > 1 {
			return false
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return true
		}
		_ = conn.(*net.TCPConn).SetLinger(0) // close with a reset
		conn.Close()
		return true
	}
	huge := func(n int, w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": "lead-1", "padding": "%s"}`, strings.Repeat("x", 3<<20))
		return true
	}
	tests := []struct {
		name      string
		misbehave func(*testing.T) func(int, http.ResponseWriter, *http.Request) bool
		onUnknown onceflow.UnknownAction
		state     store.State
		requests  int
		outcomes  []store.Outcome
		output    string
	}{
		{"slow, retried with the same key", func(t *testing.T) func(int, http.ResponseWriter, *http.Request) bool {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			return slow(release)
		}, onceflow.RetrySameKey, store.StateCompleted, 2, []store.Outcome{store.OutcomeUnknown, store.OutcomeSuccess}, `{"id": "lead-lead-create:1"}`},
		{"slow, destination cannot deduplicate", func(t *testing.T) func(int, http.ResponseWriter, *http.Request) bool {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			return slow(release)
		}, onceflow.ReviewUnknown, store.StateNeedsReview, 1, []store.Outcome{store.OutcomeUnknown}, ""},
		{"reset, retried with the same key", func(*testing.T) func(int, http.ResponseWriter, *http.Request) bool { return reset },
			onceflow.RetrySameKey, store.StateCompleted, 2, []store.Outcome{store.OutcomeUnknown, store.OutcomeSuccess}, `{"id": "lead-lead-create:1"}`},
		{"reset, destination cannot deduplicate", func(*testing.T) func(int, http.ResponseWriter, *http.Request) bool { return reset },
			onceflow.ReviewUnknown, store.StateNeedsReview, 1, []store.Outcome{store.OutcomeUnknown}, ""},
		{"response over the limit", func(*testing.T) func(int, http.ResponseWriter, *http.Request) bool { return huge },
			onceflow.RetrySameKey, store.StateCompleted, 1, []store.Outcome{store.OutcomeSuccess}, `{"status": 201}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := newFaultyDestination(t, tt.misbehave(t))
			step, atts := faultRun(t, Spec{Request: Request{URL: dest.URL + "/leads"}, Timeout: 200 * time.Millisecond}, tt.onUnknown)
			if step.State != tt.state {
				t.Fatalf("step %s (%s), want %s", step.State, step.Reason, tt.state)
			}
			requests, applied := dest.counts(key)
			if requests != tt.requests || applied != 1 {
				t.Fatalf("destination saw %d requests for %s and applied it %d times; want %d and 1", requests, key, applied, tt.requests)
			}
			var outcomes []store.Outcome
			for _, a := range atts {
				outcomes = append(outcomes, a.Outcome)
				if a.EffectKey != key {
					t.Errorf("attempt %d under key %q, want %q", a.Number, a.EffectKey, key)
				}
			}
			if fmt.Sprint(outcomes) != fmt.Sprint(tt.outcomes) {
				t.Fatalf("attempt outcomes %v, want %v", outcomes, tt.outcomes)
			}
			if tt.output != "" {
				var got, want any
				if err := json.Unmarshal(step.Output, &got); err != nil {
					t.Fatalf("output %s: %v", step.Output, err)
				}
				_ = json.Unmarshal([]byte(tt.output), &want)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("output %s, want %s", step.Output, tt.output)
				}
			}
			if len(step.Output) > 1<<20 {
				t.Fatalf("output of %d bytes kept, over the 1 MB read limit", len(step.Output))
			}
		})
	}
}
