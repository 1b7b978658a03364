package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
	"github.com/onceflow/onceflow/triggers"
)

func newReviewCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Work the review queue: retry, correct and replay, resolve by hand, abandon",
		Long: `review lists the steps waiting in needs_review, with why they wait, and acts on them. Every
action is recorded in the audit trail, in the same transaction, with --actor and --note.

  retry     try the step again as it is, with a fresh attempt budget
  replay    correct the run's input (--patch, a JSON merge patch) and run again what has not
            completed; completed effects are never repeated. --dry-run shows what it would do.
  resolve   mark the step completed by hand (--output '{"id":77}'): its key is recorded
            completed, and the steps that need it continue
  abandon   end the step and the run failed

A step whose outcome is unknown (its effect may have happened) needs an explicit decision:
resolve --it-happened, or retry --send-again (the same effect key is sent again).

Name one item as RUN STEP, or many with filter flags (--workflow, --step, --reason,
--entity, --run, --older-than; --all for every item): each item is acted on in its own
transaction and reported on its own line.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(newReviewListCommand(g), newReviewShowCommand(g), newReviewRetryCommand(g), newReviewReplayCommand(g),
		newReviewResolveCommand(g), newReviewAbandonCommand(g))
	return cmd
}

// filterFlags select review items.
type filterFlags struct {
	workflow, step, reason, entity string
	olderThan                      time.Duration
	run                            int64
	limit                          int
	all                            bool
}

func (f *filterFlags) add(cmd *cobra.Command, bulk bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.workflow, "workflow", "", "only items of this workflow")
	fl.StringVar(&f.step, "step", "", "only items of this step")
	fl.StringVar(&f.reason, "reason", "", "only items with this reason (permanent_error, attempts_exhausted, key_conflict, outcome_unknown, invalid_key, destination_blocked, …)")
	fl.StringVar(&f.entity, "entity", "", "only items about this entity, such as order:1001")
	fl.Int64Var(&f.run, "run", 0, "only items of this run")
	fl.Var(&duration.Flag{D: &f.olderThan, Positive: true}, "older-than", "only items parked longer ago than this, such as 30m, 24h or 7d")
	if bulk {
		fl.IntVar(&f.limit, "limit", 0, "act on at most this many items (default: every item selected)")
		fl.BoolVar(&f.all, "all", false, "act on every item of the queue (without a filter flag)")
	} else {
		fl.IntVar(&f.limit, "limit", 100, "show at most this many items")
	}
}

func (f *filterFlags) any() bool {
	return f.workflow != "" || f.step != "" || f.reason != "" || f.entity != "" || f.olderThan != 0 || f.run != 0
}

func (f *filterFlags) filter() (onceflow.ReviewFilter, error) {
	rf := onceflow.ReviewFilter{Workflow: f.workflow, Step: f.step, Reason: onceflow.Reason(f.reason), Entity: f.entity, RunID: f.run, Limit: f.limit}
	if f.run < 0 {
		return rf, usagef("--run must be a positive run ID")
	}
	if f.limit < 0 {
		return rf, usagef("--limit must not be negative")
	}
	rf.OlderThan = f.olderThan
	return rf, nil
}

// actionFlags are what every action takes.
type actionFlags struct {
	actor, note, workflows string
	json                   bool
}

func (a *actionFlags) add(cmd *cobra.Command, workflowsHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&a.actor, "actor", reviewActor(), "who decides, for the audit trail")
	fl.StringVar(&a.note, "note", "", "why, for the audit trail")
	fl.StringVar(&a.workflows, "workflows", "", workflowsHelp)
	fl.BoolVar(&a.json, "json", false, "print JSON instead of text")
}

// reviewActor names the person at the terminal: $ONCEFLOW_ACTOR, else the login name.
func reviewActor() string {
	for _, k := range []string{"ONCEFLOW_ACTOR", "USER", "LOGNAME", "USERNAME"} {
		if v := os.Getenv(k); v != "" {
			return "cli:" + v
		}
	}
	return "cli"
}

// reviewSession is an open store and a client that knows the workflow files, if given.
// The client masks what the commands read as the API masks it (see cliRedaction).
type reviewSession struct {
	store  cliStore
	client *onceflow.Client
}

func (g *globals) reviewSession(ctx context.Context, workflows string) (*reviewSession, error) {
	st, _, err := g.openStore(ctx, true)
	if err != nil {
		return nil, err
	}
	var defs []*flowfile.Definition
	if workflows != "" {
		if defs, err = fileReader().Load(workflows); err != nil {
			st.Close()
			return nil, err
		}
	}
	red, err := cliRedaction(defs)
	if err != nil {
		st.Close()
		return nil, err
	}
	c, err := onceflow.New(onceflow.Config{Store: st, Redact: red})
	if err != nil {
		st.Close()
		return nil, err
	}
	if workflows != "" {
		wfs, err := flowfile.Outline(defs)
		if err != nil {
			st.Close()
			return nil, err
		}
		// The companion workflows of the queues (NAME.rejected), whose review items a
		// replay restarts.
		ts, err := flowfile.Triggers(defs, flowfile.TriggerOptions{})
		if err != nil {
			st.Close()
			return nil, err
		}
		var rejects []onceflow.Workflow
		for _, t := range ts {
			if cs, ok := t.(triggers.Companions); ok {
				rejects = append(rejects, cs.Companions(c)...)
			}
		}
		for _, w := range append(wfs, rejects...) {
			if err := c.Register(w); err != nil {
				st.Close()
				return nil, err
			}
		}
	}
	return &reviewSession{store: st, client: c}, nil
}

func (s *reviewSession) Close() { s.store.Close() }

// itemArgs reads RUN STEP, or nothing for a bulk action.
func itemArgs(cmd *cobra.Command, args []string, f *filterFlags) (runID int64, step string, bulk bool, err error) {
	switch len(args) {
	case 0:
		if !f.any() && !f.all {
			return 0, "", false, usagef("%s needs RUN STEP, or filter flags (--workflow, --step, --reason, --entity, --run, --older-than) or --all to act on many items", cmd.CommandPath())
		}
		return 0, "", true, nil
	case 2:
		if f.any() || f.all {
			return 0, "", false, usagef("%s takes RUN STEP or filter flags, not both", cmd.CommandPath())
		}
		id, err := parseRunID(args[0])
		return id, args[1], false, err
	}
	return 0, "", false, usagef("%s takes RUN STEP (two arguments), or filter flags; got %d argument(s)", cmd.CommandPath(), len(args))
}

func parseRunID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("run ID %q is not a positive number; use the RUN column of 'onceflow review list'", s)
	}
	return id, nil
}

func newReviewListCommand(g *globals) *cobra.Command {
	var f filterFlags
	var asJSON bool
	var mf maskFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the steps waiting for review, oldest first",
		Example: `  onceflow review list
  onceflow review list --reason outcome_unknown --older-than 1h
  onceflow review list --entity order:1001 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rf, err := f.filter()
			if err != nil {
				return err
			}
			if rf.Limit == 0 {
				return usagef("--limit must be at least 1")
			}
			s, err := g.reviewSession(cmd.Context(), mf.workflows)
			if err != nil {
				return err
			}
			defer s.Close()
			// Masked as the API masks the queue.
			items, err := s.client.ReviewList(cmd.Context(), rf)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSONList(g.stdout, items, viewItem)
			}
			if len(items) == 0 {
				outf(g.stdout, "no steps wait for review\n")
				return nil
			}
			tw := newTable(g.stdout)
			outf(tw, "RUN\tSTEP\tWORKFLOW\tENTITY\tREASON\tATTEMPTS\tSTATUS\tAGE\tLAST ERROR\n")
			for _, it := range items {
				status := "-"
				if it.ResponseStatus != 0 {
					status = strconv.Itoa(it.ResponseStatus)
				}
				outf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", it.RunID, it.Step, it.Workflow, dash(it.Entity), it.Reason, it.Attempts,
					status, ageText(it.Age), dash(clip(it.LastError, 60)))
			}
			return tw.Flush()
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	cmd.Flags().StringVar(&mf.workflows, "workflows", "", "workflow files (a file or directory) whose redact: fields and secrets are masked too")
	return cmd
}

