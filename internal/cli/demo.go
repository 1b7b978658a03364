package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/internal/demo"
)

type demoFlags struct {
	json    bool
	runs    int
	workers int
	seed    uint64
}

func newDemoCommand(g *globals) *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch onceflow perform every effect once against services that misbehave",
		Long: `demo starts three simulated services on 127.0.0.1 — a CRM, a mailer and a chat notifier —
that fail on purpose: 503 and 429 answers, connections dropped after the work was done,
answers that arrive after the caller gave up, and permanent refusals. It posts website
forms twice (double clicks, some at the same instant), posts some again under a new
request id, and runs the website-lead workflow for each until every run is completed or
waits for review. It then counts, at the services themselves, how many business actions
were applied twice (there must be none) and exits non-zero if any check fails.

It needs nothing installed and uses a new SQLite file in a temporary directory, or the
file given with --db, which must not exist yet.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the summary as one JSON object (progress goes to stderr)")
	fl.IntVar(&f.runs, "runs", 40, "how many runs (website forms) to start")
	fl.IntVar(&f.workers, "workers", 8, "how many steps execute at once")
	fl.Uint64Var(&f.seed, "seed", 1, "chooses which requests fail; the same seed injects the same faults")
	return cmd
}

func runDemo(cmd *cobra.Command, g *globals, f demoFlags) error {
	if f.runs < 1 || f.runs > 10000 {
		return usagef("--runs must be between 1 and 10000, got %d", f.runs)
	}
	if f.workers < 1 || f.workers > 1000 {
		return usagef("--workers must be between 1 and 1000, got %d", f.workers)
	}
	path, err := demoDBPath(cmd, g)
	if err != nil {
		return err
	}
	progress := g.stdout
	if f.json {
		progress = g.stderr
	}
	fmt.Fprintf(progress, "onceflow demo: %d website forms, each posted twice, through a CRM, a mailer and a chat notifier that fail on purpose\n", f.runs)
	fmt.Fprintf(progress, "database: %s\n\n", path)

	sum, err := demo.Run(cmd.Context(), demo.Config{
		DBPath: path, Runs: f.runs, Workers: f.workers, Seed: f.seed, Progress: progress,
	})
	if err != nil {
		if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
			return fmt.Errorf("demo interrupted; what it did so far is in %s", path)
		}
		return err
	}
	if f.json {
		err = writeJSON(g.stdout, sum)
	} else {
		err = sum.WriteText(g.stdout)
	}
	if err != nil {
		return err
	}
	if !sum.InvariantsOK {
		return fmt.Errorf("demo: invariants failed: %s", strings.Join(sum.Failures(), "; "))
	}
	return nil
}

// demoDBPath returns a path for a fresh database: the one given with --db (not from
// ONCEFLOW_DB, which may name a real database), or one in a new temporary directory.
func demoDBPath(cmd *cobra.Command, g *globals) (string, error) {
	if !cmd.Flags().Changed("db") {
		dir, err := os.MkdirTemp("", "onceflow-demo-")
		if err != nil {
			return "", fmt.Errorf("demo: %w", err)
		}
		return filepath.Join(dir, "onceflow.db"), nil
	}
	loc, err := g.location()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(loc.Path); err == nil {
		return "", fmt.Errorf("demo needs a fresh database, and %s already exists; remove it or name another file with --db", loc.Path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("demo: %w", err)
	}
	return loc.Path, nil
}
