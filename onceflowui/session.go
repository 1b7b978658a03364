package onceflowui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
)

// Sessions live in the store (onceflow.Client.SessionStart), so that every process
// serving the console sees one start and end: the cookie holds only a random secret, the
// store its SHA-256. Signing out, an operator's "end session", the idle timeout
// (Config.SessionIdle) and the absolute one (Config.SessionTTL) end it, in every process at
// once; a copy of the cookie is refused from then on. What a session may do is read on
// every request: a token session's scope from the configured token (removing or rotating a
// token ends its sessions; the session keeps a digest of the token's secret, not the
// secret), a person's roles from the grants stored at sign-in.
//
// The CSRF token is an HMAC of a fixed label under the cookie's secret: bound to the
// session, unguessable without the cookie, and checked on every POST.

const (
	sessionCookie = "onceflow_session"
	loginCookie   = "onceflow_login"
	csrfField     = "csrf"
)

// session is a signed-in person.
type session struct {
	// ID is the stored session's ID; Short its short name, in the audit trail.
	ID    string
	Short string
	// Name is who is signed in, as the header shows it (a token's name, an e-mail).
	Name  string
	actor string
	// Admin may act on every workflow; AdminOf lists the workflows a person who is not an
	// admin of all may act on (a team's own).
	Admin   bool
	AdminOf []string
	Expires time.Time
	csrf    string
}

// Actor is the name written into the audit trail for what the session does:
// token:NAME, or user:EMAIL for a person signed in with OpenID Connect.
func (s *session) Actor() string { return s.actor }

// MayAct reports whether the session may act on workflow.
func (s *session) MayAct(workflow string) bool {
	return s.Admin || slices.Contains(s.AdminOf, workflow)
}

// MayActAny reports whether the session may act on some workflow.
func (s *session) MayActAny() bool { return s.Admin || len(s.AdminOf) > 0 }

// Hides reports whether the pages leave out the actions on workflow: for a person who
// administers other workflows only. A read session sees them, disabled.
func (s *session) Hides(workflow string) bool { return s.MayActAny() && !s.MayAct(workflow) }

// Role describes what the session may do, for the header.
func (s *session) Role() string {
	switch {
	case s.Admin:
		return "admin"
	case len(s.AdminOf) > 0:
		return "admin of " + strings.Join(s.AdminOf, ", ")
	}
	return "read only"
}

// grants is what a stored session may do, as the console writes it at sign-in.
type grants struct {
	// Token names the API token of a token session: its scope is read from the
	// configuration on every request.
	Token string `json:"token,omitempty"`
	// Secret is a digest of the token's secret at sign-in: a token rotated since ends the
	// session.
	Secret string `json:"secret,omitempty"`
	// Role (read or admin) and AdminOf are a person's, from the identity provider's claims.
	Role    string   `json:"role,omitempty"`
	AdminOf []string `json:"admin_of,omitempty"`
	Name    string   `json:"name,omitempty"`
}

type sessionKey struct{}

func sessionFrom(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

var b64 = base64.RawURLEncoding

func mac(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "|")))
	return b64.EncodeToString(m.Sum(nil))
}

// tokenBySecret finds the token for secret, comparing digests of every token in constant
// time.
func (c *Console) tokenBySecret(secret string) *onceflowhttp.Token {
	got := sha256.Sum256([]byte(secret))
	var found *onceflowhttp.Token
	for i := range c.cfg.Tokens {
		want := sha256.Sum256([]byte(c.cfg.Tokens[i].Secret))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			found = &c.cfg.Tokens[i]
		}
	}
	return found
}

// tokenDigest identifies the secret of t in a session's grants without revealing it.
func tokenDigest(t *onceflowhttp.Token) string {
	return mac([]byte(t.Secret), "onceflow console session token")[:22]
}

func (c *Console) tokenByName(name string) *onceflowhttp.Token {
	for i := range c.cfg.Tokens {
		if c.cfg.Tokens[i].Name == name {
			return &c.cfg.Tokens[i]
		}
	}
	return nil
}

// scopes reports what a token may do in the console.
func scopes(t *onceflowhttp.Token) (read, admin bool) {
	for _, s := range t.Scopes {
		switch s {
		case onceflowhttp.ScopeAdmin:
			read, admin = true, true
		case onceflowhttp.ScopeRead:
			read = true
		}
	}
	return read, admin
}

