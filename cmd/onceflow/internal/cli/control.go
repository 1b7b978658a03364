package cli

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// controlFlags are what cancel, pause and resume take.
type controlFlags struct {
	actor, note string
	json        bool
	// workflows, for pause and resume, are the files of workflows that may be known
	// only by their definition (no run stored yet).
	workflows string
}

func (f *controlFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.actor, "actor", reviewActor(), "who acts, for the audit trail")
	cmd.Flags().StringVar(&f.note, "note", "", "why, for the audit trail")
	cmd.Flags().BoolVar(&f.json, "json", false, "print one JSON object instead of text")
}

func newRunsCancelCommand(g *globals) *cobra.Command {
	var f controlFlags
	cmd := &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a run: its steps that have not finished are never run",
		Long: `cancel cancels a run in one transaction: its pending, retrying and needs_review steps become
cancelled and are never claimed again; a step whose attempt is running is cancelled too, and
its attempt finishes and is recorded (a success is kept in the effect ledger, so it is never
performed again). Keys whose effect cannot have happened are released; keys whose effect may
have happened stay held. The run becomes cancelled (failed, if a step had already failed).
The actor and the note go to the audit trail. A cancelled run can be replayed with
'onceflow review replay'.`,
		Example: `  onceflow runs cancel 42 --note "customer withdrew the order"`,
		Args:    exactArgs("RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("run ID %q is not a positive number", args[0])
			}
			return runsCancel(cmd.Context(), g, id, f)
		},
	}
	f.register(cmd)
	return cmd
}

func runsCancel(ctx context.Context, g *globals, id int64, f controlFlags) error {
	s, err := g.reviewSession(ctx, "")
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := s.client.CancelRun(ctx, id, f.actor, f.note)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(g.stdout, map[string]any{"run_id": id, "state": res.Run.State, "cancelled": nonNil(res.Cancelled), "running": nonNil(res.Running)})
	}
	outf(g.stdout, "cancelled run %d (%s): run %s; steps cancelled: %s", id, res.Run.Workflow, res.Run.State, listText(res.Cancelled))
	if len(res.Running) > 0 {
		outf(g.stdout, "; still running, cancelled once their attempt is recorded: %s", listText(res.Running))
	}
	outf(g.stdout, " (by %s)\n", f.actor)
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func listText(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

func newPauseCommand(g *globals) *cobra.Command {
	var f controlFlags
	cmd := &cobra.Command{
		Use:   "pause WORKFLOW",
		Short: "Pause a workflow's execution: runs are accepted, their steps wait",
		Long: `pause stops the execution of a workflow's steps, durably, in every process that serves it:
runs are still accepted and stored, but their steps are not claimed until 'onceflow resume'.
Steps already running finish. The process a pause is made in applies it at once; the others
within a few seconds. The actor and the note go to the audit trail.`,
		Example: `  onceflow pause website-lead --note "the CRM is down for maintenance"
  onceflow pause new-workflow --workflows ./workflows   # one without runs yet`,
		Args: exactArgs("WORKFLOW"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return pauseResume(cmd.Context(), g, args[0], f, true)
		},
	}
	f.register(cmd)
	f.registerWorkflows(cmd)
	return cmd
}

// registerWorkflows adds --workflows to pause and resume.
func (f *controlFlags) registerWorkflows(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.workflows, "workflows", "", "workflow files (a file or directory) defining workflows that have no runs yet; "+
		"without it, WORKFLOW must have runs or be paused")
}

func newResumeCommand(g *globals) *cobra.Command {
	var f controlFlags
	cmd := &cobra.Command{
		Use:     "resume WORKFLOW",
		Short:   "Resume a paused workflow's execution",
		Example: `  onceflow resume website-lead --note "the CRM is back"`,
		Args:    exactArgs("WORKFLOW"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return pauseResume(cmd.Context(), g, args[0], f, false)
		},
	}
	f.register(cmd)
	f.registerWorkflows(cmd)
	return cmd
}

func pauseResume(ctx context.Context, g *globals, workflow string, f controlFlags, pause bool) error {
	s, err := g.reviewSession(ctx, f.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	do, verb, already := s.client.ResumeWorkflow, "resumed", "was not paused"
	if pause {
		do, verb, already = s.client.PauseWorkflow, "paused", "was already paused"
	}
	changed, err := do(ctx, workflow, f.actor, f.note)
	var de *onceflow.DefinitionError
	switch {
	case errors.As(err, &de):
		return usagef("%q is not a workflow name", workflow)
	case errors.Is(err, onceflow.ErrWorkflowNotFound):
		hint := "check the name ('onceflow runs list' and 'onceflow paused' show those with runs and the paused ones)"
		if f.workflows == "" {
			hint += ", or give --workflows to " + strings.TrimSuffix(verb, "d") + " one defined in a file that has no runs yet"
		}
		return usagef("no workflow %q has runs, is paused or is defined in --workflows; nothing was changed; %s", workflow, hint)
	case err != nil:
		return err
	}
	if f.json {
		return writeJSON(g.stdout, map[string]any{"workflow": workflow, "paused": pause, "changed": changed})
	}
	if !changed {
		outf(g.stdout, "workflow %s %s; nothing changed\n", workflow, already)
		return nil
	}
	outf(g.stdout, "workflow %s %s (by %s)\n", workflow, verb, f.actor)
	return nil
}

func newPausedCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "paused",
		Short: "List the paused workflows",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := g.reviewSession(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.client.PausedWorkflows(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSONList(g.stdout, list, func(wp store.WorkflowPause) map[string]any {
					return map[string]any{"workflow": wp.Workflow, "since": wp.Since, "actor": wp.Actor, "note": wp.Note}
				})
			}
			if len(list) == 0 {
				outf(g.stdout, "no workflow is paused\n")
				return nil
			}
			tw := newTable(g.stdout)
			outf(tw, "WORKFLOW\tSINCE\tBY\tNOTE\n")
			for _, wp := range list {
				outf(tw, "%s\t%s\t%s\t%s\n", wp.Workflow, timeText(wp.Since), wp.Actor, dash(wp.Note))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}
