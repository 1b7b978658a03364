package demo_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/onceflow/onceflow/cmd/onceflow/internal/demo"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store/sqlite"
)

// queuesWorker is the worker process the queue scenario kills.
func queuesWorker() int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, os.Getenv("ONCEFLOW_TEST_DB"), sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = demo.QueuesWorker(ctx, st, os.Getenv("ONCEFLOW_NATS_URL"), os.Getenv("SHOP_DB"), 7, os.Stdout)
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// The queue scenario: duplicates and redeliveries start one run each, and a worker killed
// between the shop's COMMIT and onceflow's record leaves every order paid once and one
// warehouse message per paid order.
func TestQueuesScenario(t *testing.T) {
	natsURL, shopURL := testsvc.NATS(t), testsvc.Postgres(t)
	db := t.TempDir() + "/onceflow.db"
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var progress bytes.Buffer
	sum, err := demo.RunQueues(context.Background(), demo.QueuesConfig{Store: st, NATSURL: natsURL, ShopURL: shopURL, Orders: 60, Progress: &progress,
		Child: func(env []string) *exec.Cmd {
			c := exec.Command(os.Args[0], "-test.run=^$")
			c.Env = append(append(os.Environ(), env...), "ONCEFLOW_TEST_CHILD=queues-worker", "ONCEFLOW_TEST_DB="+db)
			return c
		}})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var text bytes.Buffer
	if err := sum.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !sum.InvariantsOK || sum.Runs != 60 || sum.Paid != 54 || sum.Warehouse != 54 || sum.FromApplied < 1 || sum.CrashKey == "" {
		t.Fatalf("summary:%s\nprogress:\n%s", text.String(), progress.String())
	}
	t.Log(text.String())
}
