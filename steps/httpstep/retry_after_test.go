package httpstep

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/limit"
	"github.com/onceflow/onceflow/store"
)

// Retry-After is read in both of its forms, and whatever a destination writes in it —
// negative, fractional, signed, overflowing, a date in year 9999, garbage — gives either
// the delay it asks for, a delay longer than any cap (never one that wraps round to a
// short or negative one), or nothing (the backoff decides).
func TestRetryAfterHeaderForms(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	const forever = time.Duration(math.MaxInt64)
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"7", 7 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"007", 7 * time.Second},
		{"9223372036", 9223372036 * time.Second},
		{"9223372037", forever},              // past time.Duration: longer than any cap, not negative
		{"99999999999999999999999", forever}, // past int64
		{"-5", 0},
		{"+5", 0},
		{"1.5", 0},
		{"5s", 0},
		{"0x10", 0},
		{"soon", 0},
		{"", 0},
		{"7, 8", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"Friday, 31-Dec-99 23:59:59 GMT", 0},              // RFC 850 form, in the past
		{now.Add(time.Hour).Format(time.ANSIC), time.Hour}, // asctime form
		{"Fri, 31 Dec 9999 23:59:59 GMT", forever},         // saturates rather than wraps
		{"Sun, 06 Nov 1994 08:49:37 GMT", 0},               // in the past
		{"Sun, 06 Nov 1994 08:49:37 GMT; garbage", 0},
	}
	for _, tt := range tests {
		got := retryAfter(tt.header, now)
		if tt.want == forever {
			if got < 100*365*24*time.Hour {
				t.Errorf("Retry-After %q: %v, want a delay longer than any cap", tt.header, got)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("Retry-After %q: %v, want %v", tt.header, got, tt.want)
		}
	}
}

// A destination that asks to be left alone for longer than the step's cap (one hour by
// default) — Retry-After: 9223372036, or a date in year 9999 — parks the step for review
// with reason retry_after_too_long and the value it asked for in the audit event, instead
// of leaving it retrying until the year 2319. A Retry-After within the cap is honoured.
func TestRetryAfterLongerThanTheCapGoesToReview(t *testing.T) {
	for _, tt := range []struct {
		name, header string
		review       bool
	}{
		{"seconds", "9223372036", true},
		{"overflowing seconds", "92233720370000", true},
		{"year 9999", "Fri, 31 Dec 9999 23:59:59 GMT", true},
		{"just over an hour", "3601", true},
		{"half an hour", "1800", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", tt.header)
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			s := newStep(t, Spec{Request: Request{URL: srv.URL + "/leads"}}, nil)
			e := newManualEngine(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "crm", EffectKey: "lead-create:{input.n}", Do: s.Do}}})
			ctx := context.Background()
			run, err := e.c.Start(ctx, "w", "k", map[string]any{"n": 1})
			if err != nil {
				t.Fatal(err)
			}
			before := time.Unix(0, e.now.Load()).UTC()
			e.work(t, 1)
			steps, err := e.st.StepListByRun(ctx, run.ID)
			if err != nil || len(steps) != 1 {
				t.Fatalf("steps %v, %v", steps, err)
			}
			st := steps[0]
			if !tt.review {
				if st.State != store.StateRetrying || !st.NextAt.Equal(before.Add(30*time.Minute)) {
					t.Fatalf("Retry-After %s: step %s (%s) next at %v, want retrying at %v", tt.header, st.State, st.Reason, st.NextAt, before.Add(30*time.Minute))
				}
				return
			}
			if st.State != store.StateNeedsReview || st.Reason != "retry_after_too_long" {
				t.Fatalf("Retry-After %s: step %s (%s), next at %v; want needs_review (retry_after_too_long)", tt.header, st.State, st.Reason, st.NextAt)
			}
			events, err := e.st.EventList(ctx, store.EventListParams{RunID: run.ID})
			if err != nil {
				t.Fatal(err)
			}
			var detail map[string]any
			for _, ev := range events {
				if ev.Type == store.EventStepNeedsReview {
					_ = json.Unmarshal(ev.Detail, &detail)
				}
			}
			asked, _ := time.ParseDuration(fmtHas(detail["retry_after"]))
			if asked <= time.Hour || detail["max_retry_after"] != "1h0m0s" || !strings.Contains(fmtHas(detail["error"]), "Retry-After: "+tt.header) {
				t.Errorf("review event detail %v: want the delay asked for (retry_after), max_retry_after 1h0m0s and the header as the destination wrote it (Retry-After: %s) in the error", detail, tt.header)
			}
			if !strings.Contains(st.LastError, "Retry-After") {
				t.Errorf("the step's error %q does not say why it waits for review", st.LastError)
			}
		})
	}
}