// itemView is a review item as the command prints it in JSON: the API's shape, without
// links.
type itemView = apiv1.ReviewItem

// viewItem shapes it, masked by the client that read it.
func viewItem(it *onceflow.ReviewItem) itemView { return apiv1.NewReviewItem(it, nil) }

func ageText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func newReviewShowCommand(g *globals) *cobra.Command {
	var a actionFlags
	cmd := &cobra.Command{
		Use:   "show RUN STEP",
		Short: "Show one item: why it waits, its attempts, its events and what a replay would do",
		Args:  exactArgs("RUN", "STEP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			return reviewShow(cmd.Context(), g, a, id, args[1])
		},
	}
	a.add(cmd, "directory of workflow files; with it, show also what a replay would do")
	cmd.Flags().Lookup("actor").Hidden = true
	cmd.Flags().Lookup("note").Hidden = true
	return cmd
}

func reviewShow(ctx context.Context, g *globals, a actionFlags, runID int64, step string) error {
	s, err := g.reviewSession(ctx, a.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	// Masked as the API masks the item: with the run's input and outputs, the fields
	// ONCEFLOW_REDACT_FIELDS names and, with --workflows, each file's redact: fields and
	// secret values.
	d, err := s.client.ReviewDetail(ctx, runID, step)
	if err != nil {
		return err
	}
	it, mine, events := d.Item, d.Attempts, d.Events
	var plan *onceflow.ReplayPlan
	if a.workflows != "" && it.State == onceflow.StateNeedsReview && !it.EffectMayExist {
		if plan, err = s.client.ReviewPreview(ctx, onceflow.ReplayRequest{RunID: runID, Step: step}); err != nil {
			return err
		}
	}
	if a.json {
		out := struct {
			Item     itemView        `json:"item"`
			Attempts []apiv1.Attempt `json:"attempts"`
			Events   []auditView     `json:"events"`
			Replay   *planView       `json:"replay,omitempty"`
		}{Item: viewItem(it), Attempts: []apiv1.Attempt{}, Events: []auditView{}}
		for _, at := range mine {
			out.Attempts = append(out.Attempts, apiv1.NewAttempt(at))
		}
		for _, e := range events {
			out.Events = append(out.Events, viewAudit(e))
		}
		if plan != nil {
			pv := viewPlan(plan)
			out.Replay = &pv
		}
		return writeJSON(g.stdout, out)
	}
	w := g.stdout
	outf(w, "run %d step %s  (%s, run key %s)\n", it.RunID, it.Step, it.Workflow, it.RunKey)
	tw := newTable(w)
	outf(tw, "  state\t%s\n", it.State)
	outf(tw, "  reason\t%s\n", dash(string(it.Reason)))
	outf(tw, "  entity\t%s\n", dash(it.Entity))
	outf(tw, "  effect key\t%s\n", dash(it.EffectKey))
	if it.AttemptBase > 0 {
		outf(tw, "  attempts\t%d (the retry policy counts those after attempt %d, the last manual retry or replay)\n", it.Attempts, it.AttemptBase)
	} else {
		outf(tw, "  attempts\t%d\n", it.Attempts)
	}
	outf(tw, "  last error\t%s\n", dash(it.LastError))
	if it.ResponseStatus != 0 || it.ResponseExcerpt != "" {
		outf(tw, "  response\t%d %s\n", it.ResponseStatus, clip(it.ResponseExcerpt, 120))
	}
	outf(tw, "  since\t%s (%s ago)\n", timeText(it.Since), ageText(it.Age))
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case it.State != onceflow.StateNeedsReview:
		outf(w, "\nThe step is %s: it is not in review.\n", it.State)
	case it.EffectMayExist:
		outf(w, "\nIts outcome is unknown: the effect may have happened. Decide:\n  onceflow review resolve %d %s --it-happened --note …   (it happened)\n  onceflow review retry %d %s --send-again --note …      (send again, same key)\n",
			it.RunID, it.Step, it.RunID, it.Step)
	default:
		outf(w, "\nDecide with: onceflow review retry|replay|resolve|abandon %d %s --note …\n", it.RunID, it.Step)
	}
	outf(w, "\nATTEMPTS (%d)\n", len(mine))
	if len(mine) > 0 {
		tw = newTable(w)
		outf(tw, "#\tWORKER\tOUTCOME\tSTATUS\tSTARTED\tERROR\n")
		for _, at := range mine {
			status := "-"
			if at.ResponseStatus != 0 {
				status = strconv.Itoa(at.ResponseStatus)
			}
			outf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", at.Number, at.Worker, dash(string(at.Outcome)), status, timeText(at.StartedAt), dash(clip(at.Error, 80)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	outf(w, "\nEVENTS (%d)\n", len(events))
	if err := writeAudit(w, events, false); err != nil {
		return err
	}
	if plan != nil {
		outf(w, "\nA REPLAY WOULD\n")
		return writePlan(w, plan, "NOW")
	}
	return nil
}

// printResult prints what an action did to one item.
func printResult(w io.Writer, verb string, a actionFlags, res *onceflow.ReviewResult) error {
	if a.json {
		return writeJSON(w, struct {
			RunID     int64          `json:"run_id"`
			Step      string         `json:"step"`
			Action    string         `json:"action"`
			StepState onceflow.State `json:"step_state"`
			RunState  onceflow.State `json:"run_state"`
			Ledger    string         `json:"ledger,omitempty"`
			Actor     string         `json:"actor"`
		}{res.RunID, res.Step, verb, res.StepState, res.RunState, res.Ledger, a.actor})
	}
	outf(w, "%s run %d step %s: step %s, run %s", verb, res.RunID, res.Step, res.StepState, res.RunState)
	if res.Ledger != "" {
		outf(w, ", key %s in the ledger", res.Ledger)
	}
	outf(w, " (by %s)\n", a.actor)
	return nil
}

// printBulk prints the per-item outcome of a bulk action and fails when an item was
// refused.
func printBulk(w io.Writer, action onceflow.BulkAction, dry bool, a actionFlags, items []*onceflow.BulkItem) error {
	refused := 0
	for _, it := range items {
		if it.Err != nil {
			refused++
		}
	}
	if a.json {
		out := apiv1.Bulk[planView]{Action: string(action), DryRun: dry, Matched: len(items), OK: len(items) - refused, Refused: refused,
			Items: []apiv1.BulkItem[planView]{}}
		for _, it := range items {
			v := apiv1.NewBulkItem[planView](it)
			if it.Err != nil {
				v.Error = it.Err.Error()
			}
			if it.Plan != nil {
				pv := viewPlan(it.Plan)
				v.Plan = &pv
			}
			out.Items = append(out.Items, v)
		}
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		if len(items) == 0 {
			outf(w, "no review item matches\n")
			return nil
		}
		tw := newTable(w)
		outf(tw, "RUN\tSTEP\tREASON\tRESULT\n")
		for _, it := range items {
			result := "ok"
			switch {
			case it.Err != nil:
				result = "refused: " + it.Err.Error()
			case it.SameRunAs != "":
				result = "ok (with " + it.SameRunAs + " of the same run)"
			case it.Plan != nil && dry:
				result = "would " + planSummary(it.Plan)
			case it.Plan != nil:
				result = "replayed: " + planSummary(it.Plan)
			case dry:
				result = "would " + string(action)
			case it.RunState != "":
				result = "ok, run " + string(it.RunState)
			}
			outf(tw, "%d\t%s\t%s\t%s\n", it.RunID, it.Step, it.Reason, result)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		verb := string(action)
		if dry {
			verb = "would " + verb
		}
		outf(w, "%d item(s): %d %s, %d refused", len(items), len(items)-refused, verb, refused)
		if dry {
			out(w, " — dry run: nothing was changed")
		}
		outf(w, "\n")
	}
	if refused > 0 {
		return fmt.Errorf("%d of %d item(s) were refused; the others were %s", refused, len(items), map[bool]string{true: "checked", false: "done"}[dry])
	}
	return nil
}

func newReviewRetryCommand(g *globals) *cobra.Command {
	var f filterFlags
	var a actionFlags
	var sendAgain, dry bool
	cmd := &cobra.Command{
		Use:   "retry [RUN STEP]",
		Short: "Retry a step as it is, with a fresh attempt budget",
		Example: `  onceflow review retry 42 crm_lead --note "CRM is back"
  onceflow review retry 43 welcome_email --send-again --note "mail server confirms nothing was sent"
  onceflow review retry --reason attempts_exhausted --workflow website-lead --note "outage over"`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, step, bulk, err := itemArgs(cmd, args, &f)
			if err != nil {
				return err
			}
			return reviewAct(cmd.Context(), g, f, a, reviewActParams{bulk: bulk,
				req: onceflow.BulkRequest{Action: onceflow.BulkRetry, SendAgain: sendAgain, DryRun: dry},
				one: onceflow.ReviewAction{RunID: id, Step: step, Actor: a.actor, Note: a.note, SendAgain: sendAgain},
				act: (*onceflow.Client).ReviewRetry, verb: "retried"})
		},
	}
	f.add(cmd, true)
	a.add(cmd, "directory of workflow files (not needed to retry)")
	cmd.Flags().BoolVar(&sendAgain, "send-again", false, "for an item whose outcome is unknown: send the effect again under the same key")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "with filter flags: report what would be retried and change nothing")
	return cmd
}

func newReviewResolveCommand(g *globals) *cobra.Command {
	var f filterFlags
	var a actionFlags
	var output string
	var itHappened, dry bool
	cmd := &cobra.Command{
		Use:   "resolve [RUN STEP]",
		Short: "Mark a step completed by hand; its key is recorded completed and dependents continue",
		Example: `  onceflow review resolve 42 crm_lead --output '{"id": 77}' --note "created by hand in the CRM"
  onceflow review resolve 43 welcome_email --it-happened --note "the customer received it"`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, step, bulk, err := itemArgs(cmd, args, &f)
			if err != nil {
				return err
			}
			var out any
			if output != "" {
				if !json.Valid([]byte(output)) {
					return usagef("--output is not JSON: give the step's output, such as '{\"id\": 77}'")
				}
				out = json.RawMessage(output)
			}
			return reviewAct(cmd.Context(), g, f, a, reviewActParams{bulk: bulk,
				req: onceflow.BulkRequest{Action: onceflow.BulkResolve, ItHappened: itHappened, Output: out, DryRun: dry},
				one: onceflow.ReviewAction{RunID: id, Step: step, Actor: a.actor, Note: a.note, ItHappened: itHappened, Output: out},
				act: (*onceflow.Client).ReviewResolve, verb: "resolved"})
		},
	}
	f.add(cmd, true)
	a.add(cmd, "directory of workflow files (not needed to resolve)")
	cmd.Flags().StringVar(&output, "output", "", "the step's output as JSON, read by later steps as {steps.STEP.output.…}")
	cmd.Flags().BoolVar(&itHappened, "it-happened", false, "for an item whose outcome is unknown: the effect did happen")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "with filter flags: report what would be resolved and change nothing")
	return cmd
}

