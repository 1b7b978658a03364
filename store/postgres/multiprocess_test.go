package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// The environment of a worker process the multi-process test starts.
const (
	childEnv       = "ONCEFLOW_PG_TEST_CHILD" // "worker" makes TestMain run childWorker
	childSchemaEnv = "ONCEFLOW_PG_TEST_SCHEMA"
	childDestEnv   = "ONCEFLOW_PG_TEST_DEST"
	childIndexEnv  = "ONCEFLOW_PG_TEST_WORKER"
)

// Settings of the multi-process test: short leases so that the steps of a killed worker
// are retried within seconds.
const (
	mpRuns      = 1000
	mpCustomers = 800 // run i reserves for customer i % 800: 200 customers have two runs
	mpWorkers   = 3
	mpStarters  = 4   // goroutines that each start every run
	mpKills     = 6   // SIGKILLs, each when the destination receives a request
	mpKillEvery = 250 // requests between kill moments
	mpLeaseFor  = 2 * time.Second
	mpReapEvery = 200 * time.Millisecond
)

// mpWorkflow reserves stock for a customer (an effect shared by the customer's runs), then
// charges and notifies for the order. Each step POSTs to dest with its effect key as the
// Idempotency-Key and names, in X-Business-Id, the business action it performs.
func mpWorkflow(dest, worker string) onceflow.Workflow {
	call := func(action string) onceflow.StepFunc {
		return func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			var in struct{ Order, Customer int }
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			business := fmt.Sprintf("%s/order-%d", action, in.Order)
			if action == "reserve" {
				business = fmt.Sprintf("reserve/customer-%d", in.Customer)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest, nil)
			if err != nil {
				return nil, onceflow.PermanentError(err)
			}
			req.Header.Set("Idempotency-Key", sc.EffectKey)
			req.Header.Set("X-Business-Id", business)
			req.Header.Set("X-Worker", worker)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, onceflow.UnknownOutcomeError(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, &onceflow.StepError{Class: onceflow.Unknown, ResponseStatus: resp.StatusCode, Err: fmt.Errorf("destination answered %d", resp.StatusCode)}
			}
			var out map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				return nil, onceflow.UnknownOutcomeError(err)
			}
			return out, nil
		}
	}
	retry := onceflow.RetryPolicy{MaxAttempts: 30, Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	return onceflow.Workflow{Name: "mp", Entity: "order:{input.order}", RequiredInput: []string{"order", "customer"}, Steps: []onceflow.Step{
		{ID: "reserve", EffectKey: "reserve:{input.customer}", Do: call("reserve"), Retry: retry},
		{ID: "charge", Needs: []string{"reserve"}, EffectKey: "charge:{input.order}", Do: call("charge"), Retry: retry},
		{ID: "notify", Needs: []string{"charge"}, EffectKey: "notify:{input.order}", Do: call("notify"), Retry: retry},
	}}
}

