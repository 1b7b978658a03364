package onceflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// clock is a manual clock shared by the engine and the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type bundle struct {
	ctx    context.Context
	path   string
	store  *sqlite.Store
	client *onceflow.Client
	clock  *clock
}

// setup opens a fresh SQLite file and a client on it with a manual clock, which every
// decision reads as it is (ClockSync negative), and a fixed jitter of 0.5.
func setup(t *testing.T, mod ...func(*onceflow.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := newClock()
	cfg := onceflow.Config{Store: st, WorkerID: "test-worker", Clock: clk.Now, ClockSync: -1, Rand: func() float64 { return 0.5 }}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := onceflow.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{ctx: ctx, path: path, store: st, client: c, clock: clk}
}

func (b *bundle) register(t *testing.T, w onceflow.Workflow) {
	t.Helper()
	if err := b.client.Register(w); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) start(t *testing.T, workflow, key string, input any) *onceflow.Run {
	t.Helper()
	r, err := b.client.Start(b.ctx, workflow, key, input)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *bundle) work(t *testing.T) int {
	t.Helper()
	n, err := b.client.Work(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *bundle) steps(t *testing.T, runID int64) map[string]*store.Step {
	t.Helper()
	list, err := b.store.StepListByRun(b.ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*store.Step{}
	for _, s := range list {
		out[s.Name] = s
	}
	return out
}

func (b *bundle) run(t *testing.T, id int64) *store.Run {
	t.Helper()
	r, err := b.store.RunGetByID(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *bundle) events(t *testing.T, p store.EventListParams) []*store.Event {
	t.Helper()
	evs, err := b.store.EventList(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// eventTypes lists the types of events, optionally only those of one step.
func eventTypes(evs []*store.Event, step string) []store.EventType {
	var out []store.EventType
	for _, e := range evs {
		if step == "" || e.StepName == step {
			out = append(out, e.Type)
		}
	}
	return out
}

func detailOf(t *testing.T, e *store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Detail, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// destination is a counting HTTP destination that deduplicates by Idempotency-Key.
type destination struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	keys     []string
	applied  map[string]int // effects applied per key
	// fail, when set, decides the status of a request before it is applied (0: apply).
	fail func(n int, r *http.Request) int
}

func newDestination(t *testing.T) *destination {
	t.Helper()
	d := &destination{applied: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		d.requests++
		n := d.requests
		d.keys = append(d.keys, key)
		fail := d.fail
		d.mu.Unlock()
		if fail != nil {
			if code := fail(n, r); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
		d.mu.Lock()
		if d.applied[key] == 0 {
			d.applied[key]++
		}
		d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"lead-` + key + `"}`))
	}))
	t.Cleanup(d.Close)
	return d
}

// onRequest sets the function that decides each request's fate before it is applied.
func (d *destination) onRequest(f func(n int, r *http.Request) int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail = f
}

func (d *destination) snapshot() (requests int, keys []string, applied map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cp := map[string]int{}
	for k, v := range d.applied {
		cp[k] = v
	}
	return d.requests, append([]string(nil), d.keys...), cp
}

// post is a step function that sends the effect key to a destination as Idempotency-Key and
// classifies its answer.
func post(url string) onceflow.StepFunc {
	return func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return nil, onceflow.PermanentError(err)
		}
		req.Header.Set("Idempotency-Key", sc.EffectKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, onceflow.UnknownOutcomeError(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		switch {
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			return nil, &onceflow.StepError{Class: onceflow.Retryable, ResponseStatus: resp.StatusCode, Err: errorf("destination answered %d", resp.StatusCode)}
		case resp.StatusCode >= 400:
			return nil, &onceflow.StepError{Class: onceflow.Permanent, ResponseStatus: resp.StatusCode, Err: errorf("destination refused: %d", resp.StatusCode)}
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, onceflow.UnknownOutcomeError(err)
		}
		return out, nil
	}
}

// waitStarted waits until a step closes started. It fails the test when worked (the result
// of a Work call, or nil under Serve) comes first, or after 30 s: a start acknowledged
// before it was stored leaves no step to claim, and the step never starts.
func waitStarted(t *testing.T, step string, started <-chan struct{}, worked <-chan error) {
	t.Helper()
	select {
	case <-started:
	case err := <-worked:
		t.Fatalf("Work returned (%v) before step %s started: the acknowledged start's steps were not there to claim", err, step)
	case <-time.After(30 * time.Second):
		t.Fatalf("step %s did not start within 30 s of its run's acknowledged start", step)
	}
}

func noop(context.Context, *onceflow.StepContext) (any, error) {
	return map[string]any{"ok": true}, nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
