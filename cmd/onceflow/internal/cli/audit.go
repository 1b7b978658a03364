package cli

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

type auditFlags struct {
	entity, key, since, until string
	run                       int64
	after                     int64
	limit                     int
	json                      bool
	mask                      maskFlags
}

func newAuditCommand(g *globals) *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Answer who did what, when and why: the audit trail of an entity, a run or a key",
		Long: `audit prints the audit events of an entity (--entity order:1001), a run (--run ID) or an
effect key (--key lead-create:8812), optionally within a time range (--since, --until, RFC
3339), oldest first. Each event is explained: why a step was retried or not acted on, with
the retry policy that decided, who acted on a review item and with which note. Secrets and
personal data are masked as the API masks them (--unmasked prints them, and the audit
trail records who read them).

At most --limit events are printed; when more match, audit says so on standard error,
with the --after that continues where it stopped.`,
		Example: `  onceflow audit --entity order:1001
  onceflow audit --key lead-create:8812 --json
  onceflow audit --since 2026-03-01T00:00:00Z --until 2026-03-02T00:00:00Z`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return audit(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.entity, "entity", "", "events about this entity, such as order:1001")
	fl.Int64Var(&f.run, "run", 0, "events of this run")
	fl.StringVar(&f.key, "key", "", "events about this effect key")
	fl.StringVar(&f.since, "since", "", "events at or after this time (RFC 3339)")
	fl.StringVar(&f.until, "until", "", "events before this time (RFC 3339)")
	fl.IntVar(&f.limit, "limit", 1000, "print at most this many events (audit says on standard error when more match)")
	fl.Int64Var(&f.after, "after", 0, "only events after this event ID (to continue where --limit stopped)")
	fl.BoolVar(&f.json, "json", false, "print a JSON array instead of a table")
	f.mask.add(cmd)
	return cmd
}

func parseTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, usagef("--%s %q is not an RFC 3339 time such as 2026-03-01T09:00:00Z", flag, v)
	}
	return t, nil
}

func audit(ctx context.Context, g *globals, f auditFlags) error {
	q := onceflow.AuditQuery{RunID: f.run, Entity: f.entity, EffectKey: f.key}
	var err error
	if q.Since, err = parseTime("since", f.since); err != nil {
		return err
	}
	if q.Until, err = parseTime("until", f.until); err != nil {
		return err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return usagef("--until must be after --since")
	}
	if f.run < 0 || f.limit <= 0 || f.after < 0 {
		return usagef("--run must be a positive run ID, --after a positive event ID and --limit at least 1")
	}
	q.AfterID = f.after
	s, err := g.reviewSession(ctx, f.mask.workflows)
	if err != nil {
		return err
	}
	defer s.Close()
	read := f.mask.reader(s.client)
	var entries []*onceflow.AuditEntry
	for len(entries) < f.limit {
		q.Limit = min(1000, f.limit-len(entries))
		page, err := read.Audit(ctx, q)
		if err != nil {
			return err
		}
		entries = append(entries, page...)
		if len(page) < q.Limit {
			break
		}
		q.AfterID = page[len(page)-1].ID
	}
	if len(entries) == f.limit {
		// At the limit: say whether it cut the answer short, by asking for one more.
		q.Limit, q.AfterID = 1, entries[len(entries)-1].ID
		more, err := read.Audit(ctx, q)
		if err != nil {
			return err
		}
		if len(more) > 0 {
			outf(g.stderr, "audit: stopped at its row limit, --limit %d; more events match: raise --limit, or continue with --after %d\n", f.limit, q.AfterID)
		}
	}
	if f.json {
		return writeJSONList(g.stdout, entries, viewAudit)
	}
	if len(entries) == 0 {
		outf(g.stdout, "no events match\n")
		return nil
	}
	return writeAudit(g.stdout, entries, true)
}

// auditView is an audit event as the command prints it in JSON, as the API does.
type auditView = apiv1.AuditEntry

func viewAudit(e *onceflow.AuditEntry) auditView { return apiv1.NewAuditEntry(e) }

// writeAudit prints events as a table whose last column, the explanation, is never cut.
func writeAudit(w io.Writer, entries []*onceflow.AuditEntry, withRun bool) error {
	tw := newTable(w)
	if withRun {
		outf(tw, "TIME\tRUN\tSTEP\tTYPE\tACTOR\tWHY\n")
	} else {
		outf(tw, "TIME\tTYPE\tACTOR\tWHY\n")
	}
	for _, e := range entries {
		if withRun {
			run := "-"
			if e.RunID != 0 {
				run = strconv.FormatInt(e.RunID, 10)
			}
			outf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", timeText(e.At), run, dash(e.StepName), e.Type, dash(e.Actor), e.Why)
		} else {
			outf(tw, "%s\t%s\t%s\t%s\n", timeText(e.At), e.Type, dash(e.Actor), e.Why)
		}
	}
	return tw.Flush()
}