// childWorker is the body of a worker process: it serves the test's schema until it is
// killed, or stops gracefully on SIGTERM.
func childWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := postgres.Open(ctx, os.Getenv(testsvc.PostgresEnv), postgres.Options{Schema: os.Getenv(childSchemaEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st, Workers: 8, LeaseFor: mpLeaseFor, ReapInterval: mpReapEvery,
		PollInterval: 250 * time.Millisecond, EffectWait: 100 * time.Millisecond})
	if err == nil {
		err = c.Register(mpWorkflow(os.Getenv(childDestEnv), os.Getenv(childIndexEnv)))
	}
	if err == nil {
		err = c.Serve(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// mpDestination is the business system the steps call. It deduplicates by
// Idempotency-Key, and counts what a duplicate would look like to the business: a second
// application of the same business action.
type mpDestination struct {
	*httptest.Server
	mu         sync.Mutex
	requests   int
	applied    map[string]int // idempotency key → applications
	byBusiness map[string]int // business action → applications
	nextKill   int            // the request number from which the next kill is due
	killing    bool
	kills      int
	kill       chan int // worker index to kill
}

func newMPDestination(t *testing.T) *mpDestination {
	d := &mpDestination{applied: map[string]int{}, byBusiness: map[string]int{}, nextKill: mpKillEvery, kill: make(chan int, 1)}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

func (d *mpDestination) serve(w http.ResponseWriter, r *http.Request) {
	key, business := r.Header.Get("Idempotency-Key"), r.Header.Get("X-Business-Id")
	worker, _ := strconv.Atoi(r.Header.Get("X-Worker"))
	d.mu.Lock()
	d.requests++
	if d.applied[key] == 0 {
		d.byBusiness[business]++
	}
	d.applied[key] = 1
	killNow := !d.killing && d.kills < mpKills && d.requests >= d.nextKill
	if killNow {
		d.killing = true
		d.kills++
		d.nextKill = d.requests + mpKillEvery
	}
	d.mu.Unlock()
	if killNow {
		// The effect is applied; the worker dies before it hears so, mid-step.
		d.kill <- worker
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"ref": %q}`, "ref-"+key)
}

// killed says the worker killed at the last kill moment has been restarted.
func (d *mpDestination) killed() {
	d.mu.Lock()
	d.killing = false
	d.mu.Unlock()
}

// Three worker processes share one schema. The parent starts 1,000 runs of a three-step
// workflow from several goroutines at once, each starting every run; some runs share the
// effect key of their first step. Several times, when the destination receives a request,
// the parent SIGKILLs the worker that sent it, mid-step, and starts it again. Every run
// completes, none is lost, every effect key is applied once at the destination and
// completed once in the ledger, and the audit trail records every step's completion.
func TestMultiProcess(t *testing.T) {
	u := testURL(t)
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	schema := newSchema(t)
	parent := openStore(t, schema)
	logLedgerCompletions(t, schema)
	dest := newMPDestination(t)

	// The workers.
	procs := make([]*exec.Cmd, mpWorkers)
	startWorker := func(i int) error {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=worker", testsvc.PostgresEnv+"="+u, childSchemaEnv+"="+schema,
			childDestEnv+"="+dest.URL, childIndexEnv+"="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start worker %d: %w", i, err)
		}
		procs[i] = cmd
		return nil
	}
	for i := range procs {
		if err := startWorker(i); err != nil {
			t.Fatal(err)
		}
	}
	var killer sync.WaitGroup
	stopKiller := make(chan struct{})
	defer func() {
		close(stopKiller)
		killer.Wait()
		for i, p := range procs {
			if p == nil || p.ProcessState != nil {
				continue
			}
			_ = p.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- p.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker %d did not stop cleanly: %v", i, err)
				}
			case <-time.After(20 * time.Second):
				_ = p.Process.Kill()
				<-done
				t.Errorf("worker %d did not stop within 20 s of SIGTERM", i)
			}
		}
	}()
	killer.Go(func() {
		for {
			select {
			case <-stopKiller:
				return
			case i := <-dest.kill:
				if err := procs[i].Process.Signal(syscall.SIGKILL); err != nil {
					t.Errorf("kill worker %d: %v", i, err)
				}
				_ = procs[i].Wait()
				if ws, ok := procs[i].ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Errorf("worker %d did not die by SIGKILL: %v", i, procs[i].ProcessState)
				}
				if err := startWorker(i); err != nil {
					t.Error(err)
					procs[i] = nil
					return
				}
				dest.killed()
			}
		}
	})

	// The starts: every run started by every starter, in a different order each.
	c, err := onceflow.New(onceflow.Config{Store: parent, WorkerID: "starter"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(mpWorkflow(dest.URL, "-1")); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var startMu sync.Mutex
	created, duplicates := 0, 0
	runIDs := map[string]int64{}
	var starters sync.WaitGroup
	for range mpStarters {
		starters.Go(func() {
			for _, i := range rand.Perm(mpRuns) {
				run, err := c.Start(t.Context(), "mp", fmt.Sprintf("order-%04d", i), map[string]any{"order": i, "customer": i % mpCustomers})
				if err != nil {
					t.Errorf("Start order-%04d: %v", i, err)
					return
				}
				startMu.Lock()
				if run.Duplicate {
					duplicates++
				} else {
					created++
				}
				if prev, ok := runIDs[run.RunKey]; ok && prev != run.ID {
					t.Errorf("Start %s returned run %d and run %d", run.RunKey, prev, run.ID)
				}
				runIDs[run.RunKey] = run.ID
				startMu.Unlock()
			}
		})
	}
	starters.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if created != mpRuns || duplicates != (mpStarters-1)*mpRuns {
		t.Fatalf("starts created %d runs and found %d duplicates, want %d and %d", created, duplicates, mpRuns, (mpStarters-1)*mpRuns)
	}

	// Wait until every run completed.
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var completed int
	for {
		done, err := parent.RunList(t.Context(), store.RunListParams{State: store.StateCompleted, Limit: mpRuns})
		if err != nil {
			t.Fatal(err)
		}
		if completed = len(done); completed == mpRuns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs completed after 2 minutes", completed, mpRuns)
		}
		<-tick.C
	}
	elapsed := time.Since(began)

	// None lost: 1,000 runs, each with its three steps completed.
	all, err := parent.RunList(t.Context(), store.RunListParams{Limit: 2 * mpRuns})
	if err != nil {
		t.Fatal(err)
	}
	stepIDs := map[int64]bool{}
	lost := mpRuns - len(all)
	for _, r := range all {
		steps, err := parent.StepListByRun(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		ok := len(steps) == 3 && r.State == store.StateCompleted
		for _, s := range steps {
			ok = ok && s.State == store.StateCompleted
			stepIDs[s.ID] = true
		}
		if !ok {
			lost++
			t.Errorf("run %s (%d) is %s with %d steps, want completed with 3 completed steps", r.RunKey, r.ID, r.State, len(steps))
		}
	}

	// Every effect key applied once at the destination, and completed once in the ledger.
	dest.mu.Lock()
	requests, kills := dest.requests, dest.kills
	applied, businessDups := len(dest.applied), 0
	for action, n := range dest.byBusiness {
		if n > 1 {
			businessDups += n - 1
			t.Errorf("business action %s applied %d times", action, n)
		}
	}
	dest.mu.Unlock()
	wantKeys := mpCustomers + 2*mpRuns
	if applied != wantKeys {
		t.Errorf("%d effect keys applied at the destination, want %d", applied, wantKeys)
	}
	completions := ledgerCompletions(t, schema)
	ledgerDups := 0
	for key, n := range completions {
		if n != 1 {
			ledgerDups += n - 1
			t.Errorf("effect %s completed %d times in the ledger, want once", key, n)
		}
	}
	if len(completions) != wantKeys {
		t.Errorf("%d effect keys completed in the ledger, want %d", len(completions), wantKeys)
	}
	if kills < 5 {
		t.Errorf("%d workers killed, want at least 5", kills)
	}

	// The audit trail, paged in order, has a step.completed event for every step.
	completedSteps := map[int64]bool{}
	var events int
	for after := int64(0); ; {
		page, err := parent.EventList(t.Context(), store.EventListParams{AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.ID <= after {
				t.Fatalf("event %d listed after event %d", e.ID, after)
			}
			after = e.ID
			if e.Type == store.EventStepCompleted {
				completedSteps[e.StepID] = true
			}
		}
		events += len(page)
	}
	for id := range stepIDs {
		if !completedSteps[id] {
			t.Errorf("step %d has no step.completed event", id)
		}
	}
	t.Logf("runs %d (%d starts, %d duplicates), completed %d, lost %d, kills %d, requests %d, effects applied %d, duplicate applications %d, duplicate ledger completions %d, events %d, in %s",
		len(all), created+duplicates, duplicates, completed, lost, kills, requests, applied, businessDups, ledgerDups, events, elapsed.Round(time.Millisecond))
}
