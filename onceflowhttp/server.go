// Package onceflowhttp is onceflow's HTTP interface: the JSON API that starts and shows runs,
// and the webhook endpoints that turn signed provider deliveries into runs.
//
// Nothing is acknowledged before it is durably stored: a 2xx answer to POST
// /v1/workflows/{name}/runs or /hooks/{name} is written only after the run's transaction
// committed. Starting a run is idempotent per Idempotency-Key (or the workflow's run_key
// template applied to the body): the same key and body answer the first response again
// with Idempotent-Replayed: true, the same key with another body is a 422, and the same
// key while the first request is still in progress is a 409. Errors are RFC 9457 problem
// documents.
package onceflowhttp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// Scope is what a token may do.
type Scope string

// Scopes.
const (
	// ScopeIngest starts runs.
	ScopeIngest Scope = "ingest"
	// ScopeAdmin reads everything and acts on runs; it includes ingest.
	ScopeAdmin Scope = "admin"
)

// Token is a bearer token and its scopes.
type Token struct {
	Name   string
	Secret string
	Scopes []Scope
}

// ParseTokens reads tokens written as "name:scope+scope:secret" separated by commas, the
// form of ONCEFLOW_API_TOKENS.
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.SplitN(item, ":", 3)
		if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
			return nil, fmt.Errorf("API token %q: write it as name:scope[+scope]:secret, e.g. crm-form:ingest:long-random-secret", redactToken(item))
		}
		t := Token{Name: parts[0], Secret: parts[2]}
		for _, sc := range strings.Split(parts[1], "+") {
			switch Scope(sc) {
			case ScopeIngest, ScopeAdmin:
				t.Scopes = append(t.Scopes, Scope(sc))
			default:
				return nil, fmt.Errorf("API token %q: scope %q is not ingest or admin", t.Name, sc)
			}
		}
		if len(t.Secret) < 16 {
			return nil, fmt.Errorf("API token %q: the secret is shorter than 16 characters", t.Name)
		}
		out = append(out, t)
	}
	return out, nil
}

func redactToken(item string) string {
	if i := strings.LastIndex(item, ":"); i >= 0 {
		return item[:i] + ":…"
	}
	return "…"
}

// Config configures a Server.
type Config struct {
	Client *onceflow.Client
	Store  store.Store
	// Definitions are the workflow files served: their run_key templates and webhooks.
	Definitions []*flowfile.Definition
	Tokens      []Token
	// Env looks up webhook secrets (default: none).
	Env func(name string) (string, bool)
	// MaxBody caps request bodies, applied before parsing or verifying (default 1 MiB).
	MaxBody int64
	Logger  *slog.Logger
	// Now is the clock used for webhook timestamps (default time.Now).
	Now func() time.Time
	// Redact masks secrets in log lines and problem documents, and secrets and personal
	// data in the runs the API shows (default: the secret-looking fields only).
	Redact *redact.Policy
	// MetricsHandler, when set, is served at GET /metrics without a token: what it serves
	// carries no keys, entities, ids or personal data.
	MetricsHandler http.Handler
	// Metrics, when set, counts webhook deliveries.
	Metrics Metrics
}

// Metrics receives what the server measures. Its labels are workflow names and outcomes
// only.
type Metrics interface {
	// WebhookDelivery counts a delivery to a workflow's webhook: outcome is accepted,
	// duplicate (the event id was delivered before; nothing started), ignored (an event
	// type the workflow does not handle) or rejected (signature missing or invalid).
	WebhookDelivery(workflow, outcome string)
}

