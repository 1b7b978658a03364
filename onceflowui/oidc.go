package onceflowui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDC configures signing in to the console with OpenID Connect: people sign in at their
// identity provider and act as themselves (user:EMAIL in the audit trail), with the roles
// the provider's claim gives them.
type OIDC struct {
	// Issuer is the provider's issuer URL; its discovery document is read at the first
	// sign-in (and again after a failure).
	Issuer string
	// ClientID and ClientSecret are the console's at the provider. The secret is sent to
	// the provider's token endpoint only: it is never logged or shown.
	ClientID     string
	ClientSecret string
	// RedirectURL is the console's callback as registered at the provider: the console's
	// address followed by Prefix + "/oidc/callback", such as https://ops.example.com/ui/oidc/callback.
	RedirectURL string
	// Scopes are asked for besides openid (default: email and profile). A provider that
	// puts groups in the ID token only when asked needs its scope here, such as groups.
	Scopes []string
	// RolesClaim names the ID token's claim that holds the person's roles or groups: a
	// string or a list of strings (default "groups").
	RolesClaim string
	// Roles maps the claim's values to what a person may do (ParseOIDCRoles). A person
	// whose claim matches none is refused.
	Roles []OIDCRole
	// Label is the sign-in button's name for the provider (default "single sign-on").
	Label string
	// HTTPClient talks to the provider (default http.DefaultClient).
	HTTPClient *http.Client
}

// OIDCRole is what a person whose roles claim holds Value may do: Role read (look at
// everything) or admin (act too), on every workflow or, with Workflow set, admin of that
// workflow only (a team's own) and read of the others.
type OIDCRole struct {
	Value    string
	Role     string
	Workflow string
}

const (
	roleRead  = "read"
	roleAdmin = "admin"
)

// ParseOIDCRoles reads a role mapping: comma-separated VALUE=ROLE entries, ROLE being
// read, admin or admin:WORKFLOW, such as "ops=admin,finance=read,growth=admin:website-lead".
// A value may appear more than once (a team that owns several workflows).
func ParseOIDCRoles(s string) ([]OIDCRole, error) {
	var out []OIDCRole
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		value, role, ok := strings.Cut(entry, "=")
		value, role = strings.TrimSpace(value), strings.TrimSpace(role)
		if !ok || value == "" {
			return nil, fmt.Errorf("onceflowui: role mapping %q: want VALUE=ROLE, such as ops=admin", entry)
		}
		r := OIDCRole{Value: value, Role: role}
		if wf, found := strings.CutPrefix(role, roleAdmin+":"); found {
			r.Role, r.Workflow = roleAdmin, strings.TrimSpace(wf)
			if r.Workflow == "" {
				return nil, fmt.Errorf("onceflowui: role mapping %q: admin: needs a workflow's name, such as admin:website-lead", entry)
			}
		}
		if r.Role != roleRead && r.Role != roleAdmin {
			return nil, fmt.Errorf("onceflowui: role mapping %q: the role is read, admin or admin:WORKFLOW, not %q", entry, role)
		}
		out = append(out, r)
	}
	return out, nil
}

// check reports what is missing from o.
func (o *OIDC) check(prefix string) error {
	var missing []string
	for _, f := range []struct{ name, v string }{{"Issuer", o.Issuer}, {"ClientID", o.ClientID}, {"ClientSecret", o.ClientSecret}, {"RedirectURL", o.RedirectURL}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("onceflowui: Config.OIDC: %s required", strings.Join(missing, ", "))
	}
	u, err := url.Parse(o.RedirectURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != prefix+"/oidc/callback" {
		return fmt.Errorf("onceflowui: Config.OIDC.RedirectURL %q: want the console's address followed by %s/oidc/callback", o.RedirectURL, prefix)
	}
	if len(o.Roles) == 0 {
		return errors.New("onceflowui: Config.OIDC.Roles: map at least one claim value to a role, or nobody may sign in")
	}
	return nil
}

// oidcSignIn is the console's OpenID Connect relying party.
type oidcSignIn struct {
	cfg   OIDC
	label string

	mu       sync.Mutex
	provider *oidc.Provider
}

func newOIDCSignIn(o OIDC) *oidcSignIn {
	if len(o.Scopes) == 0 {
		o.Scopes = []string{"email", "profile"}
	}
	if o.RolesClaim == "" {
		o.RolesClaim = "groups"
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	label := o.Label
	if label == "" {
		label = "single sign-on"
	}
	return &oidcSignIn{cfg: o, label: label}
}

// ctx is a context for talking to the provider: its HTTP client, and no cancellation, since
// the provider's keys are fetched later with the context the provider was made with.
func (o *oidcSignIn) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithoutCancel(ctx), o.cfg.HTTPClient)
}

// discover returns the provider, reading its discovery document the first time.
func (o *oidcSignIn) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	dctx, cancel := context.WithTimeout(o.ctx(ctx), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(dctx, o.cfg.HTTPClient), o.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	// The key set is fetched later with the context NewProvider was given: make it again
	// from the discovered settings with one that lasts.
	var pc oidc.ProviderConfig
	if err := p.Claims(&pc); err != nil {
		return nil, err
	}
	o.provider = pc.NewProvider(o.ctx(ctx))
	return o.provider, nil
}

func (o *oidcSignIn) oauth2(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID}, o.cfg.Scopes...)}
}

// oidcFlow is what the browser keeps between the redirect to the provider and the
// callback, in a cookie of its own: the state and nonce to compare and the PKCE verifier.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
}

const oidcCookie = "onceflow_oidc"

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return b64.EncodeToString(b)
}

