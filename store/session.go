package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Console sessions: a person signed in to the web console. The cookie holds a random
// secret; the store holds only its SHA-256 (Session.ID), so that reading the table signs
// nobody in. Every process sharing the database sees a session end at once.
const (
	// EventConsoleSessionEnded records an operator ending another person's session (the
	// actor is the operator; the detail names the session and whose it was).
	EventConsoleSessionEnded EventType = "console.session_ended"

	// Reasons a session ends (Session.EndReason).
	SessionSignedOut = "signed_out"
	SessionIdle      = "idle"
	SessionExpired   = "expired"
	SessionEndedBy   = "ended_by_operator"
)

// ShortSessionLen is the length of a session's short name (Session.Short): the first
// characters of its ID, shown in the audit trail and on the sessions page.
const ShortSessionLen = 10

// Session is a console sign-in.
type Session struct {
	// ID is the hex SHA-256 of the secret in the session's cookie (64 characters).
	ID string
	// Actor is who signed in, as the audit trail names them: token:NAME or user:EMAIL.
	Actor string
	// Grants is what the session may do, as the console wrote it (opaque to the store).
	Grants json.RawMessage
	// Client is the address the sign-in came from.
	Client string
	// CreatedAt is the sign-in; SeenAt the last request seen (SessionTouch); ExpiresAt
	// the absolute end.
	CreatedAt time.Time
	SeenAt    time.Time
	ExpiresAt time.Time
	// EndedAt is zero while the session is active; EndedBy and EndReason say who ended it
	// and why (SessionSignedOut, SessionIdle, SessionExpired, SessionEndedBy).
	EndedAt   time.Time
	EndedBy   string
	EndReason string
}

// Short is the session's short name: the first ShortSessionLen characters of its ID.
func (s *Session) Short() string { return ShortSession(s.ID) }

// ShortSession is the short name of the session whose ID is id.
func ShortSession(id string) string {
	if len(id) > ShortSessionLen {
		return id[:ShortSessionLen]
	}
	return id
}

// Active reports whether the session has not been ended and has not reached its
// absolute expiry at now.
func (s *Session) Active(now time.Time) bool {
	return s.EndedAt.IsZero() && now.Before(s.ExpiresAt)
}

// SessionInsertParams are the arguments of SessionInsert.
type SessionInsertParams struct {
	Session Session
	// Event, when set, is appended in the same transaction (the sign-in's audit event).
	Event *Event
	// PurgeBefore, when set, deletes in the same transaction the sessions whose absolute
	// expiry is before it: ended or expired, they only fill the table.
	PurgeBefore time.Time
}

// Validate reports what is missing from p.
func (p *SessionInsertParams) Validate() error {
	s := &p.Session
	switch {
	case len(s.ID) != 64:
		return errors.New("session insert: the ID must be a hex SHA-256 (64 characters)")
	case s.Actor == "":
		return errors.New("session insert: the actor is required")
	case s.CreatedAt.IsZero() || !s.ExpiresAt.After(s.CreatedAt):
		return errors.New("session insert: the session must expire after it is created")
	}
	return nil
}

// SessionEndParams are the arguments of SessionEnd.
type SessionEndParams struct {
	ID string
	// By is who ends it (the session's own actor for a sign-out, an operator, or "console"
	// for an expiry); Reason one of the Session* reasons.
	By     string
	Reason string
	Now    time.Time
	// Event, when set, is appended in the same transaction, only if the session was
	// active.
	Event *Event
}

// Validate reports what is missing from p.
func (p *SessionEndParams) Validate() error {
	if p.ID == "" || p.By == "" || p.Reason == "" {
		return errors.New("session end: the ID, who ends it and the reason are required")
	}
	return nil
}

// SessionListParams are the arguments of SessionList.
type SessionListParams struct {
	// Now decides which sessions are active: not ended and not past their expiry.
	Now time.Time
	// Ended lists the sessions that ended (or expired) at or after EndedSince as well.
	Ended      bool
	EndedSince time.Time
	Limit      int // default 500
}

// SessionStore keeps console sessions.
type SessionStore interface {
	// SessionInsert stores a new session (and p.Event with it), and deletes the sessions
	// that expired before p.PurgeBefore. An ID already stored is an error wrapping
	// ErrSessionExists and writes nothing.
	SessionInsert(ctx context.Context, p SessionInsertParams) error
	// SessionGet returns the session with the given ID, active or not, or ErrNotFound. It
	// reads committed data only and never waits for a writer.
	SessionGet(ctx context.Context, id string) (*Session, error)
	// SessionTouch sets the session's SeenAt to at when it is active and at is later than
	// its SeenAt; otherwise it changes nothing. It appends no event.
	SessionTouch(ctx context.Context, id string, at time.Time) error
	// SessionEnd ends an active session: EndedAt = Now, EndedBy, EndReason, and appends
	// p.Event. It reports whether it changed anything: a session already ended is left as
	// it was (false, nil); an unknown ID is ErrNotFound.
	SessionEnd(ctx context.Context, p SessionEndParams) (ended bool, err error)
	// SessionList returns the active sessions at p.Now (and, with p.Ended, those that
	// ended since p.EndedSince), newest sign-in first.
	SessionList(ctx context.Context, p SessionListParams) ([]*Session, error)
}

// ErrSessionExists: SessionInsert found the ID already stored.
var ErrSessionExists = errors.New("session already exists")

// SessionEndedEvent is the audit event of operator by ending session s.
func SessionEndedEvent(s *Session, by string, now time.Time) *Event {
	return &Event{At: now, Type: EventConsoleSessionEnded, Actor: by, Reason: SessionEndedBy,
		Detail: EncodeDetail(map[string]any{"ended_session": s.Short(), "ended_actor": s.Actor, "ended_client": s.Client})}
}

// SessionListLimit is p.Limit with its default.
func (p *SessionListParams) SessionListLimit() int {
	if p.Limit <= 0 {
		return 500
	}
	return p.Limit
}