// clientAddr is the address r came from (the connection's peer, without its port).
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// startSession stores a session for actor with g and sets its cookie on w; detail goes
// into the sign-in's audit event, which is stored with the session: a sign-in that cannot
// be recorded does not happen.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, actor string, g grants, detail map[string]any) (*onceflow.ConsoleSession, error) {
	raw, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	secret, s, err := c.cfg.Client.SessionStart(r.Context(), onceflow.SessionStartParams{Actor: actor, Grants: raw,
		Client: clientAddr(r), TTL: c.cfg.SessionTTL, At: c.cfg.Now(), Detail: detail})
	if err != nil {
		return nil, err
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, secret, s.ExpiresAt))
	http.SetCookie(w, c.cookie(r, loginCookie, "", time.Time{}))
	return s, nil
}

func (c *Console) cookie(r *http.Request, name, value string, exp time.Time) *http.Cookie {
	ck := &http.Cookie{Name: name, Value: value, Path: c.cfg.Prefix + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || c.cfg.SecureCookies}
	if exp.IsZero() {
		ck.MaxAge = -1
	} else {
		ck.Expires = exp
		ck.MaxAge = max(int(exp.Sub(c.cfg.Now()).Seconds()), 1)
	}
	return ck
}

// touchEvery is how stale a session's last-seen time may be before a request writes it
// again: a fraction of the idle timeout, so that a busy page costs no write per request.
func (c *Console) touchEvery() time.Duration { return min(time.Minute, c.cfg.SessionIdle/8) }

// readSession finds the session of r's cookie; nil when there is none or it is no longer
// valid: unknown, ended, past its absolute or idle timeout (it is ended then, in every
// process), of a token no longer configured or without read or admin, of a person when
// OpenID Connect is no longer configured. An error is the store's.
func (c *Console) readSession(r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return nil, nil
	}
	ctx := r.Context()
	st, err := c.cfg.Client.SessionBySecret(ctx, ck.Value)
	if errors.Is(err, onceflow.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	if !st.EndedAt.IsZero() {
		return nil, nil
	}
	if reason := ""; !now.Before(st.ExpiresAt) || now.Sub(st.SeenAt) > c.cfg.SessionIdle {
		reason = onceflow.SessionExpired
		if now.Before(st.ExpiresAt) {
			reason = onceflow.SessionIdle
		}
		if _, err := c.cfg.Client.SessionEnd(ctx, onceflow.SessionEndRequest{ID: st.ID, By: "console", Reason: reason}); err != nil {
			c.log.Warn("console session not marked ended", "session", st.Short(), "reason", reason, "error", err)
		}
		return nil, nil
	}
	var g grants
	if err := json.Unmarshal(st.Grants, &g); err != nil {
		return nil, nil
	}
	s := &session{ID: st.ID, Short: st.Short(), actor: st.Actor, Expires: st.ExpiresAt, csrf: mac([]byte(ck.Value), "onceflow console csrf v2")}
	switch {
	case g.Token != "":
		t := c.tokenByName(g.Token)
		if t == nil || "token:"+t.Name != st.Actor || !hmac.Equal([]byte(g.Secret), []byte(tokenDigest(t))) {
			return nil, nil
		}
		read, admin := scopes(t)
		if !read {
			return nil, nil
		}
		s.Name, s.Admin = t.Name, admin
	case g.Role != "" && c.oidc != nil:
		s.Name, s.Admin, s.AdminOf = g.Name, g.Role == roleAdmin, g.AdminOf
	default:
		return nil, nil
	}
	if now.Sub(st.SeenAt) >= c.touchEvery() {
		if err := c.cfg.Client.SessionSeen(ctx, st.ID, now); err != nil {
			c.log.Warn("console session's last request not recorded", "session", s.Short, "error", err)
		}
	}
	return s, nil
}

// withSession returns r carrying s and, for the audit trail, the origin of what it does:
// the session's short name and the client's address.
func withSession(r *http.Request, s *session) *http.Request {
	ctx := context.WithValue(r.Context(), sessionKey{}, s)
	ctx = onceflow.WithOrigin(ctx, onceflow.Origin{Session: s.Short, Client: clientAddr(r)})
	return r.WithContext(ctx)
}

