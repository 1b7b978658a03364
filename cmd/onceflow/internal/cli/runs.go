package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/jsondoc"
)

func newRunsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs and show what happened in one",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	cmd.AddCommand(newRunsListCommand(g), newRunsShowCommand(g), newRunsCancelCommand(g))
	return cmd
}

type runsListFlags struct {
	workflow, state, entity, key string
	limit                        int
	json                         bool
	mask                         maskFlags
}

func newRunsListCommand(g *globals) *cobra.Command {
	var f runsListFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Example: `  onceflow runs list --state needs_review
  onceflow runs list --entity lead:8812 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runsList(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workflow, "workflow", "", "only runs of this workflow")
	fl.StringVar(&f.state, "state", "", "only runs in this state ("+stateList()+")")
	fl.StringVar(&f.entity, "entity", "", "only runs about this entity, such as lead:8812")
	fl.StringVar(&f.key, "key", "", "only the run with this run key")
	fl.IntVar(&f.limit, "limit", 50, "show at most this many runs")
	fl.BoolVar(&f.json, "json", false, "print a JSON array instead of a table")
	f.mask.add(cmd)
	return cmd
}

func stateList() string {
	states := onceflow.States()
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func runsList(ctx context.Context, g *globals, f runsListFlags) error {
	if f.state != "" && !onceflow.State(f.state).Valid() {
		return usagef("--state %q is not a state; use one of %s", f.state, stateList())
	}
	if f.limit <= 0 {
		return usagef("--limit must be at least 1, got %d", f.limit)
	}
	s, err := g.reviewSession(ctx, f.mask.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	runs, err := f.mask.reader(s.client).RunList(ctx, onceflow.RunFilter{
		Workflow: f.workflow, State: onceflow.State(f.state), Entity: f.entity, RunKey: f.key, Limit: f.limit,
	})
	if err != nil {
		return err
	}
	if f.json {
		return writeJSONList(g.stdout, runs, viewRun)
	}
	if len(runs) == 0 {
		outf(g.stdout, "no runs match\n")
		return nil
	}
	tw := newTable(g.stdout)
	outf(tw, "ID\tWORKFLOW\tRUN KEY\tENTITY\tSTATE\tCREATED\n")
	for _, r := range runs {
		outf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.RunKey, dash(r.Entity), r.State, timeText(r.CreatedAt))
	}
	return tw.Flush()
}

func newRunsShowCommand(g *globals) *cobra.Command {
	var asJSON bool
	var mf maskFlags
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a run with its steps, attempts and audit trail",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("run ID %q is not a positive number; use the ID column of 'onceflow runs list'", args[0])
			}
			return runsShow(cmd.Context(), g, id, asJSON, mf)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of tables")
	mf.add(cmd)
	return cmd
}

// runDetail is everything runs show prints.
type runDetail struct {
	Run      runView       `json:"run"`
	Steps    []stepView    `json:"steps"`
	Attempts []attemptView `json:"attempts"`
	Events   []eventView   `json:"events"`
	// WaitingUntil is when a run that only waits for a delayed step goes on.
	WaitingUntil *time.Time `json:"waiting_until,omitempty"`
}

func runsShow(ctx context.Context, g *globals, id int64, asJSON bool, mf maskFlags) error {
	s, err := g.reviewSession(ctx, mf.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	read := mf.reader(s.client)
	run, err := read.RunGet(ctx, id)
	if errors.Is(err, onceflow.ErrNotFound) {
		return fmt.Errorf("run %d not found", id)
	}
	if err != nil {
		return err
	}
	var events []*onceflow.AuditEntry
	const page = 1000
	for after := int64(0); ; {
		batch, err := read.Audit(ctx, onceflow.AuditQuery{RunID: id, AfterID: after, Limit: page})
		if err != nil {
			return err
		}
		events = append(events, batch...)
		if len(batch) < page {
			break
		}
		after = batch[len(batch)-1].ID
	}

	d := runDetail{Run: viewRun(run.Run), Steps: []stepView{}, Attempts: []attemptView{}, Events: []eventView{}}
	for _, st := range run.Steps {
		d.Steps = append(d.Steps, viewStep(st))
	}
	for _, a := range run.Attempts {
		d.Attempts = append(d.Attempts, viewAttempt(a))
	}
	for _, e := range events {
		d.Events = append(d.Events, viewEvent(e))
	}
	if due := run.WaitingUntil; !due.IsZero() {
		d.WaitingUntil = &due
	}
	if asJSON {
		return writeJSON(g.stdout, d)
	}
	return writeRunDetail(g.stdout, run, events)
}

func writeRunDetail(w io.Writer, d *onceflow.RunDetail, events []*onceflow.AuditEntry) error {
	run, steps, attempts := d.Run, d.Steps, d.Attempts
	outf(w, "run %d  %s  (run key %s)\n", run.ID, run.Workflow, run.RunKey)
	tw := newTable(w)
	outf(tw, "  state\t%s\n", run.State)
	if due := d.WaitingUntil; !due.IsZero() {
		outf(tw, "  waiting\tuntil %s, when a delayed step is due\n", timeText(due))
	}
	outf(tw, "  entity\t%s\n", dash(run.Entity))
	outf(tw, "  created\t%s\n", timeText(run.CreatedAt))
	outf(tw, "  updated\t%s\n", timeText(run.UpdatedAt))
	outf(tw, "  input\t%s\n", clip(string(run.Input), 120))
	if err := tw.Flush(); err != nil {
		return err
	}

	outf(w, "\nSTEPS (%d)\n", len(steps))
	tw = newTable(w)
	outf(tw, "NAME\tSTATE\tATTEMPT\tEFFECT KEY\tREASON\tLAST ERROR\n")
	for _, st := range steps {
		reason := string(st.Reason)
		if due := dueAt(st); due != nil {
			reason += " until " + timeText(*due)
		}
		outf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", st.Name, st.State, st.Attempt, dash(st.EffectKey), dash(reason), dash(clip(st.LastError, 80)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	outf(w, "\nATTEMPTS (%d)\n", len(attempts))
	if len(attempts) > 0 {
		tw = newTable(w)
		outf(tw, "STEP\t#\tWORKER\tOUTCOME\tSTATUS\tSTARTED\tENDED\tERROR\n")
		for _, a := range attempts {
			status := "-"
			if a.ResponseStatus != 0 {
				status = strconv.Itoa(a.ResponseStatus)
			}
			outcome := string(a.Outcome)
			if a.InFlight() {
				outcome = "in flight"
			}
			outf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Step, a.Number, a.Worker, outcome, status,
				timeText(a.StartedAt), timeText(a.EndedAt), dash(clip(a.Error, 80)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	outf(w, "\nEVENTS (%d)\n", len(events))
	tw = newTable(w)
	outf(tw, "TIME\tTYPE\tSTEP\tREASON\tACTOR\tDETAIL\n")
	for _, e := range events {
		detail := string(e.Detail)
		if detail == "{}" {
			detail = ""
		}
		outf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", timeText(e.At), e.Type, dash(e.StepName), dash(string(e.Reason)), dash(e.Actor), dash(clip(detail, 100)))
	}
	return tw.Flush()
}

// JSON views: the stable, snake_case shape the CLI prints.

type runView struct {
	ID        int64           `json:"id"`
	Workflow  string          `json:"workflow"`
	RunKey    string          `json:"run_key"`
	Entity    string          `json:"entity"`
	State     onceflow.State  `json:"state"`
	Input     json.RawMessage `json:"input"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

func viewRun(r *onceflow.Run) runView {
	return runView{ID: r.ID, Workflow: r.Workflow, RunKey: r.RunKey, Entity: r.Entity, State: r.State,
		Input: rawOrNull(r.Input), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

type stepView struct {
	ID          int64            `json:"id"`
	Name        string           `json:"name"`
	Needs       []string         `json:"needs"`
	State       onceflow.State   `json:"state"`
	Attempt     int              `json:"attempt"`
	EffectKey   string           `json:"effect_key"`
	Reason      string           `json:"reason"`
	LastOutcome onceflow.Outcome `json:"last_outcome"`
	LastError   string           `json:"last_error"`
	Output      json.RawMessage  `json:"output"`
	// DueAt is when a step waiting for its delay, not_before time or retry becomes due.
	DueAt     *time.Time `json:"due_at,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// dueAt is when a step that waits for a time becomes due; nil for any other.
func dueAt(st *onceflow.StepInfo) *time.Time {
	if due := st.Due(); !due.IsZero() {
		return &due
	}
	return nil
}

func viewStep(st *onceflow.StepInfo) stepView {
	needs := st.Needs
	if needs == nil {
		needs = []string{}
	}
	return stepView{ID: st.ID, Name: st.Name, Needs: needs, State: st.State, Attempt: st.Attempt, EffectKey: st.EffectKey,
		Reason: string(st.Reason), LastOutcome: st.LastOutcome, LastError: st.LastError, Output: rawOrNull(st.Output), DueAt: dueAt(st), UpdatedAt: st.UpdatedAt}
}

type attemptView struct {
	Step            string           `json:"step"`
	Number          int              `json:"number"`
	EffectKey       string           `json:"effect_key"`
	Worker          string           `json:"worker"`
	Outcome         onceflow.Outcome `json:"outcome"`
	Error           string           `json:"error"`
	ResponseStatus  int              `json:"response_status"`
	ResponseExcerpt string           `json:"response_excerpt"`
	StartedAt       time.Time        `json:"started_at"`
	EndedAt         *time.Time       `json:"ended_at"`
}

func viewAttempt(a *onceflow.AttemptInfo) attemptView {
	v := attemptView{Step: a.Step, Number: a.Number, EffectKey: a.EffectKey, Worker: a.Worker, Outcome: a.Outcome,
		Error: a.Error, ResponseStatus: a.ResponseStatus, ResponseExcerpt: a.ResponseExcerpt, StartedAt: a.StartedAt}
	if !a.InFlight() {
		ended := a.EndedAt
		v.EndedAt = &ended
	}
	return v
}

type eventView struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Type      string          `json:"type"`
	Step      string          `json:"step,omitempty"`
	EffectKey string          `json:"effect_key,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Actor     string          `json:"actor"`
	Detail    json.RawMessage `json:"detail"`
}

func viewEvent(e *onceflow.AuditEntry) eventView {
	return eventView{ID: e.ID, At: e.At, Type: string(e.Type), Step: e.StepName, EffectKey: e.EffectKey, Attempt: e.Attempt,
		Reason: string(e.Reason), Actor: e.Actor, Detail: rawOrNull(e.Detail)}
}

// Output helpers shared by the commands.

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONList writes the view of each item, as a JSON array ([] for none).
func writeJSONList[T, V any](w io.Writer, items []T, view func(T) V) error {
	out := make([]V, 0, len(items))
	for _, it := range items {
		out = append(out, view(it))
	}
	return writeJSON(w, out)
}

// rawOrNull is a stored document as --json prints it: null when there is none, and one
// string holding it when it nests too deeply to indent (jsondoc.Shallow).
func rawOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage("null")
	}
	return jsondoc.Shallow(b)
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens s to at most n runes for a table cell, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
