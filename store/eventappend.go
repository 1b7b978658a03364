package store

import "context"

// EventDataUnmasked is the audit event of an operator reading a run's or a key's data
// without redaction (onceflow runs show --unmasked, keys show --unmasked). Its RunID is
// the run read, or 0; its detail names what was read.
const EventDataUnmasked = "data.unmasked"

// EventAppender is implemented by stores that append an audit event on its own, for
// decisions that change nothing else (an operator reading unmasked data). Both backends
// of this module implement it.
type EventAppender interface {
	// EventAppend appends e in a transaction of its own.
	EventAppend(ctx context.Context, e *Event) error
}