func newReviewAbandonCommand(g *globals) *cobra.Command {
	var f filterFlags
	var a actionFlags
	var dry bool
	cmd := &cobra.Command{
		Use:     "abandon [RUN STEP]",
		Short:   "Give up on a step: it and its run end failed, dependents are cancelled",
		Example: `  onceflow review abandon 42 crm_lead --note "spam submission"`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, step, bulk, err := itemArgs(cmd, args, &f)
			if err != nil {
				return err
			}
			return reviewAct(cmd.Context(), g, f, a, reviewActParams{bulk: bulk,
				req: onceflow.BulkRequest{Action: onceflow.BulkAbandon, DryRun: dry},
				one: onceflow.ReviewAction{RunID: id, Step: step, Actor: a.actor, Note: a.note},
				act: (*onceflow.Client).ReviewAbandon, verb: "abandoned"})
		},
	}
	f.add(cmd, true)
	a.add(cmd, "directory of workflow files (not needed to abandon)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "with filter flags: report what would be abandoned and change nothing")
	return cmd
}

func newReviewReplayCommand(g *globals) *cobra.Command {
	var f filterFlags
	var a actionFlags
	var patch, patchFile, inputFile string
	var dry bool
	cmd := &cobra.Command{
		Use:   "replay [RUN [STEP]]",
		Short: "Correct a run's input and run again what has not completed (--dry-run to preview)",
		Long: `replay corrects the run's input — with --patch, an RFC 7386 JSON merge patch (members set,
null removes one), or --input-file, a whole new input — checks it against the workflow
(required fields, entity), keeps the old input as a revision with its diff, and makes the
steps in review, failed or cancelled pending again. Completed effects are never repeated,
even where the corrected input would change their request.

--dry-run shows, step by step, what the replay would do, computed with the same key
rendering the workers use: skip (completed), kept (completed before the correction), reuse
(key completed by another run), run, wait (key in flight elsewhere), blocked (needs a step
that will not run), review, skipped. It needs --workflows, the workflow files.`,
		Example: `  onceflow review replay 42 --patch '{"email":"ada@example.com"}' --dry-run --workflows ./workflows
  onceflow review replay 42 --patch '{"email":"ada@example.com"}' --note "typo" --workflows ./workflows
  onceflow review replay --reason destination_blocked --workflows ./workflows --note "egress rule fixed"`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var runID int64
			var step string
			bulk := false
			switch {
			case len(args) == 0 && (f.any() || f.all):
				bulk = true
			case len(args) == 0:
				return usagef("%s needs RUN [STEP], or filter flags or --all to replay many items", cmd.CommandPath())
			case len(args) > 2:
				return usagef("%s takes RUN [STEP]; got %d arguments", cmd.CommandPath(), len(args))
			case f.any() || f.all:
				return usagef("%s takes RUN [STEP] or filter flags, not both", cmd.CommandPath())
			default:
				id, err := parseRunID(args[0])
				if err != nil {
					return err
				}
				runID = id
				if len(args) == 2 {
					step = args[1]
				}
			}
			if a.workflows == "" {
				return usagef("%s needs --workflows DIR: a replay renders effect keys and checks the input with the workflow definitions", cmd.CommandPath())
			}
			mergePatch, input, err := correction(patch, patchFile, inputFile)
			if err != nil {
				return err
			}
			if bulk && input != nil {
				return usagef("--input-file replaces one run's input; for many items use --patch")
			}
			s, err := g.reviewSession(cmd.Context(), a.workflows)
			if err != nil {
				return err
			}
			defer s.Close()
			if bulk {
				return runBulk(cmd.Context(), g, s, f, a, onceflow.BulkRequest{Action: onceflow.BulkReplay, MergePatch: mergePatch, DryRun: dry})
			}
			req := onceflow.ReplayRequest{RunID: runID, Step: step, MergePatch: mergePatch, Input: input, Actor: a.actor, Note: a.note}
			if dry {
				plan, err := s.client.ReviewPreview(cmd.Context(), req)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(g.stdout, struct {
						DryRun bool     `json:"dry_run"`
						Plan   planView `json:"plan"`
					}{true, viewPlan(plan)})
				}
				outf(g.stdout, "replay of run %d (%s, run key %s)%s would:\n", plan.RunID, plan.Workflow, plan.RunKey, correctedText(plan, mergePatch))
				if err := writePlan(g.stdout, plan, "NOW"); err != nil {
					return err
				}
				outf(g.stdout, "dry run: nothing was changed\n")
				return nil
			}
			res, err := s.client.ReviewReplay(cmd.Context(), req)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(g.stdout, struct {
					DryRun   bool           `json:"dry_run"`
					Plan     planView       `json:"plan"`
					Revision int            `json:"revision,omitempty"`
					Reset    []string       `json:"reset"`
					RunState onceflow.State `json:"run_state"`
					Actor    string         `json:"actor"`
				}{false, viewPlan(res.Plan), res.Revision, res.Reset, res.RunState, a.actor})
			}
			outf(g.stdout, "replayed run %d%s (by %s): %s pending again, run %s\n", res.Plan.RunID, correctedText(res.Plan, mergePatch), a.actor,
				strings.Join(res.Reset, ", "), res.RunState)
			if res.Revision > 0 {
				outf(g.stdout, "input revision %d kept with its diff\n", res.Revision)
			}
			outf(g.stdout, "the workers will now:\n")
			return writePlan(g.stdout, res.Plan, "WAS")
		},
	}
	f.add(cmd, true)
	a.add(cmd, "directory of workflow files (required)")
	cmd.Flags().StringVar(&patch, "patch", "", "JSON merge patch (RFC 7386) that corrects the input, such as '{\"email\":\"ada@example.com\"}'")
	cmd.Flags().StringVar(&patchFile, "patch-file", "", "file holding the JSON merge patch")
	cmd.Flags().StringVar(&inputFile, "input-file", "", "file holding the whole corrected input (one run only)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "show what the replay would do, step by step, and change nothing")
	return cmd
}

