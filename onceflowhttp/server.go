package onceflowhttp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/bodybudget"
	"github.com/onceflow/onceflow/triggers"
)

// Scope is what a token may do.
type Scope string

// Scopes.
const (
	// ScopeIngest starts runs.
	ScopeIngest Scope = "ingest"
	// ScopeAdmin reads everything and acts on runs; it includes ingest and read.
	ScopeAdmin Scope = "admin"
	// ScopeRead views runs, the review queue, the audit trail and effect keys, through
	// the API's GET routes and in the web console, without acting on anything.
	ScopeRead Scope = "read"
)

// Token is a bearer token and its scopes.
type Token struct {
	Name   string
	Secret string
	Scopes []Scope
	// Workflows, when not nil, are the only workflows the token may start; without a
	// list it may start every workflow open to tokens (see onceflow.Access). It limits
	// starts only: what the token may read or do besides follows from its scopes.
	Workflows []string
}

// Caller is the token as the client's access rule sees its requests (onceflow.Caller).
func (t Token) Caller() onceflow.Caller {
	return onceflow.Caller{Token: t.Name, Workflows: t.Workflows}
}

// workflowListPrefix starts the optional field of a token that lists its workflows.
const workflowListPrefix = "workflows="

// workflowNameRE is what a workflow's name may be (onceflow.Workflow.Name).
var workflowNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ParseTokens reads tokens written as "name:scope+scope:secret" separated by commas, the
// form of ONCEFLOW_API_TOKENS. A token limited to some workflows lists them before its
// secret, as "name:scope:workflows=first+second:secret" (a secret may contain ':', so
// the list cannot follow it; a secret may not start with "workflows=").
//
// Its errors never show a secret: a token whose fields are not in that order is named by
// its position in s (any of its fields may be the secret), a well-formed one by its name,
// and a workflow of a list that is not a workflow name by its position in the list. Two
// tokens may not share a name or a secret (a secret given two scopes would make what a
// request may do depend on which entry is read). Whether the workflows a list names exist
// is for NewHandler to check.
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	names, secrets := map[string]bool{}, map[string]bool{}
	n := 0
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		n++
		parts := strings.SplitN(item, ":", 3)
		if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
			return nil, fmt.Errorf("API token %d: write it as name:scope[+scope]:secret, e.g. crm-form:ingest:long-random-secret", n)
		}
		t := Token{Name: parts[0], Secret: parts[2]}
		for _, sc := range strings.Split(parts[1], "+") {
			switch Scope(sc) {
			case ScopeIngest, ScopeAdmin, ScopeRead:
				t.Scopes = append(t.Scopes, Scope(sc))
			default:
				// Never echo a field: in a token written in the wrong order any of them
				// may be the secret.
				return nil, fmt.Errorf("API token %d: the scope field is not ingest, read, admin or a + combination of them; write it as name:scope[+scope]:secret", n)
			}
		}
		if list, ok := strings.CutPrefix(t.Secret, workflowListPrefix); ok {
			list, secret, ok := strings.Cut(list, ":")
			if !ok || secret == "" {
				return nil, fmt.Errorf("API token %q: its workflow list is not followed by a secret; write it as name:scope:workflows=first+second:secret", t.Name)
			}
			t.Secret = secret
			t.Workflows = []string{}
			for i, w := range strings.Split(list, "+") {
				if !workflowNameRE.MatchString(w) {
					return nil, fmt.Errorf("API token %q: workflow %d of its list is not a workflow name (letters, digits, '.', '_', '-'); write the list as workflows=first+second", t.Name, i+1)
				}
				if slices.Contains(t.Workflows, w) {
					return nil, fmt.Errorf("API token %q: its list names workflow %q twice", t.Name, w)
				}
				t.Workflows = append(t.Workflows, w)
			}
		}
		if len(t.Secret) < 16 {
			return nil, fmt.Errorf("API token %q: the secret is shorter than 16 characters", t.Name)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("API token %q: the name is given twice; each token needs its own", t.Name)
		}
		if secrets[t.Secret] {
			return nil, fmt.Errorf("API token %q: its secret is another token's too; give each token its own secret", t.Name)
		}
		names[t.Name], secrets[t.Secret] = true, true
		out = append(out, t)
	}
	return out, nil
}

