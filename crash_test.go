package onceflow_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	switch os.Getenv("ONCEFLOW_TEST_CHILD") {
	case "worker":
		os.Exit(childWorker())
	case "starter":
		os.Exit(childStarter())
	case "fanout", "delay":
		os.Exit(childScheduled(os.Getenv("ONCEFLOW_TEST_CHILD")))
	}
	goleak.VerifyTestMain(testsvc.Report(m))
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
	want := []store.EventType{store.EventStepClaimed, store.EventLeaseExpired, store.EventStepRetryPlanned, store.EventStepClaimed, store.EventStepCompleted}
	if got := eventTypes(evs, "crm"); !reflect.DeepEqual(got, want) {
		t.Fatalf("crm events %v, want %v", got, want)
	}
	for _, e := range evs {
		if e.Type == store.EventLeaseExpired && (e.Actor != store.ActorReaper || detailOf(t, e)["owner"] != "child-worker") {
			t.Fatalf("lease.expired event does not say whose lease: %+v %s", e, e.Detail)
		}
	}
}

// childStarter is the body of the process the group-commit crash tests kill: sixteen
// goroutines start runs as fast as they can while Serve executes them with fifty workers,
// so that starts and step records are committed in batches. Each start is announced on
// stdout ("ack KEY") only after Start returned, i.e. after its batch committed. The run
// keys count from ONCEFLOW_TEST_FIRST_KEY (default 1).
func childStarter() int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, os.Getenv("ONCEFLOW_TEST_DB"), sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "child-starter", Workers: 50, LeaseFor: time.Hour, PollInterval: 10 * time.Millisecond})
	if err == nil {
		err = c.Register(crashWorkflow(os.Getenv("ONCEFLOW_TEST_DEST")))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = c.Serve(ctx) }()
	var next atomic.Int64
	if first, err := strconv.ParseInt(os.Getenv("ONCEFLOW_TEST_FIRST_KEY"), 10, 64); err == nil {
		next.Store(first - 1)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				key := fmt.Sprintf("form-%d", i)
				if _, err := c.Start(ctx, "crash", key, map[string]any{"submission_id": i}); err != nil {
					fmt.Fprintln(os.Stderr, "start:", err)
					continue
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %s\n", key)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	return 1
}

// A process killed with SIGKILL while starts and step records are group-committed loses no
// start it acknowledged, and no effect is repeated: every acknowledged run exists, and once
// a survivor has reaped the dead process's leases and finished the work, every effect
// completed once — the destination saw a second request for a key only where the dead
// process's attempt had no recorded outcome.
func TestGroupCommitKilledMidBatch(t *testing.T) {
	dest := newDestination(t)
	path := t.TempDir() + "/onceflow.db"
	st0, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st0.Close()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "ONCEFLOW_TEST_CHILD=starter", "ONCEFLOW_TEST_DB="+path, "ONCEFLOW_TEST_DEST="+dest.URL)
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	enough := make(chan struct{})
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if key, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				acked[key] = true
			}
			if !signalled && len(acked) >= 600 {
				if requests, _, _ := dest.snapshot(); requests >= 200 {
					signalled = true
					close(enough)
				}
			}
		}
	}()
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatal("the child never acknowledged 600 starts with 200 steps executed")
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-lines // every acknowledgement written before the kill has been read
	_ = child.Wait()
	if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v", child.ProcessState)
	}

	st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for key := range acked {
		if _, err := st.RunGetByKey(t.Context(), "crash", key); err != nil {
			t.Errorf("acknowledged start %s: %v", key, err)
		}
	}
	// Whatever the kill interrupted, what committed committed with its audit trail.
	checkTrail(t, st, "after the kill")

	// A survivor whose clock is past the dead process's leases finishes the work.
	later := time.Now().Add(2 * time.Hour)
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "survivor", Workers: 50, Clock: func() time.Time { return later }, ClockSync: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(crashWorkflow(dest.URL)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(t.Context()); err != nil {
		t.Fatal(err)
	}

	runs, err := st.RunList(t.Context(), store.RunListParams{Workflow: "crash", Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) < len(acked) {
		t.Fatalf("%d runs stored, fewer than the %d acknowledged", len(runs), len(acked))
	}
	_, keys, applied := dest.snapshot()
	requests := map[string]int{}
	for _, k := range keys {
		requests[k]++
	}
	for _, r := range runs {
		if r.State != store.StateCompleted {
			t.Errorf("run %s is %s, want completed", r.RunKey, r.State)
			continue
		}
		key := "lead-create:" + strings.TrimPrefix(r.RunKey, "form-")
		eff, err := st.EffectGetByKey(t.Context(), key)
		if err != nil || eff.State != store.EffectCompleted || eff.RunID != r.ID {
			t.Errorf("ledger row of %s: %+v, %v; want completed by run %d", key, eff, err, r.ID)
		}
		atts, err := st.AttemptListByRun(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		successes, unknown := 0, 0
		for _, a := range atts {
			switch a.Outcome {
			case store.OutcomeSuccess:
				successes++
			case store.OutcomeUnknown:
				unknown++
			}
		}
		if successes != 1 || applied[key] != 1 {
			t.Errorf("%s: %d successful attempts, applied %d times; want 1 and 1 (attempts %d)", key, successes, applied[key], len(atts))
		}
		// A second request only where the dead process's attempt has no recorded outcome.
		if requests[key] > 1+unknown {
			t.Errorf("%s: %d requests for %d attempts with an unknown outcome: an effect was repeated", key, requests[key], unknown)
		}
	}
	checkTrail(t, st, "after the survivor finished")
	t.Logf("%d starts acknowledged, %d runs stored, %d requests to the destination", len(acked), len(runs), len(keys))
}

// A process that starts and executes runs on one SQLite file is stopped again and again,
// each time when the destination receives a given request, a moment that has nothing to
// do with where its transactions are: frozen with SIGSTOP and the file read as it stands,
// then let go on; at the end of each round, killed with SIGKILL. Whenever it stopped,
// every run and step another process can read has the audit events that the transaction
// which wrote it appended: no commit leaves state without its trail, so no crash can.
func TestAuditTrailCompleteWheneverTheProcessStops(t *testing.T) {
	dest := newDestination(t)
	path := t.TempDir() + "/onceflow.db"
	st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const rounds, freezes = 4, 12
	stops, unread := 0, 0
	tr := newTrail(st)
	for round := range rounds {
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), "ONCEFLOW_TEST_CHILD=starter", "ONCEFLOW_TEST_DB="+path, "ONCEFLOW_TEST_DEST="+dest.URL,
			"ONCEFLOW_TEST_FIRST_KEY="+strconv.Itoa(1+round*1_000_000))
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		done := false
		defer func() {
			if !done {
				_ = child.Process.Kill()
				_ = child.Wait()
			}
		}()
		for f := 0; f <= freezes; f++ {
			sig, what := syscall.SIGSTOP, "frozen"
			if f == freezes {
				sig, what = syscall.SIGKILL, "killed"
			}
			requests, _, _ := dest.snapshot()
			at := requests + 10 + 7*f // a different point of the work each time
			signalled := make(chan error, 1)
			var once sync.Once
			dest.onRequest(func(n int, _ *http.Request) int {
				if n >= at {
					once.Do(func() { signalled <- child.Process.Signal(sig) })
				}
				return 0
			})
			select {
			case err := <-signalled:
				if err != nil {
					t.Fatalf("round %d: %v", round+1, err)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("round %d: the child never sent request %d", round+1, at)
			}
			dest.onRequest(nil)
			if sig == syscall.SIGKILL {
				_ = child.Wait()
				done = true
				if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("round %d: the child did not die by SIGKILL: %v", round+1, child.ProcessState)
				}
			} else {
				waitStopped(t, child.Process.Pid)
			}
			switch err := tr.check(t, fmt.Sprintf("round %d, %s at request %d", round+1, what, at)); {
			case err != nil && sig == syscall.SIGSTOP:
				// A process frozen while it held one of the WAL's locks can keep readers
				// out (SQLITE_PROTOCOL) until it goes on; a dead one cannot.
				t.Logf("round %d: the file could not be read while the process was frozen: %v", round+1, err)
				unread++
			case err != nil:
				t.Fatalf("round %d: %v", round+1, err)
			default:
				stops++
			}
			if t.Failed() {
				return
			}
			if sig == syscall.SIGSTOP {
				if err := child.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if stops < rounds*(freezes+1)/2 {
		t.Fatalf("the file was read at %d of %d stops, want at least half", stops, rounds*(freezes+1))
	}
	t.Logf("the trail was complete at all %d stops where the file was read (%d more while frozen could not be)", stops, unread)
}

// waitStopped waits until the process pid is stopped by a signal (state T in
// /proc/PID/stat).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped 10 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// trail checks that the audit trail holds the events of every state a store holds, as
// the transactions that wrote the state appended them: a run.created event for every run,
// a step.claimed event for every attempt a step was claimed for, a step.completed event
// for every completed step and a lease.expired event for every attempt the reaper ended.
// A state committed without its events (a crash between two transactions) fails it. It
// reads the events appended since its last check, and skips the runs it found completed
// with their trail then.
type trail struct {
	st       store.Store
	after    int64
	created  map[int64]int
	claimed  map[stepAttempt]int
	expired  map[stepAttempt]int
	finished map[int64]int // step.completed events by step
	checked  map[int64]bool
	events   int
}

type stepAttempt struct {
	step    int64
	attempt int
}

func newTrail(st store.Store) *trail {
	return &trail{st: st, created: map[int64]int{}, claimed: map[stepAttempt]int{}, expired: map[stepAttempt]int{},
		finished: map[int64]int{}, checked: map[int64]bool{}}
}

// checkTrail checks st's audit trail once.
func checkTrail(t *testing.T, st store.Store, when string) {
	t.Helper()
	if err := newTrail(st).check(t, when); err != nil {
		t.Fatal(err)
	}
}

// check checks the trail, failing t for each missing event; err is a failure to read the
// store.
func (tr *trail) check(t *testing.T, when string) error {
	t.Helper()
	ctx := t.Context()
	for {
		page, err := tr.st.EventList(ctx, store.EventListParams{AfterID: tr.after, Limit: 1000})
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			tr.after = e.ID
			switch e.Type {
			case store.EventRunCreated:
				tr.created[e.RunID]++
			case store.EventStepClaimed:
				tr.claimed[stepAttempt{e.StepID, e.Attempt}]++
			case store.EventLeaseExpired:
				tr.expired[stepAttempt{e.StepID, e.Attempt}]++
			case store.EventStepCompleted:
				tr.finished[e.StepID]++
			}
		}
		tr.events += len(page)
	}
	runs, err := tr.st.RunList(ctx, store.RunListParams{Limit: 1 << 20})
	if err != nil {
		return err
	}
	missing := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if missing++; missing <= 10 {
			t.Errorf(when+": "+format, args...)
		}
	}
	for _, r := range runs {
		if tr.checked[r.ID] {
			continue
		}
		if tr.created[r.ID] != 1 {
			fail("run %s (%d) has %d run.created events, want 1", r.RunKey, r.ID, tr.created[r.ID])
		}
		steps, err := tr.st.StepListByRun(ctx, r.ID)
		if err != nil {
			return err
		}
		atts, err := tr.st.AttemptListByRun(ctx, r.ID)
		if err != nil {
			return err
		}
		complete := true
		for _, s := range steps {
			for n := 1; n <= s.Attempt; n++ {
				if c := tr.claimed[stepAttempt{s.ID, n}]; c != 1 {
					complete = false
					fail("run %s step %s attempt %d (state %s) has %d step.claimed events, want 1", r.RunKey, s.Name, n, s.State, c)
				}
			}
			if s.State == store.StateCompleted && tr.finished[s.ID] != 1 {
				complete = false
				fail("run %s step %s is completed with %d step.completed events, want 1", r.RunKey, s.Name, tr.finished[s.ID])
			}
		}
		for _, a := range atts {
			reaped := a.Outcome == store.OutcomeUnknown && strings.Contains(a.Error, "expired at")
			if c := tr.expired[stepAttempt{a.StepID, a.Number}]; reaped && c != 1 {
				complete = false
				fail("run %s step %s attempt %d ended by the reaper has %d lease.expired events, want 1", r.RunKey, a.StepName, a.Number, c)
			}
		}
		if complete && r.State == store.StateCompleted && tr.created[r.ID] == 1 {
			tr.checked[r.ID] = true
		}
	}
	if missing > 10 {
		t.Errorf("%s: %d more events missing", when, missing-10)
	}
	t.Logf("%s: %d runs, %d events in the audit trail", when, len(runs), tr.events)
	return nil
}
