package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

type serveFlags struct {
	addr         string
	workflows    string
	allowNet     []string
	maxRedirects int
	workers      int
	logLevel     string
	metricsAddr  string
	redact       []string
	maxDepth     int
	// maxConns caps the API's connections (--max-conns; 0: onceflowhttp.DefaultMaxConns).
	maxConns int
	// The web console (console.go).
	uiAddr          string
	uiSecureCookies bool
	uiSession       time.Duration
	uiIdle          time.Duration
	oidc            consoleOIDCFlags
	// lease and grace tune the engine (Config.LeaseFor, Config.ShutdownGrace).
	lease, grace time.Duration
}

// tuneEngine applies the engine's duration flags to cfg.
func (f *serveFlags) tuneEngine(cfg *onceflow.Config) {
	cfg.LeaseFor, cfg.ShutdownGrace = f.lease, f.grace
}

func newServeCommand(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API and webhooks, and execute workflow steps",
		Long: `serve loads the workflow files of --workflows, then serves the JSON API
(POST /v1/workflows/{name}/runs, GET /v1/workflows, GET /v1/runs, GET /v1/runs/{id},
GET /v1/schedules, the review queue; GET /v1/openapi.json describes it all), the webhook
endpoints the files declare (/hooks/{name}), /healthz, /readyz, Prometheus metrics at
/metrics (or on --metrics-addr) and the web console at /ui/ (or on --ui-addr), fires the
ticks of the files' schedules, consumes the queues the files declare (as worker does), and
executes steps with --workers workers until it receives SIGINT or SIGTERM.

API tokens come from ONCEFLOW_API_TOKENS ("name:scope[+scope]:secret", comma-separated;
scopes ingest, read and admin); webhook secrets and {env.NAME} values from the environment;
e-mail steps use ONCEFLOW_SMTP_ADDR, ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD and
ONCEFLOW_SMTP_TLS. People sign in to the console with a token of scope read or admin, or,
with --ui-oidc-issuer, at an OpenID Connect provider (client secret from
ONCEFLOW_OIDC_CLIENT_SECRET), with the roles --ui-oidc-roles gives their --ui-oidc-roles-claim. HTTP and e-mail steps reach only public addresses unless --allow-net
opens a range (for example --allow-net 127.0.0.1/32 for services on this machine), and never
the addresses serve itself listens on (--addr, --ui-addr, --metrics-addr).

The API holds at most --max-conns connections at once (by default half the process's
open-file limit), closing idle keep-alive connections to make room, and the request bodies
it holds in memory together are bounded (8 MiB): a request that finds no room is answered
503 with Retry-After.

On SIGHUP, and on POST /v1/admin/reload (scope admin), serve reads the workflow files again:
if every file is valid the new definitions replace the running ones at once; otherwise the
running ones stay and every problem is logged (and listed in the API's answer). A change to
a file's queue: or notify: settings, or a new environment variable, needs a restart.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), g, f)
		},
	}
	cmd.Flags().StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to listen on")
	cmd.Flags().IntVar(&f.maxConns, "max-conns", 0,
		"most connections the API holds open at once; more wait until one closes, and idle ones are closed to make room (default: half the open-file limit, at most 4096; --ui-addr and --metrics-addr listeners get a quarter of it each, at most 256)")
	stepFlags(cmd, &f)
	consoleFlags(cmd, &f)
	return cmd
}

// stepFlags are the flags of the commands that execute steps.
func stepFlags(cmd *cobra.Command, f *serveFlags) {
	cmd.Flags().StringVar(&f.workflows, "workflows", "", "a workflow YAML file, or a directory of them (required)")
	cmd.Flags().StringSliceVar(&f.allowNet, "allow-net", nil, "CIDR ranges steps may reach although internal (repeatable)")
	cmd.Flags().IntVar(&f.maxRedirects, "max-redirects", 0, "redirects an http step follows (each hop is checked)")
	cmd.Flags().IntVar(&f.workers, "workers", 10, "steps executed at once")
	cmd.Flags().IntVar(&f.maxDepth, "max-json-depth", onceflowhttp.DefaultMaxDepth,
		"how deeply a run's input may nest objects and lists: deeper request bodies are refused with a 400, deeper queue messages kept for review, deeper fan-out items not started")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().Var(&duration.Flag{D: &f.lease, Positive: true}, "lease", "how long a claimed step stays this worker's without a heartbeat (default 30s)")
	cmd.Flags().Var(&duration.Flag{D: &f.grace, Positive: true}, "shutdown-grace", "how long running steps may finish after SIGINT or SIGTERM (default 30s)")
	observeFlags(cmd, f)
}

// serverConfig is the configuration serve and worker build their server with: f's
// workflow, step, engine and redaction flags, on st. The caller adds the API, the console
// and the metrics.
func (f *serveFlags) serverConfig(g *globals, st store.Store, log *slog.Logger, secrets []string) (server.Config, error) {
	if f.workflows == "" {
		return server.Config{}, usagef("--workflows is required: a workflow YAML file or a directory of them")
	}
	var allow []netip.Prefix
	for _, s := range f.allowNet {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return server.Config{}, usagef("--allow-net %q is not a CIDR range such as 127.0.0.1/32", s)
		}
		allow = append(allow, p)
	}
	cfg := server.Config{Store: st, Workflows: []string{f.workflows}, AllowNet: allow, MaxRedirects: f.maxRedirects, MaxDepth: f.maxDepth,
		RedactFields: f.redact, Secrets: secrets, Logger: log, Middleware: g.middleware,
		Engine: onceflow.Config{Workers: f.workers}}
	f.tuneEngine(&cfg.Engine)
	return cfg, nil
}

// newServer builds the server of cfg, its mistakes said in terms of the command's flags.
func newServer(ctx context.Context, cfg server.Config) (*server.Server, error) {
	srv, err := server.New(ctx, cfg)
	var ce *server.ConfigError
	if errors.As(err, &ce) {
		flag, ok := configFlags[ce.Field]
		switch {
		case !ok:
			return nil, err
		case strings.HasSuffix(ce.Field, ".Addr"):
			return nil, fmt.Errorf("%s: %s", flag, ce.Problem) // the address could not be listened on
		}
		return nil, usagef("%s: %s", flag, ce.Problem)
	}
	return srv, err
}

// configFlags are the flags of the server.Config fields.
var configFlags = map[string]string{"Workflows": "--workflows", "RedactFields": "--redact-fields", "API.Addr": "--addr",
	"Console.Addr": "--ui-addr", "Metrics.Addr": "--metrics-addr"}

func serve(ctx context.Context, g *globals, f serveFlags) error {
	log, err := newLogger(g, f.logLevel)
	if err != nil {
		return err
	}
	tokens, err := onceflowhttp.ParseTokens(os.Getenv("ONCEFLOW_API_TOKENS"))
	if err != nil {
		return err
	}
	g.log = log
	st, loc, err := g.openStore(ctx, false)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg, err := f.serverConfig(g, st, log, processSecrets(loc, tokens))
	if err != nil {
		return err
	}
	cfg.API = &server.APIConfig{Addr: f.addr, Tokens: tokens, MaxConns: f.maxConns}
	cfg.Metrics = &server.MetricsConfig{Addr: f.metricsAddr} // "": at /metrics on the API
	if cfg.Console, err = f.console(); err != nil {
		return err
	}
	if o := cfg.Console; o != nil && o.OIDC != nil {
		cfg.Secrets = append(cfg.Secrets, o.OIDC.ClientSecret)
	}
	srv, err := newServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	log = srv.Logger()
	if len(tokens) == 0 {
		log.Warn("no API tokens configured: the /v1 API answers 401 until ONCEFLOW_API_TOKENS is set; webhooks work")
	}
	reloadOnHangup(ctx, srv, strings.Join(cfg.Workflows, ", "))
	log.Info("onceflow serving", "addr", "http://"+srv.Addr("api").String(), "db", loc.URL(), "workflows", srv.Client().Workflows())
	return srv.Run(ctx)
}
