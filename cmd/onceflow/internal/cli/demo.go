package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/cmd/onceflow/internal/demo"
	"github.com/onceflow/onceflow/store"
)

type demoFlags struct {
	json    bool
	forms   int
	orders  int
	workers int
	seed    uint64
	// queues plays the queue scenario; queuesWorker is its worker process.
	queues       bool
	queuesWorker bool
	// serve keeps onceflow, its console and the simulated services running afterwards.
	serve bool
}

func newDemoCommand(g *globals) *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch the example workflows perform every effect once against services that misbehave",
		Long: `demo serves the two example workflows (examples/website-lead.yaml and
examples/payment-webhook.yaml) exactly as 'onceflow serve' does, on 127.0.0.1, against
simulated services: a CRM, WhatsApp, stock and invoicing APIs that honour Idempotency-Key,
and an SMTP server that, like most, does not deduplicate. The services fail on purpose:
503 and 429 answers, answers that come after the caller gave up although the work was
done, connections dropped after the work was done, a 451 from the mail server, and
WhatsApp refusing some numbers for good.

It then drives onceflow like real clients: website forms posted twice to the API with an
Idempotency-Key (double clicks, some at the same instant), Stripe-signed payment events
delivered two or three times to /hooks/payments, a second event about payments already
handled, and events for orders the shop had cancelled. When every run is completed or
waits for review it stops onceflow and counts, at the services themselves, how many
business actions were carried out twice (there must be none); it exits non-zero if any
check fails. Retry delays and http timeouts are shortened so that it takes seconds.

It needs nothing installed and uses a new SQLite file in a temporary directory, or the
file given with --db, which must not exist yet.

With --serve it does not stop there: once the summary is printed, onceflow serves the
same database again, with the web console at /ui/ beside the API, and the simulated
services stay up; it prints the console's URL and a token to sign in with, and runs until
Ctrl-C (SIGINT) or SIGTERM, then exits 0.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the summary as one JSON object (progress goes to stderr)")
	fl.IntVar(&f.forms, "forms", 40, "how many website forms to post")
	fl.IntVar(&f.forms, "runs", 40, "the same as --forms")
	_ = fl.MarkDeprecated("runs", "use --forms (and --orders)")
	fl.IntVar(&f.orders, "orders", 20, "how many paid orders the payment provider reports")
	fl.IntVar(&f.workers, "workers", 8, "how many steps execute at once")
	fl.Uint64Var(&f.seed, "seed", 1, "chooses which requests fail; the same seed injects the same faults")
	fl.BoolVar(&f.serve, "serve", false, "afterwards keep onceflow (with the web console) and the simulated services running until Ctrl-C, and print the console's URL and a sign-in token")
	fl.BoolVar(&f.queues, "queues", false, "play the queue scenario of examples/order-events.yaml instead (needs ONCEFLOW_NATS_URL and SHOP_DB, a PostgreSQL URL)")
	fl.BoolVar(&f.queuesWorker, "queues-worker", false, "the worker process of the queue scenario (started by --queues)")
	_ = fl.MarkHidden("queues-worker")
	return cmd
}

func runDemo(cmd *cobra.Command, g *globals, f demoFlags) error {
	if f.queues || f.queuesWorker {
		if f.serve {
			return usagef("--serve keeps the console of the website and payment scenario; the queue scenario (--queues) does not take it")
		}
		return runQueuesDemo(cmd, g, f)
	}
	if f.forms < 1 || f.forms > 10000 {
		return usagef("--forms must be between 1 and 10000, got %d", f.forms)
	}
	if f.orders < 1 || f.orders > 10000 {
		return usagef("--orders must be between 1 and 10000, got %d", f.orders)
	}
	if f.workers < 1 || f.workers > 1000 {
		return usagef("--workers must be between 1 and 1000, got %d", f.workers)
	}
	loc, err := demoLocation(cmd, g)
	if err != nil {
		return err
	}
	st, loc, err := openLocation(cmd.Context(), loc, false, g.logger())
	if err != nil {
		return err
	}
	defer st.Close()
	if runs, err := st.RunList(cmd.Context(), store.RunListParams{Limit: 1}); err != nil {
		return err
	} else if len(runs) > 0 {
		return fmt.Errorf("demo needs a fresh database, and %s already holds runs; name another one with --db", loc.URL())
	}
	progress := g.stdout
	if f.json {
		progress = g.stderr
	}
	outf(progress, "onceflow demo: the example workflows served on 127.0.0.1 against services that fail on purpose;\n"+
		"%d website forms posted twice each, %d paid orders whose events arrive two or three times.\n", f.forms, f.orders)
	outf(progress, "Retry delays and http timeouts are %d× shorter than the files say, so that this takes seconds.\n", demo.Speedup)
	outf(progress, "database: %s\n\n", loc.URL())

	cfg := demo.Config{Store: st, DBURL: loc.URL(), Forms: f.forms, Orders: f.orders, Workers: f.workers, Seed: f.seed, Progress: progress}
	var printed error
	if f.serve {
		// The summary is printed while onceflow keeps serving, and the console's address
		// and token with it; with --json they go to stderr, as progress does.
		cfg.Serve = func(sum *demo.Summary) {
			printed = writeSummary(g, f.json, sum)
			if f.json {
				outf(g.stderr, "console: %s\nsign-in token: %s\nonceflow serves until Ctrl-C\n", sum.Console, sum.AdminToken)
			}
		}
	}
	sum, err := demo.Run(cmd.Context(), cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
			return fmt.Errorf("demo interrupted; what it did so far is in %s", loc.URL())
		}
		return err
	}
	if !f.serve {
		printed = writeSummary(g, f.json, sum)
	}
	if printed != nil {
		return printed
	}
	if !sum.InvariantsOK {
		return fmt.Errorf("demo: invariants failed: %s", strings.Join(sum.Failures(), "; "))
	}
	return nil
}

// writeSummary prints a demo's summary to standard output, as JSON or as text.
func writeSummary(g *globals, asJSON bool, sum interface{ WriteText(io.Writer) error }) error {
	if asJSON {
		return writeJSON(g.stdout, sum)
	}
	return sum.WriteText(g.stdout)
}

// demoLocation returns a fresh database for the demo: the one given with --db (not from
// ONCEFLOW_DB, which may name a real database) — for PostgreSQL, a new schema in it unless
// ?schema= names one — or a file in a new temporary directory.
func demoLocation(cmd *cobra.Command, g *globals) (dbLocation, error) {
	if !cmd.Flags().Changed("db") {
		dir, err := os.MkdirTemp("", "onceflow-demo-")
		if err != nil {
			return dbLocation{}, fmt.Errorf("demo: %w", err)
		}
		return dbLocation{Scheme: "sqlite", Path: filepath.Join(dir, "onceflow.db")}, nil
	}
	loc, err := g.location()
	if err != nil {
		return loc, err
	}
	if loc.Scheme == "postgres" {
		if loc.Schema == "" {
			loc.Schema = "onceflow_demo_" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano(), 36))
		}
		return loc, nil
	}
	if _, err := os.Stat(loc.Path); err == nil {
		return loc, fmt.Errorf("demo needs a fresh database, and %s already exists; remove it or name another file with --db", loc.Path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return loc, fmt.Errorf("demo: %w", err)
	}
	return loc, nil
}
