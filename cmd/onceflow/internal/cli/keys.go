package cli

import (
	"context"
	"fmt"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/internal/views"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

func newKeysCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Answer whether a business action happened, by its effect key",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	var asJSON bool
	var mf maskFlags
	show := &cobra.Command{
		Use:   "show KEY",
		Short: "Show an effect key: completed or not, when, by which run and step, with which result, and its events",
		Example: `  onceflow keys show lead-create:8812
  onceflow keys show invoice:1001 --json`,
		Args: exactArgs("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return keysShow(cmd.Context(), g, args[0], asJSON, mf)
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	mf.add(show)
	cmd.AddCommand(show)
	return cmd
}

func keysShow(ctx context.Context, g *globals, key string, asJSON bool, mf maskFlags) error {
	if err := onceflow.ValidateKey("effect key", key); err != nil {
		return usagef("%v", err)
	}
	policy, err := mf.policy()
	if err != nil {
		return err
	}
	s, err := g.reviewSession(ctx, "")
	if err != nil {
		return err
	}
	defer s.Close()
	rep, err := s.client.Key(ctx, key)
	if err != nil {
		return err
	}
	mask := func(_ int64, workflow string) *redact.Masker { return policy.ForRun(workflow) }
	if mf.unmasked {
		mask = func(int64, string) *redact.Masker { return nil }
		var runID int64
		var workflow string
		if rep.Effect != nil {
			runID, workflow = rep.Effect.RunID, rep.Effect.Workflow
		}
		if err := recordUnmasked(ctx, s.store, mf.actor, runID, workflow, "effect key "+key); err != nil {
			return err
		}
	}
	if rep.Effect != nil && len(rep.Effect.Result) > 0 && !mf.unmasked {
		masked := *rep.Effect
		masked.Result = mask(masked.RunID, masked.Workflow).JSON(masked.Result)
		rep.Effect = &masked
	}
	if asJSON {
		out := views.NewKey(rep, mask, nil)
		return writeJSON(g.stdout, out)
	}
	w := g.stdout
	e := rep.Effect
	switch rep.State {
	case string(store.EffectCompleted):
		fmt.Fprintf(w, "key %s: completed — the business action happened and is never performed again\n", key)
	case string(store.EffectInFlight):
		fmt.Fprintf(w, "key %s: in flight — a step holds it and is acting, retrying or waiting for review\n", key)
	default:
		fmt.Fprintf(w, "key %s: free — not completed (never performed, or the destination refused it)\n", key)
	}
	if e != nil {
		tw := newTable(w)
		fmt.Fprintf(tw, "  by\trun %d (%s) step %s\n", e.RunID, e.Workflow, e.StepName)
		fmt.Fprintf(tw, "  taken\t%s\n", timeText(e.CreatedAt))
		if !e.CompletedAt.IsZero() {
			fmt.Fprintf(tw, "  completed\t%s\n", timeText(e.CompletedAt))
			fmt.Fprintf(tw, "  result\t%s\n", clip(string(e.Result), 200))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nUSED BY (%d)\n", len(rep.Uses))
	if len(rep.Uses) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "RUN\tWORKFLOW\tENTITY\tSTEP\tLAST EVENT")
		for _, u := range rep.Uses {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", u.RunID, u.Workflow, dash(u.Entity), u.Step, u.Last)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nEVENTS (%d)\n", len(rep.Events))
	if len(rep.Events) == 0 {
		return nil
	}
	if !mf.unmasked {
		for _, e := range rep.Events {
			e.Why = policy.ForRun(e.Workflow).Text(e.Why)
		}
	}
	return writeAudit(w, rep.Events, true)
}
