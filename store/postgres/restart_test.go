package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
)

// The variables that enable and aim the restart tests. They restart the PostgreSQL server
// itself, which breaks every other connection to it: run them on their own, never beside
// other tests that use the same server (.ci/run runs them after the other tests).
const (
	restartEnv = "ONCEFLOW_TEST_PG_RESTART" // "1" runs the restart tests
	clusterEnv = "ONCEFLOW_TEST_PG_CLUSTER" // "VERSION NAME" of the cluster behind the URL; default: newest version, main
)

// restartCluster returns the pg_ctlcluster arguments naming the cluster, or skips the test
// unless ONCEFLOW_TEST_PG_RESTART=1.
func restartCluster(t *testing.T) []string {
	t.Helper()
	testURL(t)
	if os.Getenv(restartEnv) != "1" {
		t.Skipf("restarts the PostgreSQL server; set %s=1 (and %s=\"VERSION NAME\" unless it is the newest version's main cluster) when no other test uses it", restartEnv, clusterEnv)
	}
	if c := strings.Fields(os.Getenv(clusterEnv)); len(c) == 2 {
		return c
	}
	dirs, err := filepath.Glob("/etc/postgresql/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("%s=1 but no cluster is configured under /etc/postgresql; set %s", restartEnv, clusterEnv)
	}
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.ParseFloat(filepath.Base(dirs[i]), 64)
		b, _ := strconv.ParseFloat(filepath.Base(dirs[j]), 64)
		return a < b
	})
	return []string{filepath.Base(dirs[len(dirs)-1]), "main"}
}