// correction reads the correction flags: at most one of them.
func correction(patch, patchFile, inputFile string) (json.RawMessage, json.RawMessage, error) {
	n := 0
	for _, v := range []string{patch, patchFile, inputFile} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return nil, nil, usagef("give one of --patch, --patch-file and --input-file")
	}
	read := func(path string) (json.RawMessage, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(b), nil
	}
	switch {
	case patch != "":
		return json.RawMessage(patch), nil, nil
	case patchFile != "":
		b, err := read(patchFile)
		return b, nil, err
	case inputFile != "":
		b, err := read(inputFile)
		return nil, b, err
	}
	return nil, nil, nil
}

// correctedText says how a replay corrects the input: with the merge patch the operator
// gave (their own words, shown as typed, compacted), or with the diff of the input they
// gave, masked as the client masks the plan.
func correctedText(p *onceflow.ReplayPlan, patch json.RawMessage) string {
	if !p.Corrected {
		return ""
	}
	var b bytes.Buffer
	if len(patch) > 0 && json.Compact(&b, patch) == nil {
		return " with the corrected input " + b.String()
	}
	return " with the corrected input " + string(p.Diff)
}

// reviewActParams is a retry, resolve or abandon, on many items or on one.
type reviewActParams struct {
	// bulk selects req, on the items the filter flags select; else act performs one on its
	// item, and its result is printed as verb.
	bulk bool
	req  onceflow.BulkRequest
	one  onceflow.ReviewAction
	act  func(*onceflow.Client, context.Context, onceflow.ReviewAction) (*onceflow.ReviewResult, error)
	verb string
}

