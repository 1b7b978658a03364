package onceflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

const (
	fanOutCustomers = 500
	fanOutPageSize  = 50
	// followUpDelay is long enough that the child never fires the follow-up itself.
	followUpDelay = time.Hour
)

// invoiceSetup registers the invoice workflow and its monthly fan-out over the customers
// the list server at listURL returns.
func invoiceSetup(c *onceflow.Client, listURL string) error {
	if err := c.Register(onceflow.Workflow{Name: "invoice", Entity: "customer:{input.item.customer_id}",
		Steps: []onceflow.Step{{ID: "issue", Do: noop}}}); err != nil {
		return err
	}
	return c.RegisterSchedule(onceflow.Schedule{Name: "invoices", Workflow: "invoice", Cron: "0 9 1 * *", Timezone: "Europe/Berlin",
		RunKey: "invoice:{item.customer_id}:{schedule.period}:subscription", ForEach: &onceflow.FanOut{Fetch: httpList(listURL)}})
}

// httpList fetches a page of customers: GET url?cursor=N answers {"items": […], "next": "M"}.
func httpList(base string) func(context.Context, onceflow.Tick, string) (onceflow.FanOutPage, error) {
	return func(ctx context.Context, _ onceflow.Tick, cursor string) (onceflow.FanOutPage, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"?cursor="+url.QueryEscape(cursor), nil)
		if err != nil {
			return onceflow.FanOutPage{}, onceflow.PermanentError(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return onceflow.FanOutPage{}, err
		}
		defer resp.Body.Close()
		var body struct {
			Items []json.RawMessage `json:"items"`
			Next  string            `json:"next"`
		}
		if resp.StatusCode != http.StatusOK {
			return onceflow.FanOutPage{}, fmt.Errorf("list answered %d", resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return onceflow.FanOutPage{}, err
		}
		return onceflow.FanOutPage{Items: body.Items, Next: body.Next}, nil
	}
}

func followUpWorkflow(dest string) onceflow.Workflow {
	return onceflow.Workflow{Name: "follow-up", Steps: []onceflow.Step{
		{ID: "crm", Do: noop},
		{ID: "call", Needs: []string{"crm"}, Delay: followUpDelay, EffectKey: "call:{run.key}", Do: post(dest)},
	}}
}

// childScheduled serves, until killed, the fan-out ("fanout") or the delayed follow-up
// ("delay") of the crash tests below.
func childScheduled(mode string) int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, os.Getenv("ONCEFLOW_TEST_DB"), sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "child-" + mode, LeaseFor: time.Hour, PollInterval: 10 * time.Millisecond})
	if err == nil {
		if mode == "fanout" {
			err = invoiceSetup(c, os.Getenv("ONCEFLOW_TEST_LIST"))
		} else {
			err = c.Register(followUpWorkflow(os.Getenv("ONCEFLOW_TEST_DEST")))
		}
	}
	if err == nil {
		err = c.Serve(ctx)
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func startChild(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), env...)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if child.ProcessState == nil {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	return child
}

func sigkill(t *testing.T, child *exec.Cmd) {
	t.Helper()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := child.Wait()
	if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v", err)
	}
}