// The cap is the step's: RetryPolicy.MaxRetryAfter.
func TestMaxRetryAfterIsTheStepsOwn(t *testing.T) {
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	s := newStep(t, Spec{Request: Request{URL: srv.URL}}, nil)
	e := newManualEngine(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "crm", Do: s.Do,
		Retry: onceflow.RetryPolicy{MaxRetryAfter: time.Minute}}}})
	ctx := context.Background()
	run, err := e.c.Start(ctx, "w", "k", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	e.work(t, 1)
	steps, _ := e.st.StepListByRun(ctx, run.ID)
	if st := steps[0]; st.State != store.StateNeedsReview || st.Reason != "retry_after_too_long" {
		t.Fatalf("a 2 min Retry-After with a 1 min cap: step %s (%s)", st.State, st.Reason)
	}
}

// With a limit on the destination, one 429 asking for 292 years holds back the host's
// other requests for no longer than the cap: the next run's step is not sent while the
// host is held back, waits (retrying, without occupying a worker) until the hold ends,
// and is sent then.
func TestRetryAfterHoldsTheHostBackNoLongerThanTheCap(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		got[key]++
		mu.Unlock()
		if key == "lead-create:1" {
			w.Header().Set("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id": 2}`)
	})
	var e *manualEngine
	clock := func() time.Time { return time.Unix(0, e.now.Load()).UTC() }
	lim := limit.New(limit.Options{Now: func() time.Time { return clock() }})
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := lim.Register(limit.HostKey(host), limit.Limit{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	s := newStep(t, Spec{Request: Request{URL: srv.URL + "/leads"}, Limiter: lim}, nil)
	e = newManualEngine(t, onceflow.Workflow{Name: "w", Steps: []onceflow.Step{{ID: "crm", EffectKey: "lead-create:{input.n}", Do: s.Do,
		Timeout: 2 * time.Second}}})
	ctx := context.Background()
	run1, err := e.c.Start(ctx, "w", "1", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	steps, _ := e.st.StepListByRun(ctx, run1.ID)
	if st := steps[0]; st.State != store.StateNeedsReview {
		t.Errorf("run 1's step after a 429 asking for year 9999: %s (%s)", st.State, st.Reason)
	}
	run2, err := e.c.Start(ctx, "w", "2", map[string]any{"n": 2})
	if err != nil {
		t.Fatal(err)
	}
	start := clock()
	if _, err := e.c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	steps, _ = e.st.StepListByRun(ctx, run2.ID)
	st := steps[0]
	mu.Lock()
	sent := got["lead-create:2"]
	mu.Unlock()
	if sent != 0 {
		t.Fatalf("run 2's request was sent while the host was held back")
	}
	if st.State != store.StateRetrying || st.NextAt.After(start.Add(time.Hour)) {
		t.Fatalf("run 2's step while the host is held back: %s (%s), next at %v; want retrying within the 1h cap of %v", st.State, st.Reason, st.NextAt, start)
	}
	// An hour later (the cap) the host is free again: run 2's request goes out.
	e.now.Add(int64(time.Hour))
	e.work(t, 2)
	steps, _ = e.st.StepListByRun(ctx, run2.ID)
	if st := steps[0]; st.State != store.StateCompleted {
		t.Fatalf("run 2's step an hour later: %s (%s): %s; the host is held back longer than the cap", st.State, st.Reason, st.LastError)
	}
}

// fmtHas returns v if it is a string, else "".
func fmtHas(v any) string {
	s, _ := v.(string)
	return s
}
