package onceflowui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
)

// Sessions are stateless: the cookie holds the token's name, an expiry and a random nonce,
// signed with HMAC-SHA256 under a key derived from that token's own secret. Nothing is
// stored, so the console needs no table, every process serving the same tokens accepts the
// same cookie, a restart signs nobody out, and removing (or rotating) a token ends its
// sessions at once — the signature no longer verifies. The scope is read from the
// configured token on every request, never from the cookie. The price of statelessness is
// that signing out clears the cookie in the browser but cannot revoke a copy of it before
// it expires; Config.SessionTTL bounds that.
//
// The CSRF token is an HMAC of the session's nonce under the same key: bound to the
// session, unguessable without the token's secret, and checked on every POST.

const (
	sessionCookie = "onceflow_session"
	loginCookie   = "onceflow_login"
	csrfField     = "csrf"
)

// session is a signed-in person.
type session struct {
	Name    string
	Admin   bool
	Expires time.Time
	csrf    string
}

// Actor is the name written into the audit trail for what the session does.
func (s *session) Actor() string { return "token:" + s.Name }

type sessionKey struct{}

func sessionFrom(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

var b64 = base64.RawURLEncoding

// keyOf derives the signing key of a token's sessions from its secret.
func keyOf(t *onceflowhttp.Token) []byte {
	m := hmac.New(sha256.New, []byte(t.Secret))
	m.Write([]byte("onceflow console session v1"))
	return m.Sum(nil)
}

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

// newSessionCookie signs a session for t; exp is when it ends.
func (c *Console) newSessionCookie(r *http.Request, t *onceflowhttp.Token) (ck *http.Cookie, exp time.Time) {
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	name := b64.EncodeToString([]byte(t.Name))
	exp = c.cfg.Now().Add(c.cfg.SessionTTL)
	expS := strconv.FormatInt(exp.Unix(), 10)
	n := b64.EncodeToString(nonce)
	v := name + "." + expS + "." + n + "." + mac(keyOf(t), "session", name, expS, n)
	return c.cookie(r, sessionCookie, v, exp), exp
}

func (c *Console) cookie(r *http.Request, name, value string, exp time.Time) *http.Cookie {
	ck := &http.Cookie{Name: name, Value: value, Path: c.cfg.Prefix + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || c.cfg.SecureCookies}
	if exp.IsZero() {
		ck.MaxAge = -1
	} else {
		ck.Expires = exp
		ck.MaxAge = int(exp.Sub(c.cfg.Now()).Seconds())
	}
	return ck
}

// readSession verifies the session cookie of r; nil when there is none or it is not valid
// (forged, expired, of a token no longer configured, of a token without read or admin).
func (c *Console) readSession(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 4 {
		return nil
	}
	raw, err := b64.DecodeString(parts[0])
	if err != nil {
		return nil
	}
	t := c.tokenByName(string(raw))
	if t == nil {
		return nil
	}
	key := keyOf(t)
	if !hmac.Equal([]byte(parts[3]), []byte(mac(key, "session", parts[0], parts[1], parts[2]))) {
		return nil
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !c.cfg.Now().Before(time.Unix(exp, 0)) {
		return nil
	}
	read, admin := scopes(t)
	if !read {
		return nil
	}
	return &session{Name: t.Name, Admin: admin, Expires: time.Unix(exp, 0), csrf: mac(key, "csrf", parts[2])}
}

// view admits signed-in sessions; others are sent to the sign-in page.
func (c *Console) view(h handlerFunc) http.Handler {
	inner := c.handle(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.readSession(r)
		if s == nil {
			if strings.HasSuffix(r.URL.Path, "/live") {
				http.Error(w, "signed out", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, c.cfg.Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
	})
}

// act admits state-changing requests: a signed-in session, a valid CSRF token in the form
// (or the X-CSRF-Token header) and, when admin is set, the admin scope.
func (c *Console) act(admin bool, h handlerFunc) http.Handler {
	return c.handle(func(w http.ResponseWriter, r *http.Request) error {
		s := c.readSession(r)
		if s == nil {
			return &pageError{Status: http.StatusUnauthorized, Title: "Signed out", Detail: "sign in again; nothing was changed"}
		}
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
		if err := c.readForm(w, r, maxForm); err != nil {
			return err
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostForm.Get(csrfField)
		}
		if got == "" || !hmac.Equal([]byte(got), []byte(s.csrf)) {
			c.log.Warn("console request refused: CSRF token missing or invalid", "route", r.Pattern, "token", s.Name)
			return &pageError{Status: http.StatusForbidden, Title: "Request refused", Detail: "the form's CSRF token is missing or invalid; reload the page and try again. Nothing was changed."}
		}
		if admin && !s.Admin {
			return &pageError{Status: http.StatusForbidden, Title: "Not allowed", Detail: "token " + s.Name + " has the read scope: it may look but not act. Nothing was changed."}
		}
		return h(w, r)
	})
}

// loginPage is GET /ui/login: the sign-in form, with a fresh login CSRF cookie.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) error {
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	v := b64.EncodeToString(nonce)
	http.SetCookie(w, c.cookie(r, loginCookie, v, c.cfg.Now().Add(time.Hour)))
	c.render(w, r, http.StatusOK, "login", loginData{CSRF: v, Next: c.next(r.URL.Query().Get("next")), NoTokens: len(c.cfg.Tokens) == 0})
	return nil
}

type loginData struct {
	CSRF     string
	Next     string
	Error    string
	NoTokens bool
}

func (loginData) title() string { return "Sign in" }

// next keeps a redirect target only when it is a page of the console.
func (c *Console) next(v string) string {
	if strings.HasPrefix(v, c.cfg.Prefix+"/") && !strings.HasPrefix(v, "//") && !strings.Contains(v, "\\") {
		return v
	}
	return c.cfg.Prefix + "/"
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
	t := c.tokenBySecret(strings.TrimSpace(r.PostForm.Get("token")))
	fail := func(msg string) error {
		c.render(w, r, http.StatusUnauthorized, "login", loginData{CSRF: ck.Value, Next: next, Error: msg})
		return nil
	}
	if t == nil {
		c.log.Warn("console sign-in refused: unknown token")
		return fail("This token is not known. Use a token of ONCEFLOW_API_TOKENS with the read or admin scope.")
	}
	if read, _ := scopes(t); !read {
		c.log.Warn("console sign-in refused: token lacks read and admin", "token", t.Name)
		return fail("Token " + t.Name + " has neither the read nor the admin scope.")
	}
	ck, exp := c.newSessionCookie(r, t)
	_, admin := scopes(t)
	s := &session{Name: t.Name, Admin: admin, Expires: exp}
	scope := "read"
	if admin {
		scope = "admin"
	}
	// The sign-in is in the audit trail before the session exists: a sign-in that cannot
	// be recorded does not happen.
	if err := c.recordSession(r.Context(), onceflow.EventConsoleSignedIn, s, map[string]any{"scope": scope, "expires": exp}); err != nil {
		return err
	}
	http.SetCookie(w, ck)
	http.SetCookie(w, c.cookie(r, loginCookie, "", time.Time{}))
	c.log.Info("console sign-in", "token", t.Name, "scope", scope)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// logout is POST /ui/logout.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) error {
	http.SetCookie(w, c.cookie(r, sessionCookie, "", time.Time{}))
	if err := c.recordSession(r.Context(), onceflow.EventConsoleSignedOut, sessionFrom(r), nil); err != nil {
		// The cookie is cleared all the same: signing out never fails for the person.
		c.log.Error("console sign-out not recorded in the audit trail", "token", sessionFrom(r).Name, "error", err)
	}
	c.log.Info("console sign-out", "token", sessionFrom(r).Name)
	http.Redirect(w, r, c.cfg.Prefix+"/login", http.StatusSeeOther)
	return nil
}

// recordSession appends the audit event of a sign-in or sign-out of s: the actor is the
// session's (token:NAME), never the token's secret.
func (c *Console) recordSession(ctx context.Context, typ onceflow.EventType, s *session, detail map[string]any) error {
	return c.cfg.Client.RecordOperatorEvent(ctx, onceflow.OperatorEvent{Type: typ, Actor: s.Actor(), Detail: detail, At: c.cfg.Now()})
}
