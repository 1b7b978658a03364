package store

import (
	"context"
	"time"
)

// WorkflowRedaction is the personal-data fields one workflow declares (its Redact paths),
// as the engine that served it last recorded them, so that a reader without the
// workflow's definition — the onceflow command given no workflow files — masks its runs as
// the engine does.
type WorkflowRedaction struct {
	Workflow string
	// Fields are the workflow's paths, as declared; none is a declaration too (the
	// workflow masks only the fields every workflow masks).
	Fields []string
	// UpdatedAt is when the fields were last changed.
	UpdatedAt time.Time
}

// RedactionStore is the part of the contract that keeps the workflows' declared
// personal-data fields.
type RedactionStore interface {
	// WorkflowRedactionPut records each workflow's fields at now, replacing what was
	// recorded for it; a workflow whose recorded fields are the same is left as it is.
	// Workflows it does not name keep theirs (their runs stay masked once their
	// definition is gone).
	WorkflowRedactionPut(ctx context.Context, list []WorkflowRedaction, now time.Time) error
	// WorkflowRedactionList returns every recorded workflow's fields, by workflow name.
	WorkflowRedactionList(ctx context.Context) ([]WorkflowRedaction, error)
}