// pgctl runs pg_ctlcluster on the cluster with the action and options.
func pgctl(t *testing.T, cluster []string, action string, opts ...string) {
	t.Helper()
	args := append([]string{"--skip-systemctl-redirect", cluster[0], cluster[1], action}, opts...)
	out, err := exec.Command("pg_ctlcluster", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctlcluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The PostgreSQL server restarts — once cleanly (pg_ctlcluster restart, which ends every
// session), once by an immediate stop that skips the shutdown checkpoint as a crash would,
// then a start — while three worker processes execute runs and the parent keeps starting
// more. Every start that was acknowledged exists afterwards and completes, each effect is
// applied once at the destination (which counts applications by Idempotency-Key and by
// business action) and completed once in the ledger.
func TestPostgresRestart(t *testing.T) {
	cluster := restartCluster(t)
	u := testURL(t)
	schema := newSchema(t)
	parent := openStore(t, schema)
	logLedgerCompletions(t, schema)
	dest := newMPDestination(t)
	dest.kills = mpKills // this test kills the database, not the workers

	procs := make([]*exec.Cmd, mpWorkers)
	exited := make(chan int, mpWorkers)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=worker", testsvc.PostgresEnv+"="+u, childSchemaEnv+"="+schema,
			childDestEnv+"="+dest.URL, childIndexEnv+"="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start worker %d: %v", i, err)
		}
		procs[i] = cmd
		go func() { _ = cmd.Wait(); exited <- i }()
	}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for range procs {
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				for _, p := range procs {
					_ = p.Process.Kill()
				}
				t.Errorf("a worker did not stop within 20 s of SIGTERM")
				return
			}
		}
	}()

	c, err := onceflow.New(onceflow.Config{Store: parent, WorkerID: "starter"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(mpWorkflow(dest.URL, "-1")); err != nil {
		t.Fatal(err)
	}
	// Starters: each start is acknowledged when Start returns without an error; one that
	// fails while the server is down is tried again under the same key, as a client would.
	var (
		mu       sync.Mutex
		acked    = map[string]int64{}
		failures int
	)
	ctx, stopStarting := context.WithCancel(t.Context())
	var starters sync.WaitGroup
	for g := range 4 {
		starters.Go(func() {
			for i := g; ctx.Err() == nil; i += 4 {
				key := fmt.Sprintf("order-%05d", i)
				for ctx.Err() == nil {
					run, err := c.Start(ctx, "mp", key, map[string]any{"order": i, "customer": i % mpCustomers})
					if err == nil {
						mu.Lock()
						acked[key] = run.ID
						mu.Unlock()
						break
					}
					mu.Lock()
					failures++
					mu.Unlock()
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		})
	}
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	requests := func() int { dest.mu.Lock(); defer dest.mu.Unlock(); return dest.requests }
	waitProgress := func(what string, runs, reqs int) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for ackedCount() < runs || requests() < reqs {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d starts acknowledged, %d requests after 90 s", what, ackedCount(), requests())
			}
			select {
			case i := <-exited:
				t.Fatalf("worker %d exited while %s", i, what)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	waitProgress("work before the restart", 150, 150)
	t.Cleanup(func() {
		// Registered last, so run first: leave the server running for the other clean-ups
		// even when the test stopped halfway (exit status 2: it already runs).
		args := []string{"--skip-systemctl-redirect", cluster[0], cluster[1], "start"}
		if out, err := exec.Command("pg_ctlcluster", args...).CombinedOutput(); err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Errorf("pg_ctlcluster %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
	pgctl(t, cluster, "restart")
	waitProgress("work after the restart", ackedCount()+150, requests()+150)
	pgctl(t, cluster, "stop", "-m", "immediate")
	pgctl(t, cluster, "start")
	waitProgress("work after the immediate stop", ackedCount()+150, requests()+150)
	stopStarting()
	starters.Wait()

	mu.Lock()
	defer mu.Unlock()
	checkNoLossNoRepeat(t, parent, schema, dest, acked, exited)
	t.Logf("start failures while the server was down: %d", failures)
	if failures == 0 {
		t.Error("no start failed while the server was down: the starts never met the stopped server, so the test proved nothing about them")
	}
}

// checkNoLossNoRepeat waits until every acknowledged run (run key → id) has completed,
// then checks that none was lost and that no effect was applied twice at the destination
// or completed twice in the ledger. A value on exited (a worker process index) fails the
// test.
func checkNoLossNoRepeat(t *testing.T, parent store.Store, schema string, dest *mpDestination, acked map[string]int64, exited <-chan int) {
	t.Helper()
	want := len(acked)
	// A lost start is lost for good: say so now rather than wait for it.
	if all, err := parent.RunList(t.Context(), store.RunListParams{Limit: 1 << 20}); err == nil {
		stored := map[int64]bool{}
		for _, r := range all {
			stored[r.ID] = true
		}
		for key, id := range acked {
			if !stored[id] {
				t.Errorf("acknowledged start %s (run %d) was lost", key, id)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		done, err := parent.RunList(t.Context(), store.RunListParams{State: store.StateCompleted, Limit: 1 << 20})
		missing := want
		if err == nil {
			completed := map[int64]bool{}
			for _, r := range done {
				completed[r.ID] = true
			}
			for _, id := range acked {
				if completed[id] {
					missing--
				}
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged runs not completed 3 minutes after the faults (%v)", missing, want, err)
		}
		select {
		case i := <-exited:
			t.Fatalf("worker %d exited", i)
		case <-time.After(100 * time.Millisecond):
		}
	}
	all, err := parent.RunList(t.Context(), store.RunListParams{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]*store.Run{}
	for _, r := range all {
		byKey[r.RunKey] = r
	}
	for key, id := range acked {
		r := byKey[key]
		switch {
		case r == nil:
			t.Errorf("acknowledged start %s (run %d) was lost", key, id)
		case r.ID != id || r.State != store.StateCompleted:
			t.Errorf("acknowledged start %s: run %d %s, want run %d completed", key, r.ID, r.State, id)
		}
	}
	dest.mu.Lock()
	for action, n := range dest.byBusiness {
		if n > 1 {
			t.Errorf("business action %s applied %d times", action, n)
		}
	}
	applied, reqs := len(dest.applied), dest.requests
	dest.mu.Unlock()
	completions := ledgerCompletions(t, schema)
	for key, n := range completions {
		if n != 1 {
			t.Errorf("effect %s completed %d times in the ledger, want once", key, n)
		}
	}
	if want == 0 || applied == 0 {
		t.Errorf("%d starts acknowledged and %d effects applied: the workload did nothing", want, applied)
	}
	t.Logf("runs %d (acknowledged %d), requests %d, effects applied %d, completed in the ledger %d", len(all), want, reqs, applied, len(completions))
}
