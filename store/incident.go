package store

import (
	"context"
	"errors"
	"time"
)

// Incident groups the review events of one kind — one notification policy, workflow, step
// and reason — that happen within a window after the first one, so that a failure repeated
// fifty times is announced once, with a digest of the repeats, instead of fifty times.
type Incident struct {
	ID       int64
	Policy   string
	Workflow string
	StepName string
	Reason   Reason
	// OpenedAt is the time of the first event; events before EndsAt (OpenedAt plus the
	// policy's window) are repeats of this incident, later ones open the next.
	OpenedAt time.Time
	EndsAt   time.Time
	// Count is how many events the incident holds, the first included.
	Count int
	// First is the event that opened the incident; Repeats are the first few that
	// followed it (at most MaxIncidentRepeats), as examples for the digest.
	First   IncidentExample
	Repeats []IncidentExample
	// LastEventID and LastAt name the newest event counted.
	LastEventID int64
	LastAt      time.Time
	// AlertedAt is when the alert was handed to the engine (zero until then); ClosedAt
	// when the window had ended and the digest, if any, was handed over (zero while open).
	AlertedAt time.Time
	ClosedAt  time.Time
}

// MaxIncidentRepeats is how many repeats an incident keeps as examples.
const MaxIncidentRepeats = 5

// IncidentExample is one review event of an incident, as the notification shows it.
type IncidentExample struct {
	EventID int64     `json:"event_id"`
	RunID   int64     `json:"run_id"`
	Entity  string    `json:"entity,omitempty"`
	At      time.Time `json:"at"`
	// Error is the step's error, as the audit event recorded it (possibly shortened).
	Error string `json:"error,omitempty"`
}

// IncidentHit is one review event matched by one policy.
type IncidentHit struct {
	Policy   string
	Workflow string
	StepName string
	Reason   Reason
	// Window is the policy's window: how long a new incident collects repeats.
	Window time.Duration
	Event  IncidentExample
}

// IncidentRecordParams are the arguments of IncidentRecord.
type IncidentRecordParams struct {
	// Cursor names the reader of the audit trail (e.g. "notifier"); From is the position
	// it read from (0 for a cursor never stored) and To the position it has now read up
	// to, every event with an ID up to To included.
	Cursor string
	From   int64
	To     int64
	// Hits are the matches of the events read, in event order.
	Hits  []IncidentHit
	Actor string
	Now   time.Time
}

// IncidentListDueParams are the arguments of IncidentListDue.
type IncidentListDueParams struct {
	Now time.Time
	// Policies, when set, restricts the list to incidents of these policies: a notifier
	// leaves alone the incidents of policies it does not know.
	Policies []string
	Limit    int // default 100
}

// IncidentMarkParams are the arguments of IncidentMarkAlerted and IncidentClose.
type IncidentMarkParams struct {
	ID    int64
	Actor string
	Now   time.Time
}

// IncidentListParams filters IncidentList. Zero fields do not filter; results are newest
// first.
type IncidentListParams struct {
	Policy   string
	Workflow string
	// Open lists only incidents not closed yet.
	Open bool
	// BeforeID pages backwards: only incidents with a smaller ID.
	BeforeID int64
	Limit    int // default 100
}

// EventScanParams are the arguments of EventScan.
type EventScanParams struct {
	// AfterID is the position to read from: only events with a larger ID.
	AfterID int64
	// Types lists the event types wanted (required).
	Types []EventType
	Limit int // default 1000
}

// EventScanResult is one page of EventScan.
type EventScanResult struct {
	// Events are the events of the wanted types, in ID order.
	Events []*Event
	// Through is the position read up to: every event with an ID up to Through, of the
	// wanted types, is in Events or was before AfterID. It is at least AfterID; the next
	// page starts after it.
	Through int64
}

// Incident events.
const (
	EventIncidentOpened EventType = "incident.opened"
	EventIncidentClosed EventType = "incident.closed"
)

// ActorNotifier is the actor of what the failure notifier does.
const ActorNotifier = "notifier"

// ErrCursorMoved is returned by IncidentRecord when the cursor is not at From: another
// reader recorded these events first. Nothing was written; read again from the cursor.
var ErrCursorMoved = errors.New("cursor moved")

// IncidentStore keeps the incidents of failure notifications and the cursor of the
// process that reads the audit trail for them; every Store is one.
type IncidentStore interface {
	// EventScan lists the events of some types after a position, in ID order, and says
	// how far it read, so that a reader following the audit trail for rare event types
	// advances past the others. Like EventList, it never lists an event while one with a
	// smaller ID may still commit.
	EventScan(ctx context.Context, p EventScanParams) (*EventScanResult, error)
	// IncidentCursorGet returns the position of a cursor, and found=false (position 0)
	// for a cursor never stored.
	IncidentCursorGet(ctx context.Context, name string) (position int64, found bool, err error)
	// IncidentRecord moves the cursor from From to To by compare-and-set and, in the same
	// transaction, applies the hits in order: a hit of the same policy, workflow, step and
	// reason as an incident not closed yet, at a time before its EndsAt, counts in that
	// incident (the first MaxIncidentRepeats are kept as examples); any other hit opens a
	// new incident (event incident.opened). It returns the incidents it opened. When the
	// cursor is not at From it writes nothing and returns ErrCursorMoved, so that hits
	// are counted once however many processes read the same events.
	IncidentRecord(ctx context.Context, p IncidentRecordParams) ([]*Incident, error)
	// IncidentListDue returns the incidents that need the notifier, oldest first: those
	// not alerted yet, and those not closed whose EndsAt is at or before Now.
	IncidentListDue(ctx context.Context, p IncidentListDueParams) ([]*Incident, error)
	// IncidentMarkAlerted records that the incident's alert was handed to the engine. It
	// is idempotent: it returns false, and changes nothing, for an incident already marked.
	IncidentMarkAlerted(ctx context.Context, p IncidentMarkParams) (bool, error)
	// IncidentClose closes an incident (event incident.closed, with its count). It is
	// idempotent: it returns false, and changes nothing, for an incident already closed.
	IncidentClose(ctx context.Context, p IncidentMarkParams) (bool, error)
	// IncidentList returns incidents newest first.
	IncidentList(ctx context.Context, p IncidentListParams) ([]*Incident, error)
}
