package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/onceflow/onceflow/store"
)

var sessionTests = []subtest{
	{"Lifecycle", testSessionLifecycle},
	{"List", testSessionList},
	{"Refusals", testSessionRefusals},
	{"Purge", testSessionPurge},
	{"OriginStamped", testOriginStamped},
}

// sessionID is the stored ID of the session whose cookie secret is secret.
func sessionID(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func (h *harness) newSession(secret, actor string, created time.Time, ttl time.Duration) *store.Session {
	h.t.Helper()
	s := store.Session{ID: sessionID(secret), Actor: actor, Grants: json.RawMessage(`{"admin":true}`), Client: "192.0.2.7",
		CreatedAt: created, ExpiresAt: created.Add(ttl)}
	if err := h.s.SessionInsert(h.ctx, store.SessionInsertParams{Session: s}); err != nil {
		h.t.Fatalf("SessionInsert: %v", err)
	}
	return &s
}

func (h *harness) session(id string) *store.Session {
	h.t.Helper()
	s, err := h.s.SessionGet(h.ctx, id)
	if err != nil {
		h.t.Fatalf("SessionGet: %v", err)
	}
	return s
}

// A session is stored with its sign-in event, read back as it was written, seen later by a
// touch (never earlier), and ended once: a second end, and a touch after the end, change
// nothing; the end's event is appended with the end, only once.
func testSessionLifecycle(h *harness) {
	id := sessionID("s1")
	signedIn := &store.Event{At: at(0), Type: store.EventConsoleSignedIn, Actor: "user:alice@example.com", Detail: store.EncodeDetail(map[string]any{"scope": "admin"})}
	err := h.s.SessionInsert(h.ctx, store.SessionInsertParams{Event: signedIn, Session: store.Session{ID: id, Actor: "user:alice@example.com",
		Grants: json.RawMessage(`{"admin":["orders"]}`), Client: "192.0.2.7", CreatedAt: at(0), ExpiresAt: at(8 * time.Hour)}})
	if err != nil {
		h.t.Fatalf("SessionInsert: %v", err)
	}
	got := h.session(id)
	var grants map[string][]string
	if err := json.Unmarshal(got.Grants, &grants); err != nil || len(grants["admin"]) != 1 || grants["admin"][0] != "orders" {
		h.t.Errorf("Grants = %s (%v), want the JSON written", got.Grants, err)
	}
	if got.Actor != "user:alice@example.com" || got.Client != "192.0.2.7" || !got.CreatedAt.Equal(at(0)) || !got.SeenAt.Equal(at(0)) ||
		!got.ExpiresAt.Equal(at(8*time.Hour)) || !got.EndedAt.IsZero() || !got.Active(at(time.Hour)) || got.Active(at(8*time.Hour)) {
		h.t.Errorf("session read back = %+v", got)
	}
	if got.Short() != id[:store.ShortSessionLen] {
		h.t.Errorf("Short() = %q", got.Short())
	}
	if n := len(h.events(store.EventListParams{})); n != 1 {
		h.t.Errorf("%d events after the sign-in, want its one event", n)
	}

	if err := h.s.SessionTouch(h.ctx, id, at(time.Minute)); err != nil {
		h.t.Fatal(err)
	}
	if err := h.s.SessionTouch(h.ctx, id, at(time.Second)); err != nil {
		h.t.Fatal(err)
	}
	if s := h.session(id); !s.SeenAt.Equal(at(time.Minute)) {
		h.t.Errorf("SeenAt = %v after touches at 1m and 1s, want 1m", s.SeenAt)
	}

	end := store.SessionEndParams{ID: id, By: "user:alice@example.com", Reason: store.SessionSignedOut, Now: at(2 * time.Minute),
		Event: &store.Event{At: at(2 * time.Minute), Type: store.EventConsoleSignedOut, Actor: "user:alice@example.com"}}
	ended, err := h.s.SessionEnd(h.ctx, end)
	if err != nil || !ended {
		h.t.Fatalf("SessionEnd = %v, %v; want true", ended, err)
	}
	ended, err = h.s.SessionEnd(h.ctx, end)
	if err != nil || ended {
		h.t.Fatalf("second SessionEnd = %v, %v; want false, nil", ended, err)
	}
	if err := h.s.SessionTouch(h.ctx, id, at(3*time.Minute)); err != nil {
		h.t.Fatal(err)
	}
	s := h.session(id)
	if !s.EndedAt.Equal(at(2*time.Minute)) || s.EndedBy != "user:alice@example.com" || s.EndReason != store.SessionSignedOut ||
		!s.SeenAt.Equal(at(time.Minute)) || s.Active(at(2*time.Minute)) {
		h.t.Errorf("ended session = %+v", s)
	}
	evs := h.events(store.EventListParams{})
	if len(evs) != 2 || evs[1].Type != store.EventConsoleSignedOut {
		h.t.Errorf("events = %d, want the sign-in and one sign-out", len(evs))
	}
}

// The list holds the active sessions, newest sign-in first; with Ended, those that ended or
// expired since EndedSince as well.
func testSessionList(h *harness) {
	a := h.newSession("a", "token:ops", at(0), 8*time.Hour)
	b := h.newSession("b", "user:bob@example.com", at(time.Minute), time.Hour)
	c := h.newSession("c", "user:carol@example.com", at(2*time.Minute), 8*time.Hour)
	old := h.newSession("old", "token:ops", at(-48*time.Hour), time.Hour)
	if _, err := h.s.SessionEnd(h.ctx, store.SessionEndParams{ID: c.ID, By: "token:ops", Reason: store.SessionEndedBy, Now: at(3 * time.Minute)}); err != nil {
		h.t.Fatal(err)
	}
	ids := func(list []*store.Session) []string {
		var out []string
		for _, s := range list {
			out = append(out, s.Actor)
		}
		return out
	}
	list, err := h.s.SessionList(h.ctx, store.SessionListParams{Now: at(30 * time.Minute)})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != b.ID || list[1].ID != a.ID {
		h.t.Errorf("active at 30m = %v, want bob's then ops's", ids(list))
	}
	list, err = h.s.SessionList(h.ctx, store.SessionListParams{Now: at(2 * time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != a.ID {
		h.t.Errorf("active at 2h = %v, want ops's alone (bob's expired)", ids(list))
	}
	list, err = h.s.SessionList(h.ctx, store.SessionListParams{Now: at(2 * time.Hour), Ended: true, EndedSince: at(-time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(list) != 3 || list[0].ID != c.ID || list[1].ID != b.ID || list[2].ID != a.ID {
		h.t.Errorf("active and ended since -1h = %v, want carol's, bob's, ops's (not the old one)", ids(list))
	}
	_ = old
}

// An ID already stored, a malformed ID, an unknown ID: each is refused and writes nothing.
func testSessionRefusals(h *harness) {
	s := h.newSession("dup", "token:ops", at(0), time.Hour)
	err := h.s.SessionInsert(h.ctx, store.SessionInsertParams{Session: *s,
		Event: &store.Event{At: at(0), Type: store.EventConsoleSignedIn, Actor: "token:ops"}})
	if !errors.Is(err, store.ErrSessionExists) {
		h.t.Errorf("second SessionInsert of one ID = %v, want ErrSessionExists", err)
	}
	if err := h.s.SessionInsert(h.ctx, store.SessionInsertParams{Session: store.Session{ID: "short", Actor: "token:ops", CreatedAt: at(0), ExpiresAt: at(time.Hour)}}); err == nil {
		h.t.Error("SessionInsert of a malformed ID succeeded")
	}
	if err := h.s.SessionInsert(h.ctx, store.SessionInsertParams{Session: store.Session{ID: sessionID("x"), Actor: "token:ops", CreatedAt: at(0), ExpiresAt: at(0)}}); err == nil {
		h.t.Error("SessionInsert of a session that never lasts succeeded")
	}
	if n := len(h.events(store.EventListParams{})); n != 0 {
		h.t.Errorf("%d events after refused inserts, want 0", n)
	}
	if _, err := h.s.SessionGet(h.ctx, sessionID("nobody")); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("SessionGet(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := h.s.SessionEnd(h.ctx, store.SessionEndParams{ID: sessionID("nobody"), By: "token:ops", Reason: store.SessionEndedBy, Now: at(0)}); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("SessionEnd(unknown) = %v, want ErrNotFound", err)
	}
}

// An action taken under a context carrying an origin names the origin's session and
// client in the detail of each event it stores; without one, the detail has neither.
func testOriginStamped(h *harness) {
	ctx := store.WithOrigin(h.ctx, store.Origin{Session: "3fa9c2d1e0", Client: "192.0.2.7"})
	if _, err := h.s.WorkflowPause(ctx, store.WorkflowPauseParams{Workflow: "orders", Actor: "user:alice@example.com", Note: "supplier down", Now: at(0)}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.s.WorkflowResume(h.ctx, store.WorkflowPauseParams{Workflow: "orders", Actor: "token:ops", Now: at(time.Second)}); err != nil {
		h.t.Fatal(err)
	}
	evs := h.events(store.EventListParams{})
	if len(evs) != 2 {
		h.t.Fatalf("%d events, want the pause and the resume", len(evs))
	}
	var paused, resumed map[string]any
	_ = json.Unmarshal(evs[0].Detail, &paused)
	_ = json.Unmarshal(evs[1].Detail, &resumed)
	if paused["session"] != "3fa9c2d1e0" || paused["client"] != "192.0.2.7" || paused["note"] != "supplier down" {
		h.t.Errorf("pause's detail = %s, want its note, session and client", evs[0].Detail)
	}
	if _, ok := resumed["session"]; ok {
		h.t.Errorf("resume's detail = %s, want no session", evs[1].Detail)
	}
}

// A sign-in deletes the sessions that expired before its PurgeBefore, and no other.
func testSessionPurge(h *harness) {
	old := h.newSession("old", "token:ops", at(-30*24*time.Hour), 8*time.Hour)
	recent := h.newSession("recent", "token:ops", at(-2*time.Hour), time.Hour)
	s := store.Session{ID: sessionID("new"), Actor: "token:ops", CreatedAt: at(0), ExpiresAt: at(8 * time.Hour)}
	if err := h.s.SessionInsert(h.ctx, store.SessionInsertParams{Session: s, PurgeBefore: at(-7 * 24 * time.Hour)}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.s.SessionGet(h.ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("a session expired 29 days ago: %v, want ErrNotFound", err)
	}
	h.session(recent.ID)
	h.session(s.ID)
}
