package onceflow

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/store"
)

// ConsoleSession is a sign-in to the web console, kept in the store so that every process
// sharing the database sees it start and end. Its ID is the SHA-256 of the secret the
// person's cookie holds; the secret itself is never stored.
type ConsoleSession = store.Session

// Reasons a console session ends (ConsoleSession.EndReason).
const (
	SessionSignedOut = store.SessionSignedOut
	SessionIdle      = store.SessionIdle
	SessionExpired   = store.SessionExpired
	SessionEndedBy   = store.SessionEndedBy
	// EventConsoleSessionEnded is the audit event of an operator ending someone's session.
	EventConsoleSessionEnded = store.EventConsoleSessionEnded
)

// Origin names where an operator's request came from: the console session's short name
// and the client's address. Every audit event an action appends under a context carrying
// one (WithOrigin) names both in its detail, as "session" and "client".
type Origin = store.Origin

// WithOrigin returns ctx carrying o, for the actions taken on behalf of one request.
func WithOrigin(ctx context.Context, o Origin) context.Context { return store.WithOrigin(ctx, o) }

// ShortSession is the short name of the session whose ID is id, as the audit trail names
// it.
func ShortSession(id string) string { return store.ShortSession(id) }

// SessionID is the stored ID of the session whose cookie holds secret.
func SessionID(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SessionStartParams are the arguments of SessionStart.
type SessionStartParams struct {
	// Actor is who signs in, as the audit trail names them (token:NAME, user:EMAIL);
	// required.
	Actor string
	// Grants is what the session may do, as the caller encodes it (stored as it is).
	Grants json.RawMessage
	// Client is the address the sign-in came from.
	Client string
	// TTL is how long the session lasts at most (required).
	TTL time.Duration
	// Detail is added to the sign-in's audit event (the scope, the provider).
	Detail map[string]any
	// At is when the session starts (default: the client's clock, Client.Now).
	At time.Time
}

// sessionKept is how long a session's row is kept after it expired: the sessions page
// lists those that ended in the last day.
const sessionKept = 7 * 24 * time.Hour

// SessionStart stores a new console session and, in the same transaction, its sign-in
// event (EventConsoleSignedIn, naming the session, the client and the expiry). It returns
// the secret for the cookie — shown nowhere else, stored only as its hash — and the
// session. Sessions that expired more than a week ago are deleted with it.
func (c *Client) SessionStart(ctx context.Context, p SessionStartParams) (secret string, s *ConsoleSession, err error) {
	if p.Actor == "" || p.TTL <= 0 {
		return "", nil, errors.New("onceflow: session start: the actor and a positive TTL are required")
	}
	now := p.At
	if now.IsZero() {
		now = c.now(ctx)
	}
	now = now.UTC().Truncate(time.Microsecond)
	for range 3 {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		secret = base64.RawURLEncoding.EncodeToString(b)
		s = &ConsoleSession{ID: SessionID(secret), Actor: p.Actor, Grants: p.Grants, Client: p.Client,
			CreatedAt: now, SeenAt: now, ExpiresAt: now.Add(p.TTL)}
		d := store.MergeDetail(p.Detail, map[string]any{"session": s.Short(), "expires": s.ExpiresAt})
		if p.Client != "" {
			d["client"] = p.Client
		}
		ev := &store.Event{At: now, Type: EventConsoleSignedIn, Actor: p.Actor, Detail: store.EncodeDetail(d)}
		if m := c.redact.Secrets(); !m.Empty() {
			ev.Detail = m.JSON(ev.Detail)
		}
		err = c.store.SessionInsert(ctx, store.SessionInsertParams{Session: *s, Event: ev, PurgeBefore: now.Add(-sessionKept)})
		if !errors.Is(err, store.ErrSessionExists) {
			break
		}
	}
	if err != nil {
		return "", nil, fmt.Errorf("onceflow: session start: %w", err)
	}
	return secret, s, nil
}

// SessionBySecret returns the session whose cookie holds secret, active or not (see
// ConsoleSession.Active), or an error wrapping ErrNotFound.
func (c *Client) SessionBySecret(ctx context.Context, secret string) (*ConsoleSession, error) {
	if secret == "" {
		return nil, fmt.Errorf("onceflow: session: %w", ErrNotFound)
	}
	s, err := c.store.SessionGet(ctx, SessionID(secret))
	if err != nil {
		return nil, fmt.Errorf("onceflow: session: %w", err)
	}
	return s, nil
}

// SessionSeen records that session id made a request at at (its idle time starts again);
// an ended session is left as it is.
func (c *Client) SessionSeen(ctx context.Context, id string, at time.Time) error {
	if err := c.store.SessionTouch(ctx, id, at.UTC()); err != nil {
		return fmt.Errorf("onceflow: session seen: %w", err)
	}
	return nil
}

// SessionEndRequest are the arguments of SessionEnd.
type SessionEndRequest struct {
	// ID is the session's (ConsoleSession.ID).
	ID string
	// By is who ends it: the session's own actor signing out, an operator, or "console"
	// for an expiry.
	By string
	// Reason is SessionSignedOut, SessionIdle, SessionExpired or SessionEndedBy.
	Reason string
}

// SessionEnd ends a session in every process at once. A sign-out appends
// EventConsoleSignedOut, an operator's end EventConsoleSessionEnded (naming whose session
// it was), both in the same transaction; an expiry appends nothing. ended is false, and
// nothing is written, when the session had already ended; an unknown ID is ErrNotFound.
func (c *Client) SessionEnd(ctx context.Context, r SessionEndRequest) (ended bool, err error) {
	switch r.Reason {
	case SessionSignedOut, SessionIdle, SessionExpired, SessionEndedBy:
	default:
		return false, fmt.Errorf("onceflow: session end: %q is not a reason to end a session", r.Reason)
	}
	s, err := c.store.SessionGet(ctx, r.ID)
	if err != nil {
		return false, fmt.Errorf("onceflow: session end: %w", err)
	}
	now := c.now(ctx).UTC()
	p := store.SessionEndParams{ID: r.ID, By: r.By, Reason: r.Reason, Now: now}
	switch r.Reason {
	case SessionSignedOut:
		p.Event = &store.Event{At: now, Type: EventConsoleSignedOut, Actor: s.Actor, Detail: store.EncodeDetail(map[string]any{"session": s.Short()})}
	case SessionEndedBy:
		p.Event = store.SessionEndedEvent(s, r.By, now)
	}
	ended, err = c.store.SessionEnd(ctx, p)
	if err != nil {
		return false, fmt.Errorf("onceflow: session end: %w", err)
	}
	return ended, nil
}

// Sessions lists the active console sessions, newest sign-in first, and with ended set
// those that ended in the last day as well.
func (c *Client) Sessions(ctx context.Context, ended bool) ([]*ConsoleSession, error) {
	now := c.now(ctx)
	list, err := c.store.SessionList(ctx, store.SessionListParams{Now: now, Ended: ended, EndedSince: now.Add(-24 * time.Hour)})
	if err != nil {
		return nil, fmt.Errorf("onceflow: sessions: %w", err)
	}
	return list, nil
}
