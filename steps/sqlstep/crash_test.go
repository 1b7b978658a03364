package sqlstep_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// holdKey writes key into onceflow_applied in a transaction of the test's own, left open,
// so that an attempt writing the same key waits for it; waiting reports whether an
// attempt's INSERT waits for that transaction's lock now. release rolls it back.
func (s *shop) holdKey(t *testing.T, key string) (waiting func() bool, release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := "INSERT INTO onceflow_applied (effect_key, result, workflow, run_id, step) VALUES (" + s.p(1) + ", '{}', 'test', 0, 'hold')"
	if _, err := tx.ExecContext(ctx, q, key); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL says which backends wait for the holder. MariaDB's lock views do not
	// always show the waiting transaction: there, an INSERT of the key that is still
	// running in the shop's database (the holder's own finished) is one that waits, as it
	// cannot finish while the key is held.
	var holder int64
	waits := "SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
	if s.dialect == "mysql" {
		err = tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&holder)
		waits = `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> ?
			AND COMMAND IN ('Query', 'Execute') AND INFO LIKE 'INSERT INTO onceflow_applied%'`
	} else {
		err = tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&holder)
	}
	if err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback()
			_ = conn.Close()
		}
	}
	t.Cleanup(release)
	return func() bool {
		var n int
		if err := s.db.QueryRowContext(ctx, waits, holder).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}, release
}

// A worker killed with SIGKILL after the step's statements ran and before the effect key
// was written (its INSERT into onceflow_applied waits on a lock the test holds): the
// statements and the key are one transaction, so nothing of the attempt is committed,
// and the retry applies the statements once. Were the key written after the business
// transaction committed, the kill would leave the order paid without its key, and the
// retry would pay it again.
func TestKilledBeforeTheKeyIsWrittenAppliesOnce(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newShop(t, dialect)
			ctx := context.Background()
			step, db := s.step(t, s.markPaid(false))
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "onceflow.db")
			st, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var skew atomic.Int64
			c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "survivor",
				Clock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }, ClockSync: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Register(sqlWorkflow(step)); err != nil {
				t.Fatal(err)
			}
			runKey := "evt-" + testsvc.Suffix()
			key := "order-paid:1002:" + runKey
			run, err := c.Start(ctx, "order-events", runKey, map[string]any{"order_id": 1002, "note": "paid by card"})
			if err != nil {
				t.Fatal(err)
			}
			waiting, release := s.holdKey(t, key)

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), "ONCEFLOW_TEST_CHILD=sql-worker", "ONCEFLOW_TEST_DB="+path,
				"ONCEFLOW_TEST_DIALECT="+dialect, "SHOP_DB="+s.dsn)
			child.Stderr = os.Stderr
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "committed ") {
						t.Errorf("the child committed although the key it writes is locked: %s", sc.Text())
					}
				}
				close(exited)
			}()
			deadline := time.Now().Add(60 * time.Second)
			for !waiting() {
				select {
				case <-exited:
					_ = child.Wait()
					t.Fatal("the child exited before it wrote the key")
				default:
				}
				if time.Now().After(deadline) {
					_ = child.Process.Kill()
					_ = child.Wait()
					t.Fatal("the child's INSERT of the key never waited for the lock")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-exited
			_ = child.Wait()
			if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatal("the child did not die by SIGKILL")
			}
			release()
			// The child's statements ran and were never committed: the order is as it was.
			if status, paid, _ := s.order(t, 1002); status != "pending" || paid != 0 {
				t.Fatalf("after the kill the order is %s with paid_count %d: the statements committed without their effect key", status, paid)
			}
			steps, err := st.StepListByRun(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if steps[0].State != store.StateProcessing || steps[0].LeaseOwner != "child" {
				t.Fatalf("after the kill the step is %s (owner %q), want processing by the dead child", steps[0].State, steps[0].LeaseOwner)
			}

			// The child's lease expires; the retry applies the statements, once.
			skew.Store(int64(2 * time.Hour))
			if n, err := c.Reap(ctx); err != nil || n != 1 {
				t.Fatalf("reaped %d (%v), want 1", n, err)
			}
			for deadline := time.Now().Add(30 * time.Second); steps[0].State != store.StateCompleted && time.Now().Before(deadline); {
				if _, err := c.Work(ctx); err != nil {
					t.Fatal(err)
				}
				if steps, err = st.StepListByRun(ctx, run.ID); err != nil {
					t.Fatal(err)
				}
			}
			if steps[0].State != store.StateCompleted || steps[0].Attempt != 2 {
				t.Fatalf("step %s after attempt %d, want completed on attempt 2", steps[0].State, steps[0].Attempt)
			}
			var res sqlstep.Result
			if err := json.Unmarshal(steps[0].Output, &res); err != nil || res.Replayed || res.Statements[0].RowsAffected != 1 {
				t.Fatalf("output %s (%v), want the statements applied by the retry", steps[0].Output, err)
			}
			if status, paid, _ := s.order(t, 1002); status != "paid" || paid != 1 {
				t.Fatalf("order %s paid_count %d after recovery, want paid once", status, paid)
			}
			if n := s.keyRows(t, key); n != 1 {
				t.Fatalf("onceflow_applied holds %d rows for the key, want 1", n)
			}
		})
	}
}