// view admits signed-in sessions; others are sent to the sign-in page.
func (c *Console) view(h handlerFunc) http.Handler {
	return c.handle(func(w http.ResponseWriter, r *http.Request) error {
		s, err := c.readSession(r)
		if err != nil {
			return err
		}
		if s == nil {
			if strings.HasSuffix(r.URL.Path, "/live") {
				http.Error(w, "signed out", http.StatusUnauthorized)
				return nil
			}
			http.Redirect(w, r, c.cfg.Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil
		}
		return h(w, withSession(r, s))
	})
}

// act admits state-changing requests: a signed-in session, a valid CSRF token in the form
// (or the X-CSRF-Token header) and, when admin is set, the right to act on the workflow
// the request is about (actTarget). What the handler does is audited with the session's
// short name and the client's address (onceflow.WithOrigin).
func (c *Console) act(admin bool, h handlerFunc) http.Handler {
	return c.handle(func(w http.ResponseWriter, r *http.Request) error {
		s, err := c.readSession(r)
		if err != nil {
			return err
		}
		if s == nil {
			return &pageError{Status: http.StatusUnauthorized, Title: "Signed out", Detail: "sign in again; nothing was changed"}
		}
		r = withSession(r, s)
		if err := c.readForm(w, r, maxForm); err != nil {
			return err
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostForm.Get(csrfField)
		}
		if got == "" || !hmac.Equal([]byte(got), []byte(s.csrf)) {
			c.log.Warn("console request refused: CSRF token missing or invalid", "route", r.Pattern, "actor", s.Actor(), "session", s.Short)
			return &pageError{Status: http.StatusForbidden, Title: "Request refused", Detail: "the form's CSRF token is missing or invalid; reload the page and try again. Nothing was changed."}
		}
		if admin {
			if !s.MayActAny() {
				return &pageError{Status: http.StatusForbidden, Title: "Not allowed", Detail: s.Name + " has the read role: it may look but not act. Nothing was changed."}
			}
			if !s.Admin {
				wf, err := c.actTarget(r)
				if err != nil {
					return err
				}
				if !s.MayAct(wf) {
					c.log.Warn("console request refused: not an admin of the workflow", "route", r.Pattern, "actor", s.Actor(), "workflow", wf)
					return &pageError{Status: http.StatusForbidden, Title: "Not allowed",
						Detail: fmt.Sprintf("%s may act on %s only, not on workflow %q. Nothing was changed.", s.Name, strings.Join(s.AdminOf, ", "), wf)}
				}
			}
		}
		return h(w, r)
	})
}

// actTarget is the workflow an action of a person who administers some workflows only is
// about: the one named in the path, the workflow of the run in the path, or the bulk
// form's workflow filter — required then, so that a bulk action reaches no other
// workflow. Routes that act on no workflow (the sessions page) need an admin of all.
func (c *Console) actTarget(r *http.Request) (string, error) {
	if name := r.PathValue("name"); name != "" {
		return name, nil
	}
	for _, key := range []string{"id", "run"} {
		if r.PathValue(key) == "" {
			continue
		}
		id, err := pathID(r, key)
		if err != nil {
			return "", err
		}
		run, err := c.cfg.Client.RunGet(r.Context(), id)
		if errors.Is(err, onceflow.ErrNotFound) {
			return "", &pageError{Status: http.StatusNotFound, Title: "Run not found", Detail: fmt.Sprintf("run %d does not exist", id)}
		}
		if err != nil {
			return "", err
		}
		return run.Run.Workflow, nil
	}
	if strings.HasSuffix(r.URL.Path, "/review/bulk") {
		if wf := r.PostForm.Get("workflow"); wf != "" {
			return wf, nil
		}
		return "", &pageError{Status: http.StatusForbidden, Title: "Not allowed",
			Detail: "choose one of your workflows in the filter: a bulk action of an admin of some workflows must name one. Nothing was changed."}
	}
	return "", &pageError{Status: http.StatusForbidden, Title: "Not allowed", Detail: "only an admin of every workflow may do this. Nothing was changed."}
}

// loginPage is GET /ui/login: the sign-in form, with a fresh login CSRF cookie.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) error {
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	v := b64.EncodeToString(nonce)
	http.SetCookie(w, c.cookie(r, loginCookie, v, c.cfg.Now().Add(time.Hour)))
	c.render(w, r, http.StatusOK, "login", c.loginData(v, c.next(r.URL.Query().Get("next")), ""))
	return nil
}

type loginData struct {
	CSRF     string
	Next     string
	Error    string
	NoTokens bool
	// Tokens is set when signing in with an API token is allowed; OIDC names the identity
	// provider's sign-in, when one is configured.
	Tokens bool
	OIDC   string
}