// config is what a Server serves: the options NewHandler was given, with its defaults
// applied, and the client it reads and acts through (whose policy masks what it reads,
// the log lines and the problem documents).
type config struct {
	Options
	Client *onceflow.Client
}

// Metrics receives what the server measures. Its labels are workflow names and outcomes
// only.
type Metrics interface {
	// WebhookDelivery counts a delivery to a workflow's webhook: outcome is accepted,
	// duplicate (the event id was delivered before; nothing started), ignored (an event
	// type the workflow does not handle) or rejected (signature missing or invalid).
	WebhookDelivery(workflow, outcome string)
}

// Server is the API and the webhooks of one onceflow.Client, as an http.Handler; NewHandler
// returns it.
type Server struct {
	cfg config
	log *slog.Logger
	mux *http.ServeMux
	h   http.Handler // mux, each request logged

	hooksMu sync.RWMutex // guards hooks and byWorkflow, which SetReceivers replaces
	// hooks are the webhook receivers by name, and byWorkflow by their workflow's name.
	hooks      map[string]triggers.Receiver
	byWorkflow map[string]triggers.Receiver

	// digests are the SHA-256 digests of the tokens' secrets and callers what their
	// requests act as (onceflow.Caller), index by index with cfg.Tokens.
	digests [][sha256.Size]byte
	callers []onceflow.Caller

	// routes are the routes added with handleRoute, with the query parameters each takes.
	routes []route

	mu       sync.Mutex
	inFlight map[string]bool // workflow + "\x00" + key of starts under way

	// bodies is the budget of request-body bytes held in memory at once
	// (Options.MaxBodyMemory; readBody).
	bodies *bodybudget.Budget
}

// newServer returns a Server for cfg: the one place the routes are added.
func newServer(cfg config) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.MaxBodyMemory <= 0 {
		cfg.MaxBodyMemory = 8 * cfg.MaxBody
	}
	cfg.MaxBodyMemory = max(cfg.MaxBodyMemory, cfg.MaxBody)
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	if cfg.MaxBatchItems <= 0 {
		cfg.MaxBatchItems = DefaultMaxBatchItems
	}
	if cfg.MaxBatchBody <= 0 {
		cfg.MaxBatchBody = DefaultMaxBatchBody
	}
	cfg.MaxBatchBody = min(cfg.MaxBatchBody, cfg.MaxBodyMemory)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = slog.New(cfg.Client.LogHandler(cfg.Logger.Handler()))
	cfg.Tokens = slices.Clone(cfg.Tokens) // digests and callers follow it index by index
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), inFlight: map[string]bool{},
		bodies: bodybudget.New(cfg.MaxBodyMemory)}
	for _, t := range cfg.Tokens {
		s.digests = append(s.digests, sha256.Sum256([]byte(t.Secret)))
		s.callers = append(s.callers, t.Caller())
	}
	s.setReceivers(cfg.Receivers)
	s.handleFunc("GET /v1/openapi.json", "", nil, s.openAPI)
	s.handleFunc("GET /v1/workflows", ScopeIngest, nil, s.listWorkflows)
	s.handleFunc("POST /v1/workflows/{name}/runs", ScopeIngest, nil, s.startRun)
	s.handleFunc("POST /v1/workflows/{name}/runs:batch", ScopeIngest, nil, s.startBatch)
	s.handleFunc("GET /v1/runs/{id}", ScopeRead, nil, s.getRun)
	s.handleFunc("GET /v1/runs", ScopeRead, []string{"workflow", "state", "entity", "key", "limit", "before"}, s.listRuns)
	s.handleFunc("GET /v1/schedules", ScopeRead, []string{"next"}, s.listSchedules)
	s.reviewRoutes() // review queue, replay, audit and key answers (review.go, audit.go)
	s.adminRoutes()  // reload, cancel, pause (admin.go)
	s.handleFunc("POST /hooks/{name}", "", nil, s.webhook)
	s.handleFunc("GET /healthz", "", nil, func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.handleFunc("GET /readyz", "", nil, s.ready)
	if cfg.MetricsHandler != nil {
		s.handleRoute("GET /metrics", "", nil, cfg.MetricsHandler)
	}
	s.mux.Handle("/", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return newProblem(http.StatusNotFound, "not-found", "Not found", r.Method+" "+r.URL.Path+" is not part of the API")
	}))
	s.h = s.bodies.Hold(s.logRequests(s.mux)) // outside the log, which reads the route the mux sets on its request
	return s
}

