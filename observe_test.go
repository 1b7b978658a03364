package onceflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// syncBuffer is a log destination shared by goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logTo makes a bundle log JSON at debug level into buf.
func logTo(buf *syncBuffer) func(*onceflow.Config) {
	return func(c *onceflow.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// records returns the JSON log records in buf.
func records(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// The engine masks the secrets and the personal data of Config.Redact and Workflow.Redact
// in what it writes about a run — the attempt's error and excerpt, the step's last error,
// the audit events, the log lines — also where a destination or a condition repeats them
// in free text, and leaves the stored input intact.
func TestEngineMasksSecretsAndPersonalData(t *testing.T) {
	const (
		secret = "sk_live_canary_123456"
		email  = "ana.canary@example.com"
		phone  = "+351 900 111 222"
	)
	var logs syncBuffer
	b := setup(t, logTo(&logs), func(c *onceflow.Config) {
		c.Redact = onceflow.Redaction{Secrets: []string{secret}, Fields: []string{"phone"}}
	})
	b.register(t, onceflow.Workflow{Name: "lead", Entity: "lead:{input.id}", Redact: []string{"email"}, Steps: []onceflow.Step{
		{ID: "call", EffectKey: "call:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, &onceflow.StepError{Class: onceflow.Permanent, ResponseStatus: 400,
				ResponseExcerpt: fmt.Sprintf(`{"echo": {"email": %q, "phone": %q, "api_token": "t0k3n"}, "msg": "key %s"}`, email, phone, secret),
				Err:             fmt.Errorf("CRM refused %s / %s with key %s", strings.ToUpper(email), phone, secret)}
		}},
		{ID: "cond", EffectKey: "cond:{input.id}", Do: noop, When: func(*onceflow.StepContext) (bool, error) {
			return false, fmt.Errorf("cannot decide for %s", email)
		}},
	}})
	run := b.start(t, "lead", "r1", map[string]any{"id": "1", "email": email, "phone": phone})
	b.work(t)

	steps := b.steps(t, run.ID)
	if steps["call"].State != store.StateNeedsReview || steps["cond"].State != store.StateNeedsReview || steps["cond"].Reason != "condition_error" {
		t.Fatalf("steps: call %s, cond %s %s", steps["call"].State, steps["cond"].State, steps["cond"].Reason)
	}
	var written strings.Builder
	for _, s := range steps {
		fmt.Fprintln(&written, s.LastError)
	}
	attempts, err := b.store.AttemptListByRun(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attempts {
		fmt.Fprintln(&written, a.Error, a.ResponseExcerpt)
	}
	for _, e := range b.events(t, store.EventListParams{RunID: run.ID}) {
		fmt.Fprintln(&written, e.Reason, string(e.Detail))
	}
	all := written.String() + logs.String()
	for _, c := range []string{secret, email, strings.ToUpper(email), phone, "t0k3n"} {
		if strings.Contains(all, c) {
			t.Errorf("%q was written:\n%s", c, all)
		}
	}
	if len(attempts) != 1 || !strings.Contains(attempts[0].ResponseExcerpt, `"email":"[redacted]"`) || !strings.Contains(attempts[0].Error, "CRM refused [redacted]") {
		t.Errorf("attempts %+v: want the excerpt and error kept, masked", attempts[0])
	}
	if got := b.run(t, run.ID).Input; !strings.Contains(string(got), email) {
		t.Errorf("the stored input lost its data: %s", got)
	}
}

// A bad redaction field is refused when the client is built or the workflow registered.
func TestRedactionFieldsAreChecked(t *testing.T) {
	if _, err := onceflow.New(onceflow.Config{Store: setup(t).store, Redact: onceflow.Redaction{Fields: []string{"a..b"}}}); err == nil {
		t.Error("New accepted the redaction field a..b")
	}
	err := setup(t).client.Register(onceflow.Workflow{Name: "w", Redact: []string{"{input.email}"}, Steps: []onceflow.Step{{ID: "a", Do: noop}}})
	var de *onceflow.DefinitionError
	if !errors.As(err, &de) || de.Field != "redact" {
		t.Errorf("Register: %v, want a DefinitionError on redact", err)
	}
}

// recorder is a Metrics that keeps every measurement.
type recorder struct {
	mu  sync.Mutex
	got []onceflow.Measurement
}

func (r *recorder) Observe(m onceflow.Measurement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
}

// lines renders the measurements as "kind workflow/step outcome duration count", sorted,
// leaving out the write path's commits (see commits).
func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.got {
		if m.Kind == onceflow.MeasureCommit {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s/%s %s %v %d", m.Kind, m.Workflow, m.Step, m.Outcome, m.Duration, m.Count))
	}
	slices.Sort(out)
	return out
}

// commits sums the items of the successful write-path commits by kind.
func (r *recorder) commits() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, m := range r.got {
		if m.Kind == onceflow.MeasureCommit && m.Outcome == "ok" {
			out[m.Step] += m.Count
		}
	}
	return out
}

// The engine reports run starts (created, deduplicated, conflict), claims with their lag,
// attempts with their outcome and duration, effects reused from the ledger and reaped
// leases to Config.Metrics; and its log lines about a step name the run, workflow,
// entity, step, effect key and attempt, the lease reaper's included.
func TestMetricsAndStepLogs(t *testing.T) {
	rec := &recorder{}
	var logs syncBuffer
	b := setup(t, logTo(&logs), func(c *onceflow.Config) { c.Metrics = rec })
	var calls int
	b.register(t, onceflow.Workflow{Name: "w", Entity: "order:{input.id}", Steps: []onceflow.Step{
		{ID: "pay", EffectKey: "pay:{input.id}", Retry: onceflow.RetryPolicy{Initial: 2 * time.Second},
			Do: func(context.Context, *onceflow.StepContext) (any, error) {
				calls++
				if calls == 1 {
					return nil, errors.New("busy")
				}
				return nil, nil
			}},
		{ID: "mail", EffectKey: "mail:{input.customer}", Needs: []string{"pay"}, Do: noop},
	}})
	r1 := b.start(t, "w", "k1", map[string]any{"id": 1, "customer": "c"})
	b.start(t, "w", "k1", map[string]any{"id": 1, "customer": "c"})
	if _, err := b.client.Start(b.ctx, "w", "k1", map[string]any{"id": 9}); !errors.Is(err, onceflow.ErrRunConflict) {
		t.Fatalf("conflicting start: %v", err)
	}
	b.work(t) // pay fails, due again in 1 s
	b.clock.Set(b.steps(t, r1.ID)["pay"].NextAt.Add(4 * time.Second))
	b.work(t) // pay claimed 4 s late, then mail
	b.start(t, "w", "k2", map[string]any{"id": 2, "customer": "c"})
	b.work(t) // k2: pay; mail:c comes from the ledger

	// A worker that vanished after claiming k3's pay: its lease expires and is reaped.
	r3 := b.start(t, "w", "k3", map[string]any{"id": 3, "customer": "d"})
	res, err := b.store.StepClaim(b.ctx, store.StepClaimParams{Owner: "gone", Now: b.clock.Now(), LeaseFor: time.Second, Limit: 1, Workflows: []string{"w"},
		Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) { return store.EffectSpec{Key: "pay:3"}, nil }})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("claim by the vanished worker: %v %v", res, err)
	}
	b.clock.Advance(2 * time.Second)
	if n, err := b.client.Reap(b.ctx); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}

	want := []string{
		"run_start w/ created 0s 0", "run_start w/ deduplicated 0s 0", "run_start w/ conflict 0s 0",
		"run_start w/ created 0s 0", "run_start w/ created 0s 0",
		"step_claim w/pay  0s 0", "step_claim w/pay  4s 0", "step_claim w/mail  0s 0", "step_claim w/pay  0s 0",
		"attempt w/pay retryable 0s 0", "attempt w/pay success 0s 0", "attempt w/mail success 0s 0", "attempt w/pay success 0s 0",
		"effect_reuse w/mail  0s 0",
		"lease_reap /  0s 1",
	}
	slices.Sort(want)
	if got := rec.lines(); !slices.Equal(got, want) {
		t.Errorf("measurements:\n got %q\nwant %q", got, want)
	}
	// Every start (the repeated ones append their audit event), record and claimed,
	// reused or parked step went through a measured commit.
	if err := b.client.Flush(b.ctx); err != nil {
		t.Fatal(err)
	}
	wantCommits := map[string]int{onceflow.CommitStarts: 5, onceflow.CommitRecords: 4, onceflow.CommitClaims: 5}
	if got := rec.commits(); !maps.Equal(got, wantCommits) {
		t.Errorf("items committed by kind = %v, want %v", got, wantCommits)
	}

	var reaped, reused bool
	for _, l := range records(t, &logs) {
		if _, ok := l["step"]; !ok {
			continue
		}
		for _, k := range []string{"run_id", "workflow", "entity", "effect_key", "attempt"} {
			if _, ok := l[k]; !ok {
				t.Errorf("log line about a step lacks %s: %v", k, l)
			}
		}
		switch {
		case strings.HasPrefix(l["msg"].(string), "lease expired"):
			reaped = l["run_id"] == float64(r3.ID) && l["entity"] == "order:3" && l["effect_key"] == "pay:3" && l["attempt"] == float64(1)
		case strings.HasPrefix(l["msg"].(string), "step completed from the effect ledger"):
			reused = l["effect_key"] == "mail:c" && l["entity"] == "order:2"
		}
	}
	if !reaped || !reused {
		t.Errorf("want log lines for the reaped lease (%v) and the reused effect (%v):\n%s", reaped, reused, logs.String())
	}
}
