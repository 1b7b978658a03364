package store

import "context"

// EventDataUnmasked is the audit event of an operator reading a run's or a key's data
// without redaction (onceflow runs show --unmasked, keys show --unmasked). Its RunID is
// the run read, or 0; its detail names what was read.
const EventDataUnmasked EventType = "data.unmasked"

// ReasonUnmasked is the reason of a data.unmasked event.
const ReasonUnmasked Reason = "unmasked"

// EventConsoleSignedIn and EventConsoleSignedOut record a person signing in to and out of
// the web console. Their RunID is 0 and their actor is token:NAME, the name of the token
// signed in with (never its secret); a sign-in's detail holds the scope and the session's
// expiry.
const (
	EventConsoleSignedIn  EventType = "console.signed_in"
	EventConsoleSignedOut EventType = "console.signed_out"
)

// EventAppender is implemented by stores that append an audit event on its own, for
// decisions that change nothing else (an operator reading unmasked data, a sign-in to the
// web console). Both backends of this module implement it.
type EventAppender interface {
	// EventAppend appends e in a transaction of its own.
	EventAppend(ctx context.Context, e *Event) error
}