// ServeHTTP serves the API and the webhooks, logging one line per request (see
// logRequests).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

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
		i := s.token(secret)
		if i < 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="onceflow", error="invalid_token"`)
			return newProblem(http.StatusUnauthorized, "unauthorized", "Invalid bearer token", "the token is not known")
		}
		tok := &s.cfg.Tokens[i]
		for _, sc := range tok.Scopes {
			if sc == scope || sc == ScopeAdmin {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, s.callers[i])))
				return nil
			}
		}
		return newProblem(http.StatusForbidden, "forbidden", "Insufficient scope", fmt.Sprintf("token %q lacks the %s scope", tok.Name, scope))
	})
}

type callerKey struct{}

// caller is the token a request authenticated with, as the client's access rule sees it.
func caller(r *http.Request) onceflow.Caller {
	by, _ := r.Context().Value(callerKey{}).(onceflow.Caller)
	return by
}

// actor names the request's token in the audit trail: token:NAME, as review actions and
// starts do.
func actor(r *http.Request) string {
	if by := caller(r); by.Token != "" {
		return by.Actor()
	}
	return "api"
}

// token returns the index in cfg.Tokens of the token for secret, or -1, comparing digests
// in constant time.
func (s *Server) token(secret string) int {
	got := sha256.Sum256([]byte(secret))
	found := -1
	for i := range s.digests {
		if subtle.ConstantTimeCompare(got[:], s.digests[i][:]) == 1 {
			found = i
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

// ready is GET /readyz: 503 while a webhook receiver cannot verify deliveries (its
// secrets are missing or malformed), the database cannot be reached or Options.Ready
// fails; otherwise 200 with where the engine's time comes from.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	if broken := s.brokenReceivers(); len(broken) > 0 {
		return newProblem(http.StatusServiceUnavailable, "not-ready", "Not ready",
			fmt.Sprintf("the signing secrets of webhook(s) %s are missing or malformed; set them and restart", strings.Join(broken, ", ")))
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Client.Ping(ctx); err != nil {
		s.log.Warn("readiness check failed", "error", err)
		return newProblem(http.StatusServiceUnavailable, "not-ready", "Not ready", "the database cannot be reached")
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(ctx); err != nil {
			s.log.Warn("readiness check failed", "error", err)
			return newProblem(http.StatusServiceUnavailable, "not-ready", "Not ready", err.Error())
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "clock": clockView(s.cfg.Client.ClockStatus())})
}

// clockView is what /readyz shows of the engine's clock: its source and, on the database's
// clock once measured, this machine's skew from it ("+90.0s").
func clockView(st onceflow.ClockStatus) map[string]string {
	v := map[string]string{"source": st.Source}
	if !st.Measured.IsZero() {
		v["skew"] = st.SkewText()
	}
	return v
}

// HTTPServer returns the http.Server that serves h as onceflow serve does: bounded header,
// body-read and write times, keep-alive connections closed after 30 idle seconds, headers
// of at most 64 KiB. Serve it on a LimitListener, which bounds the connections it holds.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