// A process SIGKILLed halfway through the fan-out of a monthly tick over 500 customers —
// while it fetches the sixth of ten pages, after starting the runs of the first five —
// leaves the walk to be taken up again once its lease expires; the walk continues from
// the sixth page, its checkpoint, and every customer has exactly one run for the period.
func TestFanOutKilledHalfway(t *testing.T) {
	var mu sync.Mutex
	hung := false
	fetched := map[int]int{} // requests per page, by the index of its first customer
	arrived := make(chan struct{})
	list := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		mu.Lock()
		hang := from == fanOutCustomers/2 && !hung
		hung = hung || hang
		fetched[from]++
		mu.Unlock()
		if hang {
			close(arrived)
			<-r.Context().Done() // the caller dies meanwhile
			return
		}
		var body struct {
			Items []map[string]string `json:"items"`
			Next  string              `json:"next"`
		}
		for i := from; i < fanOutCustomers && i < from+fanOutPageSize; i++ {
			body.Items = append(body.Items, map[string]string{"customer_id": fmt.Sprintf("c%03d", i)})
		}
		if from+fanOutPageSize < fanOutCustomers {
			body.Next = strconv.Itoa(from + fanOutPageSize)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	defer list.Close()

	b := setup(t, func(c *onceflow.Config) { c.WorkerID = "survivor" })
	b.clock.Set(time.Now())
	if err := invoiceSetup(b.client, list.URL); err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2026, 11, 1, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	walk, err := b.client.TriggerSchedule(b.ctx, "invoices", tick)
	if err != nil {
		t.Fatal(err)
	}
	child := startChild(t, "ONCEFLOW_TEST_CHILD=fanout", "ONCEFLOW_TEST_DB="+b.path, "ONCEFLOW_TEST_LIST="+list.URL)
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the child never reached the sixth page")
	}
	sigkill(t, child)
	if n := len(b.runKeys(t, "invoice")); n != fanOutCustomers/2 {
		t.Fatalf("%d invoice runs when the child died, want %d (five pages)", n, fanOutCustomers/2)
	}

	// The restarted process: it reaps the dead walk once its lease expired, and walks again.
	st := b.steps(t, walk.ID)["for-each"]
	b.clock.Set(st.LeaseExpiresAt.Add(time.Second))
	if n, err := b.client.Reap(b.ctx); err != nil || n < 1 { // the walk, and invoice steps the child was running
		t.Fatalf("reaped %d (%v), want the walk", n, err)
	}
	for b.work(t) > 0 {
	}
	if r := b.run(t, walk.ID); r.State != store.StateCompleted {
		t.Fatalf("walk run %s", r.State)
	}
	keys := b.runKeys(t, "invoice")
	if len(keys) != fanOutCustomers {
		t.Fatalf("%d invoice runs, want %d", len(keys), fanOutCustomers)
	}
	for i, k := range keys {
		if want := fmt.Sprintf("invoice:c%03d:2026-11:subscription", i); k != want {
			t.Fatalf("run key %d = %s, want %s", i, k, want)
		}
	}
	var out onceflow.FanOutResult
	if err := json.Unmarshal(b.steps(t, walk.ID)["for-each"].Output, &out); err != nil {
		t.Fatal(err)
	}
	if out != (onceflow.FanOutResult{Pages: fanOutCustomers / fanOutPageSize, Items: fanOutCustomers, Started: fanOutCustomers}) {
		t.Fatalf("walk %+v: want the counts of one walk over every page", out)
	}
	t.Logf("%d customers, child SIGKILLed after %d runs; after the restart %d runs, one per customer; walk %+v",
		fanOutCustomers, fanOutCustomers/2, len(keys), out)
	mu.Lock()
	defer mu.Unlock()
	for from := 0; from < fanOutCustomers; from += fanOutPageSize {
		want := 1
		if from == fanOutCustomers/2 {
			want = 2 // the page the child died fetching, fetched again by the survivor
		}
		if fetched[from] != want {
			t.Errorf("page at %d fetched %d times, want %d (all: %v)", from, fetched[from], want, fetched)
		}
	}
}

// A step delayed by an hour survives a SIGKILL of the process while it waits: the timer is
// in the database; the step does not run a moment early, and runs once when due.
func TestDelayedStepSurvivesKill(t *testing.T) {
	dest := newDestination(t)
	b := setup(t, func(c *onceflow.Config) { c.WorkerID = "survivor" })
	b.register(t, followUpWorkflow(dest.URL))
	b.clock.Set(time.Now())
	run := b.start(t, "follow-up", "lead-1", map[string]any{"lead": 1})
	child := startChild(t, "ONCEFLOW_TEST_CHILD=delay", "ONCEFLOW_TEST_DB="+b.path, "ONCEFLOW_TEST_DEST="+dest.URL)
	var call *store.Step
	waitFor(t, "the follow-up to wait for its delay", func() bool {
		call = b.steps(t, run.ID)["call"]
		return call.Reason == store.ReasonDelayed
	})
	sigkill(t, child)
	crm := b.steps(t, run.ID)["crm"]
	if call.State != store.StatePending || call.NextAt.Before(crm.UpdatedAt.Add(followUpDelay)) {
		t.Fatalf("call %s due %s; crm completed %s", call.State, call.NextAt, crm.UpdatedAt)
	}
	b.clock.Set(call.NextAt.Add(-time.Millisecond))
	if n := b.work(t); n != 0 {
		t.Fatalf("%d steps ran before the follow-up was due", n)
	}
	b.clock.Set(call.NextAt)
	for b.work(t) > 0 {
	}
	b.clock.Set(call.NextAt.Add(2 * followUpDelay))
	b.work(t)
	requests, keys, _ := dest.snapshot()
	if requests != 1 || keys[0] != "call:lead-1" {
		t.Fatalf("destination saw %d requests %v, want one", requests, keys)
	}
	if r := b.run(t, run.ID); r.State != store.StateCompleted {
		t.Fatalf("run %s", r.State)
	}
	t.Logf("child SIGKILLed while the step waited (due %s); nothing ran 1ms before; %d request at the due time", call.NextAt.Format(time.RFC3339Nano), requests)
}
