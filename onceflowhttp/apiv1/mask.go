package apiv1

import (
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// RunMasker returns the masker for what is shown about run, whose steps are steps: p's
// secrets, and the values the run's input and its steps' outputs hold at the personal-data
// fields of p (ONCEFLOW_REDACT_FIELDS, the workflow's redact:). The API, the console and
// the command mask a run's pages with it.
func RunMasker(p *redact.Policy, run *store.Run, steps []*store.Step) *redact.Masker {
	docs := [][]byte{run.Input}
	for _, st := range steps {
		if len(st.Output) > 0 {
			docs = append(docs, st.Output)
		}
	}
	return p.ForRun(run.Workflow, docs...)
}
