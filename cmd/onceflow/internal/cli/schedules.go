package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

type schedulesFlags struct {
	workflows string
	json      bool
	next      int
	at        string
}

func newSchedulesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List the schedules of the workflow files, or fire a tick by hand",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	var f schedulesFlags
	list := &cobra.Command{
		Use:     "list",
		Short:   "Each schedule: its next ticks in its time zone, the last tick fired and its run",
		Example: `  onceflow schedules list --workflows ./workflows`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return schedulesList(cmd.Context(), g, f)
		},
	}
	list.Flags().StringVar(&f.workflows, "workflows", "", "directory of workflow YAML files (required)")
	list.Flags().BoolVar(&f.json, "json", false, "print JSON instead of text")
	list.Flags().IntVar(&f.next, "next", 3, "how many next ticks to show")
	trigger := &cobra.Command{
		Use:   "trigger NAME",
		Short: "Fire a tick by hand, with an explicit nominal time; a tick whose run exists starts nothing",
		Example: `  onceflow schedules trigger monthly-invoices --workflows ./workflows --time 2026-11-01T09:00:00+01:00
  onceflow schedules trigger nightly-sync --workflows ./workflows     # the latest tick`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return schedulesTrigger(cmd.Context(), g, args[0], f)
		},
	}
	trigger.Flags().StringVar(&f.workflows, "workflows", "", "directory of workflow YAML files (required)")
	trigger.Flags().StringVar(&f.at, "time", "", "the tick's nominal time, RFC 3339, a time the cron expression names (default: the latest tick at or before now)")
	trigger.Flags().BoolVar(&f.json, "json", false, "print JSON instead of text")
	cmd.AddCommand(list, trigger)
	return cmd
}

// scheduleSession opens the store and a client that knows the files' workflows and
// schedules.
func (g *globals) scheduleSession(ctx context.Context, workflows string) (*reviewSession, error) {
	if workflows == "" {
		return nil, usagef("--workflows is required: the directory of workflow files that define the schedules")
	}
	s, err := g.reviewSession(ctx, workflows)
	if err != nil {
		return nil, err
	}
	defs, err := fileReader().LoadDir(workflows)
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, sc := range flowfile.OutlineSchedules(defs) {
		if err := s.client.RegisterSchedule(sc); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func schedulesList(ctx context.Context, g *globals, f schedulesFlags) error {
	s, err := g.scheduleSession(ctx, f.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	infos, err := s.client.Schedules(ctx, max(f.next, 0))
	if err != nil {
		return err
	}
	if f.json {
		return writeJSONList(g.stdout, infos, apiv1.NewSchedule)
	}
	if len(infos) == 0 {
		outf(g.stdout, "no schedules in these workflow files\n")
		return nil
	}
	tw := newTable(g.stdout)
	outf(tw, "NAME\tWORKFLOW\tCRON\tTIMEZONE\tCATCH-UP\tNEXT TICKS\tLAST TICK\tRUN\n")
	for _, in := range infos {
		next := make([]string, len(in.Next))
		for i, t := range in.Next {
			next[i] = t.Format("2006-01-02 15:04:05 MST")
		}
		last, run := "-", "-"
		if !in.LastTick.IsZero() {
			last, run = in.LastTick.Format("2006-01-02 15:04:05 MST"), fmt.Sprint(in.LastRunID)
		}
		wf := in.Workflow
		if in.ForEach {
			wf += " (for each item)"
		}
		outf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Name, wf, in.Cron, in.Timezone, in.CatchUp, dash(strings.Join(next, ", ")), last, run)
	}
	return tw.Flush()
}

func schedulesTrigger(ctx context.Context, g *globals, name string, f schedulesFlags) error {
	var at time.Time
	if f.at != "" {
		t, err := time.Parse(time.RFC3339, f.at)
		if err != nil {
			return usagef("--time %q is not an RFC 3339 time such as 2026-11-01T09:00:00+01:00", f.at)
		}
		at = t
	}
	s, err := g.scheduleSession(ctx, f.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	run, err := s.client.TriggerSchedule(ctx, name, at)
	if errors.Is(err, onceflow.ErrScheduleNotFound) || errors.Is(err, onceflow.ErrNotATick) {
		return usagef("%s", strings.TrimPrefix(err.Error(), "onceflow: "))
	}
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(g.stdout, map[string]any{"run_id": run.ID, "workflow": run.Workflow, "run_key": run.RunKey, "created": !run.Duplicate})
	}
	if run.Duplicate {
		outf(g.stdout, "tick already started: run %d (%s, run key %s); nothing new\n", run.ID, run.Workflow, run.RunKey)
		return nil
	}
	outf(g.stdout, "started run %d (%s, run key %s); a running onceflow serve or worker executes it\n", run.ID, run.Workflow, run.RunKey)
	return nil
}