// reviewAct opens the review session and performs p.
func reviewAct(ctx context.Context, g *globals, f filterFlags, a actionFlags, p reviewActParams) error {
	s, err := g.reviewSession(ctx, a.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	if p.bulk {
		return runBulk(ctx, g, s, f, a, p.req)
	}
	if p.req.DryRun {
		return usagef("--dry-run applies to replay and to bulk actions")
	}
	res, err := p.act(s.client, ctx, p.one)
	if err != nil {
		return err
	}
	return printResult(g.stdout, p.verb, a, res)
}

// runBulk applies a bulk action to the items the filter flags select.
func runBulk(ctx context.Context, g *globals, s *reviewSession, f filterFlags, a actionFlags, req onceflow.BulkRequest) error {
	rf, err := f.filter()
	if err != nil {
		return err
	}
	req.Filter, req.Actor, req.Note = rf, a.actor, a.note
	items, err := s.client.ReviewBulk(ctx, req)
	if err != nil && len(items) == 0 {
		return err
	}
	if perr := printBulk(g.stdout, req.Action, req.DryRun, a, items); perr != nil {
		return perr
	}
	return err
}

// planView is a replay plan as the command prints it in JSON, as the API does.
type planView = apiv1.Plan

func viewPlan(p *onceflow.ReplayPlan) planView { return apiv1.NewPlan(p) }

// writePlan prints a plan; state names the column of the steps' states (NOW for a
// preview, WAS after the replay).
func writePlan(w io.Writer, p *onceflow.ReplayPlan, state string) error {
	tw := newTable(w)
	outf(tw, "STEP\t%s\tACTION\tEFFECT KEY\tWHY\n", state)
	for _, ps := range p.Steps {
		outf(tw, "%s\t%s\t%s\t%s\t%s\n", ps.Step, ps.State, ps.Action, dash(ps.EffectKey), ps.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	outln(w, planSummary(p))
	return nil
}

// planSummary counts a plan's actions: "run 2, skip 2".
func planSummary(p *onceflow.ReplayPlan) string {
	var parts []string
	for _, a := range []onceflow.ReplayAction{onceflow.ReplayRun, onceflow.ReplayReuse, onceflow.ReplayWait, onceflow.ReplaySkip, onceflow.ReplayKept,
		onceflow.ReplayBlocked, onceflow.ReplayReview, onceflow.ReplaySkipped} {
		if n := p.Count(a); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, n))
		}
	}
	return strings.Join(parts, ", ")
}
