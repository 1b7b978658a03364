package onceflow_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("ONCEFLOW_TEST_CHILD") == "worker" {
		os.Exit(childWorker())
	}
	goleak.VerifyTestMain(m)
}

func crashWorkflow(url string) onceflow.Workflow {
	return onceflow.Workflow{Name: "crash", Entity: "lead:{input.submission_id}", Steps: []onceflow.Step{
		{ID: "crm", EffectKey: "lead-create:{input.submission_id}", Do: post(url)},
	}}
}

// childWorker is the body of the worker process the crash test kills: it serves the
// workflow until it is killed.
func childWorker() int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, os.Getenv("ONCEFLOW_TEST_DB"), sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "child-worker", LeaseFor: time.Hour, PollInterval: 10 * time.Millisecond})
	if err == nil {
		err = c.Register(crashWorkflow(os.Getenv("ONCEFLOW_TEST_DEST")))
	}
	if err == nil {
		err = c.Serve(ctx)
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// A worker process killed with SIGKILL in the middle of a step — after the destination
// applied the effect, before the result was recorded — leaves the step to be retried after
// its lease expires, with the same effect key; the destination deduplicates, nothing is
// lost and the effect happened once.
func TestWorkerKilledMidStep(t *testing.T) {
	arrived := make(chan struct{})
	var once sync.Once
	dest := newDestination(t)
	dest.onRequest(func(n int, r *http.Request) int {
		if n == 1 {
			// Apply the effect, then hang as a slow response would, until the caller dies.
			dest.mu.Lock()
			dest.applied[r.Header.Get("Idempotency-Key")]++
			dest.mu.Unlock()
			once.Do(func() { close(arrived) })
			<-r.Context().Done()
			return http.StatusGatewayTimeout
		}
		return 0
	})

	b := setup(t, func(c *onceflow.Config) { c.WorkerID = "survivor" })
	b.clock.Set(time.Now())
	b.register(t, crashWorkflow(dest.URL))
	run := b.start(t, "crash", "form-8812", map[string]any{"submission_id": 8812})

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "ONCEFLOW_TEST_CHILD=worker", "ONCEFLOW_TEST_DB="+b.path, "ONCEFLOW_TEST_DEST="+dest.URL)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatal("the child worker never reached the destination")
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := child.Wait()
	if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v", err)
	}

	st := b.steps(t, run.ID)["crm"]
	if st.State != store.StateProcessing || st.LeaseOwner != "child-worker" || st.Attempt != 1 {
		t.Fatalf("after the kill: %s owner %q attempt %d, want processing by child-worker", st.State, st.LeaseOwner, st.Attempt)
	}
	// Nothing happens before the lease expires.
	if n, err := b.client.Reap(b.ctx); err != nil || n != 0 {
		t.Fatalf("reaped %d (%v) before the lease expired", n, err)
	}
	if n := b.work(t); n != 0 {
		t.Fatalf("worked %d steps while the dead worker's lease was valid", n)
	}
	b.clock.Set(st.LeaseExpiresAt.Add(time.Second))
	if n, err := b.client.Reap(b.ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d (%v), want 1", n, err)
	}
	b.work(t)

	if r := b.run(t, run.ID); r.State != store.StateCompleted {
		t.Fatalf("run %s, want completed", r.State)
	}
	requests, keys, applied := dest.snapshot()
	if requests != 2 || !reflect.DeepEqual(keys, []string{"lead-create:8812", "lead-create:8812"}) {
		t.Fatalf("destination saw %d requests with keys %v, want 2 with the same key", requests, keys)
	}
	if !reflect.DeepEqual(applied, map[string]int{"lead-create:8812": 1}) {
		t.Fatalf("effects applied %v, want one", applied)
	}
	attempts, err := b.store.AttemptListByRun(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 || attempts[0].Worker != "child-worker" || attempts[0].Outcome != store.OutcomeUnknown ||
		attempts[1].Worker != "survivor" || attempts[1].Outcome != store.OutcomeSuccess {
		t.Fatalf("attempts: %+v %+v", attempts[0], attempts[1])
	}
	evs := b.events(t, store.EventListParams{RunID: run.ID})
	want := []string{store.EventStepClaimed, store.EventLeaseExpired, store.EventStepRetryPlanned, store.EventStepClaimed, store.EventStepCompleted}
	if got := eventTypes(evs, "crm"); !reflect.DeepEqual(got, want) {
		t.Fatalf("crm events %v, want %v", got, want)
	}
	for _, e := range evs {
		if e.Type == store.EventLeaseExpired && (e.Actor != store.ActorReaper || detailOf(t, e)["owner"] != "child-worker") {
			t.Fatalf("lease.expired event does not say whose lease: %+v %s", e, e.Detail)
		}
	}
}
