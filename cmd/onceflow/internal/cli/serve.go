package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/onceflowhttp"
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
}

func newServeCommand(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API and webhooks, and execute workflow steps",
		Long: `serve loads the workflow files of --workflows, then serves the JSON API
(POST /v1/workflows/{name}/runs, GET /v1/runs, GET /v1/runs/{id}), the webhook endpoints the
files declare (/hooks/{name}), /healthz, /readyz and Prometheus metrics at /metrics (or on
--metrics-addr), and executes steps with --workers workers until it receives SIGINT or
SIGTERM.

API tokens come from ONCEFLOW_API_TOKENS ("name:scope[+scope]:secret", comma-separated;
scopes ingest and admin); webhook secrets and {env.NAME} values from the environment;
e-mail steps use ONCEFLOW_SMTP_ADDR, ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD and
ONCEFLOW_SMTP_TLS. HTTP and e-mail steps reach only public addresses unless --allow-net
opens a range (for example --allow-net 127.0.0.1/32 for services on this machine).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), g, f)
		},
	}
	cmd.Flags().StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to listen on")
	stepFlags(cmd, &f)
	return cmd
}

// stepFlags are the flags of the commands that execute steps.
func stepFlags(cmd *cobra.Command, f *serveFlags) {
	cmd.Flags().StringVar(&f.workflows, "workflows", "", "directory of workflow YAML files (required)")
	cmd.Flags().StringSliceVar(&f.allowNet, "allow-net", nil, "CIDR ranges steps may reach although internal (repeatable)")
	cmd.Flags().IntVar(&f.maxRedirects, "max-redirects", 0, "redirects an http step follows (each hop is checked)")
	cmd.Flags().IntVar(&f.workers, "workers", 10, "steps executed at once")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	observeFlags(cmd, f)
}

// app is a loaded set of workflows on a client, ready to serve.
type app struct {
	store  store.Store
	client *onceflow.Client
	defs   []*flowfile.Definition
	log    *slog.Logger
	env    func(string) (string, bool)
	// redact masks secrets and personal data in what the server logs and shows.
	redact *redact.Policy
	// metrics, when set, counts the app's work; metricsOnAPI serves it at /metrics.
	metrics      *metrics.Metrics
	metricsOnAPI bool
}

// appConfig says how to assemble an app.
type appConfig struct {
	store     store.Store
	workflows string
	allowNet  []string
	redirects int
	workers   int
	log       *slog.Logger
	env       func(string) (string, bool)
	funcs     map[string]onceflow.StepFunc
	tune      func(*onceflow.Config)
	// redact lists personal-data fields masked in every workflow (--redact-fields).
	redact []string
	// secrets are values never written anywhere, besides those newApp finds itself (the
	// API tokens, for serve).
	secrets []string
	// metrics, when set, receives the engine's measurements.
	metrics *metrics.Metrics
}

// newApp loads and builds the workflow files and registers them on a new client.
func newApp(c appConfig) (*app, error) {
	if c.workflows == "" {
		return nil, usagef("--workflows is required: a directory of workflow YAML files")
	}
	defs, err := flowfile.LoadDir(c.workflows)
	if err != nil {
		return nil, err
	}
	var allow []netip.Prefix
	for _, s := range c.allowNet {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, usagef("--allow-net %q is not a CIDR range such as 127.0.0.1/32", s)
		}
		allow = append(allow, p)
	}
	if c.env == nil {
		c.env = os.LookupEnv
	}
	deps, err := flowfile.StandardDeps(flowfile.Options{Store: c.store, AllowNet: allow, MaxRedirects: c.redirects, Env: c.env, Funcs: c.funcs})
	if err != nil {
		return nil, err
	}
	deps.Redact = c.redact
	red, policy, err := c.redaction(defs)
	if err != nil {
		return nil, err
	}
	wfs, err := flowfile.Build(defs, deps)
	if err != nil {
		return nil, err
	}
	notify, err := flowfile.BuildNotify(defs, deps)
	if err != nil {
		return nil, err
	}
	cfg := onceflow.Config{Store: c.store, Workers: c.workers, Logger: c.log, Notify: notify, Redact: red}
	if c.metrics != nil {
		cfg.Metrics = c.metrics
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	client, err := onceflow.New(cfg)
	if err != nil {
		return nil, err
	}
	for _, w := range wfs {
		if err := client.Register(w); err != nil {
			return nil, err
		}
	}
	if err := registerSchedules(client, defs, deps); err != nil {
		return nil, err
	}
	return &app{store: c.store, client: client, defs: defs, log: maskedLogger(c.log, policy), env: c.env, redact: policy, metrics: c.metrics}, nil
}

// run serves the API on ln and executes steps until ctx ends, then shuts both down.
func (a *app) run(ctx context.Context, ln net.Listener, tokens []onceflowhttp.Token) error {
	hs := onceflowhttp.HTTPServer(a.handler(tokens))
	engine := make(chan error, 1)
	go func() { engine <- a.client.Serve(ctx) }()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := hs.Shutdown(shutdown)
	return errors.Join(err, <-engine)
}

func serve(ctx context.Context, g *globals, f serveFlags) error {
	log, err := newLogger(g, f.logLevel)
	if err != nil {
		return err
	}
	tokens, err := onceflowhttp.ParseTokens(os.Getenv("ONCEFLOW_API_TOKENS"))
	if err != nil {
		return err
	}
	st, loc, err := g.openStore(ctx, false)
	if err != nil {
		return err
	}
	defer st.Close()
	m := metrics.New(metrics.Config{Store: st, Logger: log})
	a, err := newApp(appConfig{store: st, workflows: f.workflows, allowNet: f.allowNet, redirects: f.maxRedirects, workers: f.workers, log: log,
		redact: f.redact, secrets: processSecrets(loc, tokens), metrics: m})
	if err != nil {
		return err
	}
	log = a.log
	if f.metricsAddr == "" {
		a.metricsOnAPI = true
	} else {
		stop, err := serveMetrics(ctx, f.metricsAddr, m, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		log.Warn("no API tokens configured: the /v1 API answers 401 until ONCEFLOW_API_TOKENS is set; webhooks work")
	}
	log.Info("onceflow serving", "addr", "http://"+ln.Addr().String(), "db", loc.URL(), "workflows", a.client.Workflows())
	return a.run(ctx, ln, tokens)
}
