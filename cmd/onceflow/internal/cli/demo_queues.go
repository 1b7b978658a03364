package cli

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/cmd/onceflow/internal/demo"
)

// runQueuesDemo plays the queue scenario (onceflow demo --queues), or is its worker process.
func runQueuesDemo(cmd *cobra.Command, g *globals, f demoFlags) error {
	natsURL, shopURL := os.Getenv("ONCEFLOW_NATS_URL"), os.Getenv("SHOP_DB")
	if natsURL == "" || shopURL == "" {
		return usagef("demo --queues needs a NATS server with JetStream in ONCEFLOW_NATS_URL (nats://127.0.0.1:4222) and a PostgreSQL database for the shop in SHOP_DB (postgres://postgres@127.0.0.1:5432/test)")
	}
	ctx := cmd.Context()
	if f.queuesWorker {
		loc, err := g.location()
		if err != nil {
			return err
		}
		st, _, err := openLocation(ctx, loc, false, g.logger())
		if err != nil {
			return err
		}
		defer st.Close()
		return demo.QueuesWorker(ctx, st, natsURL, shopURL, 7, g.stdout)
	}
	loc, err := demoLocation(cmd, g)
	if err != nil {
		return err
	}
	st, loc, err := openLocation(ctx, loc, false, g.logger())
	if err != nil {
		return err
	}
	defer st.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	progress := g.stdout
	if f.json {
		progress = g.stderr
	}
	outf(progress, "onceflow demo --queues: examples/order-events.yaml consuming order events from JetStream,\n"+
		"marking orders paid in the shop's PostgreSQL database and telling the warehouse; one worker is killed\n"+
		"between the database's COMMIT and onceflow's record.\ndatabase: %s\n\n", loc.URL())
	orders := 100
	if cmd.Flags().Changed("orders") {
		orders = f.orders
	}
	sum, err := demo.RunQueues(ctx, demo.QueuesConfig{
		Store: st, NATSURL: natsURL, ShopURL: shopURL, Orders: orders, Progress: progress,
		Child: func(env []string) *exec.Cmd {
			c := exec.CommandContext(ctx, exe, "demo", "--queues-worker", "--db", loc.URL())
			c.Env = append(os.Environ(), env...)
			return c
		},
	})
	if err != nil {
		return err
	}
	if err := writeSummary(g, f.json, sum); err != nil {
		return err
	}
	if !sum.InvariantsOK {
		return fmt.Errorf("demo --queues: invariants failed")
	}
	return nil
}
