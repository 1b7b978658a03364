package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/jsondoc"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
	"github.com/onceflow/onceflow/store"
)

// Exit statuses of keys show: what happened to the business action, for scripts.
const (
	keyCompleted = exitOK // the action happened; it is never performed again
	keyInFlight  = 3      // a step holds the key: acting, retrying or waiting for review
	keyNeverSeen = 4      // no step ever used the key (or retention purged its records)
	keyReleased  = 5      // steps used the key, none completed it, none holds it now
)

// keyStatus names a report's answer and its exit status.
func keyStatus(rep *onceflow.KeyReport) (string, int) {
	switch {
	case rep.State == string(store.EffectCompleted):
		return "completed", keyCompleted
	case rep.State == string(store.EffectInFlight):
		return "in_flight", keyInFlight
	case rep.Seen():
		return "released", keyReleased
	}
	return "never_seen", keyNeverSeen
}

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
		Long: `show answers whether the business action named by an effect key happened: completed (by
which run and step, when, with which result), in flight (a step holds it), released (steps
used it but none completed it: the destination refused, or a person abandoned or cancelled
the step) or never seen (no step ever used it, or retention purged its records), with the
steps that used it and its audit events.

Exit status: 0 completed, 3 in flight, 4 never seen, 5 released; 1 for an error and 2 for a
usage mistake. With --json, the object's "status" field says the same.`,
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
	s, err := g.reviewSession(ctx, mf.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	rep, err := mf.reader(s.client).Key(ctx, key)
	if err != nil {
		return err
	}
	status, code := keyStatus(rep)
	if err := writeKey(g, key, rep, status, asJSON); err != nil {
		return err
	}
	if code != exitOK {
		return &statusError{code: code}
	}
	return nil
}

// keyJSON is keys show --json: the API's key view and the status the exit code gives.
type keyJSON struct {
	Status string `json:"status"`
	*apiv1.Key
}

// writeKey prints what keys show answers.
func writeKey(g *globals, key string, rep *onceflow.KeyReport, status string, asJSON bool) error {
	if asJSON {
		out := apiv1.NewKey(rep, nil)
		if out.Effect != nil {
			out.Effect.Result = jsondoc.Shallow(out.Effect.Result)
		}
		return writeJSON(g.stdout, keyJSON{Status: status, Key: &out})
	}
	w := g.stdout
	e := rep.Effect
	switch status {
	case "completed":
		outf(w, "key %s: completed — the business action happened and is never performed again\n", key)
	case "in_flight":
		outf(w, "key %s: in flight — a step holds it and is acting, retrying or waiting for review\n", key)
	case "released":
		outf(w, "key %s: released — steps used it but none completed it (the destination refused, or the step was abandoned or cancelled); no step holds it\n", key)
	default:
		outf(w, "key %s: never seen — no step ever used this key (or retention purged its records)\n", key)
	}
	if e != nil {
		tw := newTable(w)
		outf(tw, "  by\trun %d (%s) step %s\n", e.RunID, e.Workflow, e.StepName)
		outf(tw, "  taken\t%s\n", timeText(e.CreatedAt))
		if !e.CompletedAt.IsZero() {
			outf(tw, "  completed\t%s\n", timeText(e.CompletedAt))
			outf(tw, "  result\t%s\n", clip(string(e.Result), 200))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	outf(w, "\nUSED BY (%d)\n", len(rep.Uses))
	if len(rep.Uses) > 0 {
		tw := newTable(w)
		outf(tw, "RUN\tWORKFLOW\tENTITY\tSTEP\tLAST EVENT\n")
		for _, u := range rep.Uses {
			outf(tw, "%d\t%s\t%s\t%s\t%s\n", u.RunID, u.Workflow, dash(u.Entity), u.Step, u.Last)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	outf(w, "\nEVENTS (%d)\n", len(rep.Events))
	if len(rep.Events) == 0 {
		return nil
	}
	return writeAudit(w, rep.Events, true)
}