func (c *Console) loginData(csrf, next, msg string) loginData {
	d := loginData{CSRF: csrf, Next: next, Error: msg, Tokens: !c.cfg.NoTokenSignIn}
	d.NoTokens = d.Tokens && len(c.cfg.Tokens) == 0 && c.oidc == nil
	if c.oidc != nil {
		d.OIDC = c.oidc.label
	}
	return d
}

func (loginData) title() string { return "Sign in" }

// next keeps a redirect target only when it is a page of the console: a path under the
// prefix, with no scheme, host, backslash or dot segment (which the redirect would resolve
// to a path outside the console).
func (c *Console) next(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(v, "//") || strings.Contains(v, "\\") ||
		!strings.HasPrefix(u.Path, c.cfg.Prefix+"/") || strings.TrimSuffix(path.Clean(u.Path), "/")+"/" != strings.TrimSuffix(u.Path, "/")+"/" {
		return c.cfg.Prefix + "/"
	}
	return v
}

// login is POST /ui/login: a token of scope read or admin starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) error {
	if err := c.readForm(w, r, maxLoginForm); err != nil {
		return err
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || !hmac.Equal([]byte(ck.Value), []byte(r.PostForm.Get(csrfField))) {
		return &pageError{Status: http.StatusForbidden, Title: "Request refused", Detail: "the sign-in form's CSRF token is missing or invalid; open the sign-in page again"}
	}
	next := c.next(r.PostForm.Get("next"))
	if err := c.mayTrySignIn(w, r); err != nil {
		return err
	}
	if c.cfg.NoTokenSignIn {
		return &pageError{Status: http.StatusForbidden, Title: "Request refused", Detail: "signing in with an API token is turned off; sign in with your identity provider"}
	}
	t := c.tokenBySecret(strings.TrimSpace(r.PostForm.Get("token")))
	fail := func(msg string) error {
		c.signIns.failed(clientAddr(r), c.cfg.Now())
		c.render(w, r, http.StatusUnauthorized, "login", c.loginData(ck.Value, next, msg))
		return nil
	}
	if t == nil {
		c.log.Warn("console sign-in refused: unknown token", "client", clientAddr(r))
		return fail("This token is not known. Use a token of ONCEFLOW_API_TOKENS with the read or admin scope.")
	}
	if read, _ := scopes(t); !read {
		c.log.Warn("console sign-in refused: token lacks read and admin", "token", t.Name, "client", clientAddr(r))
		return fail("Token " + t.Name + " has neither the read nor the admin scope.")
	}
	_, admin := scopes(t)
	scope := "read"
	if admin {
		scope = "admin"
	}
	st, err := c.startSession(w, r, "token:"+t.Name, grants{Token: t.Name, Secret: tokenDigest(t)}, map[string]any{"scope": scope})
	if err != nil {
		return err
	}
	c.log.Info("console sign-in", "token", t.Name, "scope", scope, "session", st.Short(), "client", st.Client)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// mayTrySignIn refuses a sign-in from an address that failed too often lately: 429 with
// Retry-After, whatever it sends.
func (c *Console) mayTrySignIn(w http.ResponseWriter, r *http.Request) error {
	wait := c.signIns.wait(clientAddr(r), c.cfg.Now())
	if wait <= 0 {
		return nil
	}
	c.log.Warn("console sign-in refused: too many failed sign-ins from this address", "client", clientAddr(r), "retry_after", wait.Round(time.Second))
	w.Header().Set("Retry-After", retryAfter(wait))
	return &pageError{Status: http.StatusTooManyRequests, Title: "Too many sign-ins",
		Detail: fmt.Sprintf("too many sign-ins from this address failed; try again in %s", retryAfter(wait)+" s")}
}

// logout is POST /ui/logout: the session ends in the store, in every process, before the
// cookie is cleared; a copy of the cookie is refused from then on.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) error {
	s := sessionFrom(r)
	if _, err := c.cfg.Client.SessionEnd(r.Context(), onceflow.SessionEndRequest{ID: s.ID, By: s.Actor(), Reason: onceflow.SessionSignedOut}); err != nil {
		return err
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, "", time.Time{}))
	c.log.Info("console sign-out", "actor", s.Actor(), "session", s.Short)
	http.Redirect(w, r, c.cfg.Prefix+"/login", http.StatusSeeOther)
	return nil
}