// Server serves the API and the webhooks.
type Server struct {
	cfg   Config
	log   *slog.Logger
	defs  map[string]*flowfile.Definition
	hooks map[string]*flowfile.Definition
	mux   *http.ServeMux

	mu       sync.Mutex
	inFlight map[string]bool // workflow + "\x00" + key of starts under way
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Env == nil {
		cfg.Env = func(string) (string, bool) { return "", false }
	}
	cfg.Logger = slog.New(redact.Handler(cfg.Logger.Handler(), cfg.Redact.Secrets()))
	s := &Server{cfg: cfg, log: cfg.Logger, defs: map[string]*flowfile.Definition{}, hooks: map[string]*flowfile.Definition{},
		mux: http.NewServeMux(), inFlight: map[string]bool{}}
	for _, d := range cfg.Definitions {
		s.defs[d.Name] = d
		if d.Webhook != nil {
			s.hooks[d.Webhook.Name] = d
		}
	}
	s.mux.Handle("POST /v1/workflows/{name}/runs", s.auth(ScopeIngest, s.handle(s.startRun)))
	s.mux.Handle("GET /v1/runs/{id}", s.auth(ScopeAdmin, s.handle(s.getRun)))
	s.mux.Handle("GET /v1/runs", s.auth(ScopeAdmin, s.handle(s.listRuns)))
	s.mux.Handle("GET /v1/schedules", s.auth(ScopeAdmin, s.handle(s.listSchedules)))
	s.reviewRoutes() // review queue, replay, audit and key answers (review.go, audit.go)
	s.mux.Handle("POST /hooks/{name}", s.handle(s.webhook))
	s.mux.Handle("GET /healthz", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	s.mux.Handle("GET /readyz", s.handle(s.ready))
	if cfg.MetricsHandler != nil {
		s.mux.Handle("GET /metrics", cfg.MetricsHandler)
	}
	s.mux.Handle("/", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return newProblem(http.StatusNotFound, "not-found", "Not found", r.Method+" "+r.URL.Path+" is not part of the API")
	}))
	return s
}

// Handler returns the server's routes, each request logged (see logRequests).
func (s *Server) Handler() http.Handler { return s.logRequests(s.mux) }

// auth admits requests that carry a bearer token with scope (admin includes every scope).
func (s *Server) auth(scope Scope, next http.Handler) http.Handler {
	return s.handle(func(w http.ResponseWriter, r *http.Request) error {
		if len(s.cfg.Tokens) == 0 {
			return newProblem(http.StatusUnauthorized, "unauthorized", "No API tokens configured",
				"set ONCEFLOW_API_TOKENS (name:scope:secret) to use the API")
		}
		h := r.Header.Get("Authorization")
		secret, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || secret == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="onceflow"`)
			return newProblem(http.StatusUnauthorized, "unauthorized", "Missing bearer token", "send Authorization: Bearer <token>")
		}
		tok := s.token(secret)
		if tok == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="onceflow", error="invalid_token"`)
			return newProblem(http.StatusUnauthorized, "unauthorized", "Invalid bearer token", "the token is not known")
		}
		for _, sc := range tok.Scopes {
			if sc == scope || sc == ScopeAdmin {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, "token:"+tok.Name)))
				return nil
			}
		}
		return newProblem(http.StatusForbidden, "forbidden", "Insufficient scope", fmt.Sprintf("token %q lacks the %s scope", tok.Name, scope))
	})
}

type actorKey struct{}

func actor(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok {
		return a
	}
	return "api"
}

// token finds the token for secret, comparing digests in constant time.
func (s *Server) token(secret string) *Token {
	got := sha256.Sum256([]byte(secret))
	var found *Token
	for i := range s.cfg.Tokens {
		want := sha256.Sum256([]byte(s.cfg.Tokens[i].Secret))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			found = &s.cfg.Tokens[i]
		}
	}
	return found
}

// claimKey marks a start as under way; false if one with the same key already is.
func (s *Server) claimKey(workflow, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := workflow + "\x00" + key
	if s.inFlight[k] {
		return false
	}
	s.inFlight[k] = true
	return true
}

func (s *Server) releaseKey(workflow, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, workflow+"\x00"+key)
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.RunList(ctx, store.RunListParams{Limit: 1}); err != nil {
		s.log.Warn("readiness check failed", "error", err)
		return newProblem(http.StatusServiceUnavailable, "not-ready", "Not ready", "the database cannot be reached")
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// HTTPServer returns the http.Server that serves h as onceflow serve does: bounded header,
// body-read and write times, idle connections closed after two minutes, headers of at most
// 64 KiB.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
