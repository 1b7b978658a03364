package cli

import (
	"context"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/store"
)

type purgeFlags struct {
	olderThan time.Duration
	dryRun    bool
	json      bool
	batch     int
	actor     string
}

func newPurgeCommand(g *globals) *cobra.Command {
	var f purgeFlags
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete finished runs older than a cutoff and ledger keys whose retention ended",
		Long: `purge deletes what is no longer worth keeping, in batches that each commit on their own:

  - with --older-than (at least 1h), runs that finished (completed, failed or cancelled,
    every step finished) before that age, with their steps, attempts and audit events;
  - ledger rows (effect keys) whose step declared a retention that has ended. A key whose
    retention ended is forgotten: a later run that produces it performs the effect again.

It never deletes anything of a run that waits for review or is still at work, nor the
ledger rows such a run refers to, a key kept forever (the default), a key not yet expired
or one in flight. Each batch is recorded as a retention.purged audit event naming the
actor, the cutoff and the counts. --dry-run reports what a purge would delete and deletes
nothing. Several purges may run at once, from any machine.

OLDEST and NEWEST say when the deleted runs and steps last changed, the attempts started,
the events happened and the ledger keys completed.`,
		Example: `  onceflow purge --older-than 90d --dry-run
  onceflow purge --older-than 90d
  onceflow purge --json                # only ledger keys whose retention ended`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return purge(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.Var(&duration.Flag{D: &f.olderThan, Positive: true}, "older-than", "also delete runs that finished longer ago than this, such as 90d or 36h (default: keep every run)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "report what would be deleted, and delete nothing")
	fl.BoolVar(&f.json, "json", false, "print the report as one JSON object")
	fl.IntVar(&f.batch, "batch-size", store.DefaultPurgeBatch, "the most runs, and the most ledger rows, one transaction deletes")
	fl.StringVar(&f.actor, "actor", "", "who purges, for the audit trail (default: the user running the command)")
	return cmd
}

// defaultActor names the user running the command.
func defaultActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return "cli:" + name
	}
	return "cli"
}

// purgeView is the --json report.
type purgeView struct {
	*store.PurgeReport
	Now        time.Time `json:"now"`
	RunsBefore time.Time `json:"runs_before,omitzero"`
	Actor      string    `json:"actor"`
}

func purge(ctx context.Context, g *globals, f purgeFlags) error {
	p := store.RetentionPurgeParams{DryRun: f.dryRun, BatchSize: f.batch, Actor: f.actor}
	if f.batch <= 0 {
		return usagef("--batch-size must be at least 1, got %d", f.batch)
	}
	if f.olderThan > 0 && f.olderThan < onceflow.DefaultRecentKeysTTL {
		// A running client answers a key it started in the last RecentKeysTTL from memory:
		// a run purged younger than that could be named as a repeated key's run.
		return usagef("--older-than %v is shorter than %v: a running onceflow answers a repeated run key of the last %v from memory, and could name a run purged since; give --older-than %v or more",
			f.olderThan, onceflow.DefaultRecentKeysTTL, onceflow.DefaultRecentKeysTTL, onceflow.DefaultRecentKeysTTL)
	}
	if p.Actor == "" {
		p.Actor = defaultActor()
	}
	s, loc, err := g.openStore(ctx, true)
	if err != nil {
		return err
	}
	defer s.Close()
	// Which retention ended is decided by the time the engine wrote retentions with: the
	// database's clock on PostgreSQL.
	c, err := onceflow.New(onceflow.Config{Store: s})
	if err != nil {
		return err
	}
	p.Now = c.Now()
	if f.olderThan > 0 {
		p.RunsBefore = p.Now.Add(-f.olderThan)
	}
	r, err := s.RetentionPurge(ctx, p)
	if err != nil {
		if r != nil && !r.Empty() {
			outf(g.stderr, "onceflow: the purge stopped after deleting %d runs and %d ledger keys in %d batches\n", r.Runs.Count, r.Effects.Count, r.Batches)
		}
		return err
	}
	if f.json {
		return writeJSON(g.stdout, purgeView{PurgeReport: r, Now: p.Now.UTC(), RunsBefore: p.RunsBefore.UTC(), Actor: p.Actor})
	}
	return writePurgeReport(g.stdout, loc.URL(), p, r)
}

func writePurgeReport(w io.Writer, db string, p store.RetentionPurgeParams, r *store.PurgeReport) error {
	switch {
	case r.DryRun:
		outf(w, "dry run on %s: nothing was deleted; a purge now would delete:\n", db)
	default:
		outf(w, "purged %s in %d batch(es), as %s:\n", db, r.Batches, p.Actor)
	}
	tw := newTable(w)
	outf(tw, "KIND\tCOUNT\tOLDEST\tNEWEST\n")
	for _, k := range []struct {
		kind string
		c    store.PurgeCount
	}{{"runs", r.Runs}, {"steps", r.Steps}, {"attempts", r.Attempts}, {"events", r.Events}, {"ledger keys", r.Effects}} {
		outf(tw, "%s\t%d\t%s\t%s\n", k.kind, k.c.Count, timeText(k.c.Oldest), timeText(k.c.Newest))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.RunsBefore.IsZero() {
		outf(w, "runs: none (no --older-than)\n")
	} else {
		outf(w, "runs: finished before %s, none waiting for review or still at work\n", timeText(p.RunsBefore))
	}
	outf(w, "ledger keys: retention ended by %s; keys kept forever are never purged\n", timeText(p.Now))
	return nil
}
