package httpstep

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// Run by the engine through a 503, a response cut short (the outcome unknown) and a
// success, the step sends the same Idempotency-Key — the effect
// key — on every attempt, so that the destination can recognise the repeats.
func TestIdempotencyKeySameOnEveryRetry(t *testing.T) {
	ctx := context.Background()
	var n atomic.Int64
	rec, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			// A response cut short: the transport cannot replay it, the outcome is unknown.
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				io.WriteString(conn, "HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{")
				conn.Close()
			}
		default:
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id": "lead_1"}`)
		}
	})
	s := newStep(t, Spec{Request: Request{URL: srv.URL + "/leads"}}, nil)

	e := newManualEngine(t, onceflow.Workflow{Name: "website-lead", Steps: []onceflow.Step{{
		ID: "crm", EffectKey: "lead-create:{input.submission_id}", Do: s.Do,
		Retry: onceflow.RetryPolicy{MaxAttempts: 5, Initial: time.Second},
	}}})
	c, st := e.c, e.st
	run, err := c.Start(ctx, "website-lead", "form-8812", map[string]any{"submission_id": 8812})
	if err != nil {
		t.Fatal(err)
	}
	e.work(t, 3)
	if r, err := c.GetRun(ctx, run.ID); err != nil || r.State != store.StateCompleted {
		t.Fatalf("run %+v, %v; want completed", r, err)
	}
	atts, err := st.AttemptListByRun(ctx, run.ID)
	if err != nil || len(atts) != 3 || atts[1].Outcome != store.OutcomeUnknown {
		t.Fatalf("attempts %v, %v; want 3, the second with an unknown outcome", atts, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.requests) != 3 {
		t.Fatalf("destination saw %d requests, want 3", len(rec.requests))
	}
	for i, r := range rec.requests {
		if got := r.Header.Get("Idempotency-Key"); got != "lead-create:8812" {
			t.Errorf("attempt %d sent Idempotency-Key %q, want the effect key lead-create:8812 on every attempt", i+1, got)
		}
	}
}