// oidcLogin is GET /ui/oidc/login: a new state, nonce and PKCE verifier, kept in a
// short-lived cookie, and the redirect to the provider.
func (c *Console) oidcLogin(w http.ResponseWriter, r *http.Request) error {
	if err := c.mayTrySignIn(w, r); err != nil {
		return err
	}
	p, err := c.oidc.discover(r.Context())
	if err != nil {
		c.log.Warn("console sign-in: the identity provider's discovery document could not be read", "issuer", c.oidc.cfg.Issuer, "error", err)
		return &pageError{Status: http.StatusBadGateway, Title: "Identity provider unavailable",
			Detail: "the identity provider could not be reached; try again in a moment, or sign in with a token"}
	}
	f := oidcFlow{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Next: c.next(r.URL.Query().Get("next"))}
	raw, _ := json.Marshal(f)
	// SameSite=Lax: the provider sends the browser back with a cross-site redirect, on
	// which a Strict cookie would not come along.
	ck := c.cookie(r, oidcCookie, b64.EncodeToString(raw), c.cfg.Now().Add(10*time.Minute))
	ck.SameSite = http.SameSiteLaxMode
	http.SetCookie(w, ck)
	http.Redirect(w, r, c.oidc.oauth2(p).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), http.StatusSeeOther)
	return nil
}

// oidcCallback is GET /ui/oidc/callback: the state is the one sent, the code is exchanged
// with the PKCE verifier, the ID token verified (issuer, audience, expiry, signature) and
// its nonce compared; the person's roles come from the configured claim. Then the session
// starts, as user:EMAIL.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) error {
	if err := c.mayTrySignIn(w, r); err != nil {
		return err
	}
	clear := c.cookie(r, oidcCookie, "", time.Time{})
	clear.SameSite = http.SameSiteLaxMode
	http.SetCookie(w, clear)
	refuse := func(why, detail string, args ...any) error {
		c.signIns.failed(clientAddr(r), c.cfg.Now())
		c.log.Warn("console sign-in refused: "+why, append([]any{"client", clientAddr(r)}, args...)...)
		return &pageError{Status: http.StatusUnauthorized, Title: "Sign-in refused", Detail: detail}
	}
	var f oidcFlow
	ck, err := r.Cookie(oidcCookie)
	if err == nil {
		raw, derr := b64.DecodeString(ck.Value)
		err = errors.Join(derr, json.Unmarshal(raw, &f))
	}
	q := r.URL.Query()
	if err != nil || f.State == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		return refuse("the state does not match the sign-in begun in this browser",
			"this answer of the identity provider does not belong to a sign-in begun in this browser; sign in again")
	}
	if e := q.Get("error"); e != "" {
		return refuse("the identity provider refused", "the identity provider refused the sign-in ("+e+")", "provider_error", e)
	}
	p, err := c.oidc.discover(r.Context())
	if err != nil {
		return &pageError{Status: http.StatusBadGateway, Title: "Identity provider unavailable", Detail: "the identity provider could not be reached; sign in again in a moment"}
	}
	ctx, cancel := context.WithTimeout(c.oidc.ctx(r.Context()), 15*time.Second)
	defer cancel()
	tok, err := c.oidc.oauth2(p).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return refuse("the code could not be exchanged", "the identity provider did not accept the sign-in's code; sign in again", "error", err)
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		return refuse("no ID token", "the identity provider sent no ID token; sign in again")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: c.oidc.cfg.ClientID}).Verify(ctx, rawID)
	if err != nil {
		return refuse("the ID token is not valid", "the identity provider's ID token is not valid; sign in again", "error", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return refuse("the ID token's nonce does not match", "the ID token was not issued for this sign-in; sign in again")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return refuse("the ID token's claims are not readable", "the identity provider's ID token cannot be read; sign in again", "error", err)
	}
	email, _ := claims["email"].(string)
	if verified, ok := claims["email_verified"].(bool); email == "" || (ok && !verified) {
		return refuse("no verified e-mail address", "the identity provider gave no verified e-mail address for you; ask its administrator", "subject", idt.Subject)
	}
	g := c.oidc.grantsOf(claims[c.oidc.cfg.RolesClaim])
	if g.Role == "" {
		return refuse("no role", "you are signed in at the identity provider, but none of your "+c.oidc.cfg.RolesClaim+" has a role in this console; ask its administrator",
			"user", email)
	}
	g.Name = email
	st, err := c.startSession(w, r, "user:"+email, g, map[string]any{"scope": (&session{Admin: g.Role == roleAdmin, AdminOf: g.AdminOf}).Role(), "provider": c.oidc.cfg.Issuer})
	if err != nil {
		return err
	}
	c.log.Info("console sign-in", "user", email, "role", g.Role, "admin_of", g.AdminOf, "session", st.Short(), "client", st.Client)
	http.Redirect(w, r, c.next(f.Next), http.StatusSeeOther)
	return nil
}

// grantsOf maps a roles claim (a string or a list of strings) to what the person may do:
// admin of every workflow if any value maps to admin, else read with admin of the
// workflows that values map to; no role when nothing matches.
func (o *oidcSignIn) grantsOf(claim any) grants {
	var values []string
	switch v := claim.(type) {
	case string:
		values = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				values = append(values, s)
			}
		}
	}
	var g grants
	for _, r := range o.cfg.Roles {
		if !slices.Contains(values, r.Value) {
			continue
		}
		switch {
		case r.Role == roleAdmin && r.Workflow == "":
			g.Role = roleAdmin
		case r.Role == roleAdmin:
			if g.Role == "" {
				g.Role = roleRead
			}
			if !slices.Contains(g.AdminOf, r.Workflow) {
				g.AdminOf = append(g.AdminOf, r.Workflow)
			}
		case g.Role == "":
			g.Role = roleRead
		}
	}
	if g.Role == roleAdmin {
		g.AdminOf = nil
	}
	slices.Sort(g.AdminOf)
	return g
}
