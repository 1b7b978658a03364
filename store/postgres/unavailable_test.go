package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// proxiedStore opens a store on a fresh schema through a fault proxy in front of the test
// database (the schema is created directly, not through the proxy).
func proxiedStore(t *testing.T, opts postgres.Options) (*postgres.Store, *faultProxy) {
	t.Helper()
	u, err := url.Parse(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	opts.Schema = newSchema(t)
	openStore(t, opts.Schema).Close()
	proxy := newFaultProxy(t, u.Host)
	proxied := *u
	proxied.Host = proxy.ln.Addr().String()
	q := proxied.Query()
	q.Set("connect_timeout", "5")
	proxied.RawQuery = q.Encode()
	s, err := postgres.Open(t.Context(), proxied.String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, proxy
}

func noopWorkflow() onceflow.Workflow {
	return onceflow.Workflow{Name: "noop", Steps: []onceflow.Step{{ID: "s", Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}
}

// A restart of the server that refuses connections for half a second — every open
// connection is reset, and new ones are refused — fails no start: the store retries the
// start's transaction within its retry budget (Options.RetryFor), and every start
// returns its run, stored once.
func TestStartsOutlastAShortRestart(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedStore(t, postgres.Options{})
	c, err := onceflow.New(onceflow.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(noopWorkflow()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Start(ctx, "noop", "before", nil); err != nil {
		t.Fatal(err)
	}
	// The restart: what is open is reset, what is new is refused, for 0.5 s.
	proxy.refuse.Store(true)
	proxy.drop()
	back := time.AfterFunc(500*time.Millisecond, func() { proxy.refuse.Store(false) })
	defer back.Stop()
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.Start(ctx, "noop", fmt.Sprintf("during-%02d", i), map[string]int{"i": i})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("starts failed across a 0.5 s restart: %v", err)
	}
	if proxy.refused.Load() == 0 {
		t.Fatal("no connection was refused: the starts did not meet the restart")
	}
	for i := range n {
		if _, err := s.RunGetByKey(ctx, "noop", fmt.Sprintf("during-%02d", i)); err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	t.Logf("connections refused during the restart: %d", proxy.refused.Load())
}

// A server that stays unreachable past the retry budget: starts and reads fail with
// store.ErrUnavailable (not with an error that looks like the request's), within about
// the budget.
func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedStore(t, postgres.Options{RetryFor: 300 * time.Millisecond})
	c, err := onceflow.New(onceflow.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(noopWorkflow()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	run, err := c.Start(ctx, "noop", "before", nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy.refuse.Store(true)
	proxy.drop()
	if _, err := c.Start(ctx, "noop", "during", nil); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("start while unreachable: %v, want store.ErrUnavailable", err)
	}
	if _, err := s.RunGetByID(ctx, run.ID); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("read while unreachable: %v, want store.ErrUnavailable", err)
	}
	if _, err := s.RunList(ctx, store.RunListParams{}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("list while unreachable: %v, want store.ErrUnavailable", err)
	}
	proxy.refuse.Store(false)
	if _, err := s.RunGetByID(ctx, run.ID); err != nil {
		t.Errorf("read once reachable again: %v", err)
	}
	// The end of the caller's context is the caller's, not the database's.
	proxy.refuse.Store(true)
	proxy.drop()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.RunGetByID(cctx, run.ID); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("read with a cancelled context: %v, want the context's error alone", err)
	}
}
