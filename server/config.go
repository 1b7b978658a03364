package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/triggers"
)

// Config says what a Server runs. Store and Workflows are required; every other field has
// a useful zero value. A Config without API is a worker: it executes steps and consumes
// queues, and serves no API, webhooks or console.
type Config struct {
	// Store is the database (required). The caller opens it and closes it after the
	// server.
	Store store.Store
	// Workflows are workflow files, or directories of them (required).
	Workflows []string
	// Kinds are the step kinds the files may use (default: the standard kinds,
	// stdsteps.New with Store, Env, AllowNet, MaxRedirects and Funcs, and the server's
	// own listeners, which steps never reach). A program adds its own kinds to a registry
	// of its own (steps.Registry.Add) and gives it here; it closes that registry itself,
	// after the server.
	Kinds *steps.Registry
	// Triggers are the trigger kinds the files may use (default: the standard ones,
	// stdtriggers.New: webhook, queue with nats and amqp, schedule).
	Triggers *triggers.Registry
	// Funcs are the functions of the files' steps of kind go, by name (with the default
	// Kinds).
	Funcs map[string]onceflow.StepFunc
	// Env looks up the environment the files read: {env.NAME} in steps, webhook secrets,
	// broker URLs, the SMTP settings (default os.LookupEnv). Every variable a step reads
	// must be set when the server is built.
	Env func(string) (string, bool)
	// AllowNet opens internal address ranges to the files' http and e-mail steps, which
	// reach only public addresses by default — never the server's own listeners, whatever
	// AllowNet opens; MaxRedirects is how many redirects an http step follows (default
	// none), each hop checked.
	AllowNet     []netip.Prefix
	MaxRedirects int
	// Engine tunes the client: Workers, LeaseFor, ShutdownGrace, PollInterval, Clock and
	// the like. Its Store, Notify, Redact, Metrics and Logger are the server's own: the
	// server sets them.
	Engine onceflow.Config
	// MaxDepth caps how deeply a run's input may nest (request bodies, queue messages,
	// inputs: onceflowhttp.Options.MaxDepth, queue.Config.MaxDepth,
	// onceflow.Config.MaxInputDepth); default onceflowhttp.DefaultMaxDepth.
	MaxDepth int
	// RedactFields are personal-data fields masked in every workflow, besides each file's
	// redact list, such as "email" or "customer.name".
	RedactFields []string
	// Secrets are values never written anywhere, besides those the files make secret: the
	// API tokens' secrets, the database password.
	Secrets []string
	// Logger receives the server's log, with its secrets masked (default: nothing is
	// logged). Server.Logger returns it masked.
	Logger *slog.Logger
	// Metrics, when set, measures the server's work for Prometheus (package metrics).
	Metrics *MetricsConfig
	// API, when set, serves the JSON API, the webhook receivers, /healthz and /readyz
	// (package onceflowhttp). Without it the server is a worker.
	API *APIConfig
	// Console, when set, serves the web console (package onceflowui); it needs API.
	Console *ConsoleConfig
	// Middleware, when set, wraps the API's handler (the console's not).
	Middleware func(http.Handler) http.Handler
}

// APIConfig says where and to whom the API is served.
type APIConfig struct {
	// Listener is where the API is served; without one it is opened on Addr. With
	// neither, the API is not served by Run: Server.Handler serves it.
	Listener net.Listener
	Addr     string
	// Tokens are the bearer tokens the API accepts (onceflowhttp.ParseTokens); without
	// any, every /v1 request answers 401 and webhooks work.
	Tokens []onceflowhttp.Token
	// MaxBody caps request bodies (default 1 MiB).
	MaxBody int64
	// MaxConns caps the connections the API holds at once, idle keep-alive ones closed to
	// make room (default onceflowhttp.DefaultMaxConns: half the open-file limit). The
	// console's and the metrics' own listeners hold a quarter of it each, at most 256.
	MaxConns int
}

// ConsoleConfig says where the web console is served.
type ConsoleConfig struct {
	// Listener is where the console is served at /ui/; without one it is opened on Addr.
	// With neither, it is served at /ui/ beside the API.
	Listener net.Listener
	Addr     string
	// SecureCookies marks the session cookie Secure on plain HTTP (behind a TLS proxy).
	SecureCookies bool
	// SessionTTL is how long a sign-in lasts at most (default 8h), SessionIdle how long it
	// lasts without a request (default 1h). Sessions are kept in the store: every process
	// sharing the database sees one end.
	SessionTTL  time.Duration
	SessionIdle time.Duration
	// OIDC, when set, lets people sign in with OpenID Connect, as themselves
	// (onceflowui.Config.OIDC); NoTokenSignIn refuses signing in with an API token then.
	OIDC          *onceflowui.OIDC
	NoTokenSignIn bool
}

// MetricsConfig says where the metrics are served.
type MetricsConfig struct {
	// Listener is where GET /metrics is served; without one it is opened on Addr. With
	// neither, it is served at /metrics on the API, which it then needs.
	Listener net.Listener
	Addr     string
}

// ConfigError is a mistake in a Config, such as a field that is required or two that do
// not fit: Field names the Config field, Problem says what to change.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("server: Config.%s: %s", e.Field, e.Problem) }
