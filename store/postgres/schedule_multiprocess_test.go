package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// Settings of the multi-process schedule test.
const (
	schedProcs = 3
	schedTicks = 30
)

// childScheduler is the body of a process of the schedule test: it serves a per-second
// schedule until it is killed, or stops on SIGTERM.
func childScheduler() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := postgres.Open(ctx, os.Getenv(testsvc.PostgresEnv), postgres.Options{Schema: os.Getenv(childSchemaEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		return 1
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "sched-" + os.Getenv(childIndexEnv), ScheduleInterval: 100 * time.Millisecond,
		PollInterval: 100 * time.Millisecond})
	if err == nil {
		err = c.Register(onceflow.Workflow{Name: "tick", Steps: []onceflow.Step{{ID: "noop", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, nil
		}}}})
	}
	if err == nil {
		err = c.RegisterSchedule(onceflow.Schedule{Name: "every-second", Workflow: "tick", Cron: "* * * * * *"})
	}
	if err == nil {
		err = c.Serve(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		return 1
	}
	return 0
}

// Three processes on one database serve the same per-second schedule. Over 30 ticks they
// start exactly 30 runs, one per tick; the process that leads the scheduler is SIGKILLed
// a third of the way through, and another takes over without losing or doubling a tick.
func TestScheduleThreeProcesses(t *testing.T) {
	u := testURL(t)
	if testing.Short() {
		t.Skip("starts processes and runs for about 35 s; skipped with -short")
	}
	schema := newSchema(t)
	parent := openStore(t, schema)
	procs := make([]*exec.Cmd, schedProcs)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=scheduler", testsvc.PostgresEnv+"="+u, childSchemaEnv+"="+schema, childIndexEnv+"="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
	}
	defer func() {
		for _, p := range procs {
			if p.ProcessState == nil {
				_ = p.Process.Signal(syscall.SIGTERM)
				_ = p.Wait()
			}
		}
	}()
	ctx := t.Context()
	runsSince := func(from time.Time) map[string]int {
		runs, err := parent.RunList(ctx, store.RunListParams{Workflow: "tick", Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, r := range runs {
			at, err := time.Parse(time.RFC3339, strings.TrimPrefix(r.RunKey, "every-second:"))
			if err != nil {
				t.Fatalf("run key %q: %v", r.RunKey, err)
			}
			if !at.Before(from) && at.Before(from.Add(schedTicks*time.Second)) {
				got[r.RunKey]++
			}
		}
		return got
	}
	waitUntil := func(what string, deadline time.Time, cond func() bool) {
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond) // polling an observable condition
		}
	}
	// The first tick fired by anyone: the processes are up.
	waitUntil("the first run", time.Now().Add(60*time.Second), func() bool {
		runs, err := parent.RunList(ctx, store.RunListParams{Workflow: "tick", Limit: 1})
		return err == nil && len(runs) > 0
	})
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	// A third of the way through, kill the leader.
	waitUntil("a third of the ticks", from.Add(60*time.Second), func() bool { return time.Now().After(from.Add(schedTicks / 3 * time.Second)) })
	conn := admin(t)
	var owner string
	if err := conn.QueryRow(ctx, `SELECT owner FROM `+pgx.Identifier{schema, "leaders"}.Sanitize()+` WHERE name = 'scheduler'`).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	idx, err := strconv.Atoi(strings.TrimPrefix(owner, "sched-"))
	if err != nil || idx < 0 || idx >= schedProcs {
		t.Fatalf("scheduler leader %q is not one of the processes", owner)
	}
	if err := procs[idx].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = procs[idx].Wait()
	if ws, ok := procs[idx].ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("leader did not die by SIGKILL: %v", procs[idx].ProcessState)
	}
	last := "every-second:" + from.Add((schedTicks-1)*time.Second).UTC().Format(time.RFC3339)
	waitUntil("the last tick's run", from.Add(90*time.Second), func() bool { return runsSince(from)[last] == 1 })
	got := runsSince(from)
	if len(got) != schedTicks {
		t.Fatalf("%d runs for %d ticks: %v", len(got), schedTicks, got)
	}
	for i := range schedTicks {
		key := "every-second:" + from.Add(time.Duration(i)*time.Second).UTC().Format(time.RFC3339)
		if got[key] != 1 {
			t.Errorf("tick %s has %d runs", key, got[key])
		}
	}
	var leader string
	if err := conn.QueryRow(ctx, `SELECT owner FROM `+pgx.Identifier{schema, "leaders"}.Sanitize()+` WHERE name = 'scheduler'`).Scan(&leader); err != nil {
		t.Fatal(err)
	}
	if leader == owner {
		t.Errorf("the killed process %s still leads the scheduler", owner)
	}
	t.Logf("%d processes, %d ticks from %s: %d runs, one per tick; leader %s SIGKILLed after tick %d, %s took over",
		schedProcs, schedTicks, from.UTC().Format(time.RFC3339), len(got), owner, schedTicks/3, leader)
}
