package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/store"
)

// newClient returns a client on st configured as `onceflow serve` configures its own
// (workers, the Prometheus measurements) with a chain of k no-op steps registered as
// workflow, whose executions count in executed.
func newClient(st store.Store, workers int, workflow string, k int, executed *atomic.Int64) (*onceflow.Client, *metrics.Metrics, error) {
	m := metrics.New(metrics.Config{Store: st})
	c, err := onceflow.New(onceflow.Config{Store: st, Workers: workers, Metrics: m})
	if err != nil {
		return nil, nil, err
	}
	if err := c.Register(chain(workflow, k, executed)); err != nil {
		return nil, nil, err
	}
	return c, m, nil
}

// chain returns a workflow of k no-op steps, each needing the one before; every execution
// of a step adds one to executed.
func chain(name string, k int, executed *atomic.Int64) onceflow.Workflow {
	w := onceflow.Workflow{Name: name}
	for i := range k {
		s := onceflow.Step{
			ID: fmt.Sprintf("s%d", i+1),
			Do: func(context.Context, *onceflow.StepContext) (any, error) {
				executed.Add(1)
				return map[string]any{"ok": true}, nil
			},
		}
		if i > 0 {
			s.Needs = []string{fmt.Sprintf("s%d", i)}
		}
		w.Steps = append(w.Steps, s)
	}
	return w
}

// serving is a running Client.Serve.
type serving struct {
	cancel context.CancelFunc
	done   chan error
}

// serve runs c.Serve until stop is called or ctx ends.
func serve(ctx context.Context, c *onceflow.Client) *serving {
	ctx, cancel := context.WithCancel(ctx)
	s := &serving{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- c.Serve(ctx) }()
	return s
}

// stop ends Serve, letting running steps finish, and returns what it returned.
func (s *serving) stop() error {
	s.cancel()
	return <-s.done
}

// counts are a workflow's runs and steps by state, from StatsGet.
type counts struct {
	runs, steps map[store.State]int64
}

// totalRuns is the number of runs, whatever their state.
func (c counts) totalRuns() int64 {
	var n int64
	for _, v := range c.runs {
		n += v
	}
	return n
}

// stuck is how many runs ended somewhere other than completed.
func (c counts) stuck() int64 {
	return c.runs[store.StateNeedsReview] + c.runs[store.StateFailed] + c.runs[store.StateCancelled]
}

// countWorkflow reads the store's counts of workflow's runs and steps.
func countWorkflow(ctx context.Context, st store.Store, workflow string) (counts, error) {
	s, err := st.StatsGet(ctx, store.StatsGetParams{Now: time.Now()})
	if err != nil {
		return counts{}, err
	}
	c := counts{runs: map[store.State]int64{}, steps: map[store.State]int64{}}
	for _, r := range s.Runs {
		if r.Workflow == workflow {
			c.runs[r.State] += r.Count
		}
	}
	for _, r := range s.Steps {
		if r.Workflow == workflow {
			c.steps[r.State] += r.Count
		}
	}
	return c, nil
}

// awaitCompleted waits until runs runs of workflow are completed and returns when it saw
// them so, and the counts it saw. The store is asked often once executed has reached
// steps, the number of step executions that completing them takes, and every few seconds
// otherwise (steps completed from the ledger run nothing). A run that ends in review,
// failed or cancelled is an error: no-op steps cannot fail.
func awaitCompleted(ctx context.Context, st store.Store, workflow string, runs int64, executed *atomic.Int64, steps int64) (time.Time, counts, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var asked time.Time
	for {
		if executed.Load() >= steps || time.Since(asked) > 2*time.Second {
			asked = time.Now()
			c, err := countWorkflow(ctx, st, workflow)
			if err != nil {
				return time.Time{}, c, err
			}
			if c.runs[store.StateCompleted] >= runs {
				return time.Now(), c, nil
			}
			if n := c.stuck(); n > 0 {
				return time.Time{}, c, fmt.Errorf("%d runs of %s ended in review, failed or cancelled instead of completed", n, workflow)
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, counts{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// quantiles returns the p50, p99 and maximum in milliseconds (nearest rank).
func (l *latencies) quantiles() (p50, p99, maxMs float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(l.d)
	rank := func(q float64) float64 {
		i := int(q*float64(len(l.d))+0.999999) - 1
		i = max(0, min(i, len(l.d)-1))
		return ms(l.d[i])
	}
	return rank(0.50), rank(0.99), ms(l.d[len(l.d)-1])
}

// ms returns d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

// secs returns d in seconds, to the millisecond.
func secs(d time.Duration) float64 { return round(d.Seconds(), 3) }

// perSecond returns n per second over d, to a tenth; 0 for an empty d.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round(float64(n)/d.Seconds(), 1)
}

// round rounds x to places decimal places.
func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// startMany starts runs keys key(0)…key(n-1) of workflow from starters goroutines, with
// {"n": i} as input, and returns their IDs and the latency of each Start. A key that
// turns out to be known already is an error: the keys are meant to be new.
func startMany(ctx context.Context, c *onceflow.Client, workflow string, n, starters int, key func(int) string,
	started *atomic.Int64, lat *latencies) ([]int64, error) {
	ids := make([]int64, n)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, starters)
	for g := range starters {
		wg.Go(func() {
			var mine []time.Duration
			defer func() { lat.add(mine) }()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				r, err := c.Start(ctx, workflow, key(i), map[string]any{"n": i})
				mine = append(mine, time.Since(t))
				if err == nil && r.Duplicate {
					err = fmt.Errorf("start %s: the new key %q found run %d", workflow, key(i), r.ID)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs[g] = err
					}
					cancel()
					return
				}
				ids[i] = r.ID
				started.Add(1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ids, parent.Err()
}
