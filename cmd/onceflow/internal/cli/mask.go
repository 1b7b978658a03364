package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// maskFlags are the redaction flags of the commands that print stored run data: they mask
// it as the API does, unless an operator asks for it unmasked (which the audit records).
type maskFlags struct {
	unmasked  bool
	actor     string
	workflows string
}

func (f *maskFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.unmasked, "unmasked", false, "print secrets and personal data unmasked (recorded in the audit trail with --actor)")
	fl.StringVar(&f.actor, "actor", reviewActor(), "who reads the data, for the audit trail of --unmasked")
	fl.StringVar(&f.workflows, "workflows", "", "workflow files (a file or directory) whose redact: fields and secrets are masked too")
}

// policy returns the redaction policy of the command: the secret-looking field names the
// API always masks, the fields of ONCEFLOW_REDACT_FIELDS, and — with --workflows — each
// file's redact: fields and the values of its secret environment variables.
func (f *maskFlags) policy() (*redact.Policy, error) {
	var fields []string
	for _, s := range strings.Split(os.Getenv(envRedactFields), ",") {
		if s = strings.TrimSpace(s); s != "" {
			fields = append(fields, s)
		}
	}
	var defs []*flowfile.Definition
	var secrets []string
	if f.workflows != "" {
		var err error
		if defs, err = loadWorkflows(f.workflows); err != nil {
			return nil, err
		}
		for _, d := range defs {
			secrets = append(secrets, d.MaskedValues(os.LookupEnv)...)
		}
	}
	p, err := redact.New(secrets, fields)
	if err != nil {
		return nil, usagef("%s: %v", envRedactFields, err)
	}
	for _, d := range defs {
		if err := p.SetWorkflow(d.Name, d.Redact); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// maskRun masks, in place, what runs show prints of a run.
func maskRun(m *redact.Masker, run *store.Run, steps []*store.Step, attempts []*store.Attempt, events []*store.Event) {
	if len(run.Input) > 0 {
		run.Input = m.JSON(run.Input)
	}
	for _, st := range steps {
		if len(st.Output) > 0 {
			st.Output = m.JSON(st.Output)
		}
		st.LastError = m.Text(st.LastError)
	}
	maskAttempts(m, attempts)
	for _, e := range events {
		maskEvent(m, e)
	}
}

// maskAttempts masks, in place, the errors and response excerpts of attempts.
func maskAttempts(m *redact.Masker, attempts []*store.Attempt) {
	for _, a := range attempts {
		a.Error = m.Text(a.Error)
		a.ResponseExcerpt = m.Excerpt([]byte(a.ResponseExcerpt), 0)
	}
}

// maskEvent masks, in place, an event's detail.
func maskEvent(m *redact.Masker, e *store.Event) {
	if len(e.Detail) > 0 {
		e.Detail = m.JSON(e.Detail)
	}
}

// recordUnmasked appends the audit event of an operator reading data unmasked.
func recordUnmasked(ctx context.Context, st store.Store, actor string, runID int64, workflow, what string) error {
	ap, ok := st.(store.EventAppender)
	if !ok {
		return fmt.Errorf("--unmasked: this store cannot record the read in the audit trail")
	}
	d, _ := json.Marshal(map[string]any{"read": what})
	return ap.EventAppend(ctx, &store.Event{At: time.Now().UTC(), Type: store.EventDataUnmasked, RunID: runID, Workflow: workflow,
		Actor: actor, Reason: "unmasked", Detail: d})
}

// loadWorkflows reads the workflow files of path, a file or a directory.
func loadWorkflows(path string) ([]*flowfile.Definition, error) { return fileReader().Load(path) }
