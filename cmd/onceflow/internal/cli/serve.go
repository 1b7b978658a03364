package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/stdsteps"
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
ticks of the files' schedules, and executes steps with --workers workers until it receives
SIGINT or SIGTERM.

API tokens come from ONCEFLOW_API_TOKENS ("name:scope[+scope]:secret", comma-separated;
scopes ingest, read and admin); webhook secrets and {env.NAME} values from the environment;
e-mail steps use ONCEFLOW_SMTP_ADDR, ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD and
ONCEFLOW_SMTP_TLS. HTTP and e-mail steps reach only public addresses unless --allow-net
opens a range (for example --allow-net 127.0.0.1/32 for services on this machine), and never
the addresses serve itself listens on (--addr, --ui-addr, --metrics-addr).

The API holds at most --max-conns connections at once (by default half the process's
open-file limit), closing idle keep-alive connections to make room, and the request bodies
it holds in memory together are bounded (8 MiB): a request that finds no room is answered
503 with Retry-After.

On SIGHUP, and on POST /v1/admin/reload (scope admin), serve reads the workflow files again:
if every file is valid the new definitions replace the running ones at once; otherwise the
running ones stay and every problem is logged (and listed in the API's answer).`,
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
	// maxDepth caps the nesting of request bodies, queue messages and runs' inputs
	// (onceflowhttp.Options.MaxDepth, queuetrigger.Config.MaxDepth,
	// onceflow.Config.MaxInputDepth).
	maxDepth int
	// ui, when set, is the web console served at /ui/ beside the API.
	ui http.Handler
	// triggers are the queue consumers serve runs.
	triggers []queueTrigger
	// kinds are the step kinds the files are read and built against; close closes the
	// connections of their steps.
	kinds *steps.Registry
	// reload reloads the workflow files (reload.go).
	reload reloadState
	// listeners are the addresses the app listens on, which its steps never reach.
	listeners *listeners
	// maxConns caps the connections of the API's listener (0: the default).
	maxConns int
}

// close releases the connections the app's steps opened.
func (a *app) close() { _ = a.kinds.Close() }

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
	// clock, when set, is given the app's client, whose clock it then reads.
	clock *clientClock
	// maxDepth caps the nesting of runs' inputs (--max-json-depth).
	maxDepth int
	// maxConns caps the connections of the API's listener (--max-conns).
	maxConns int
}

// clientClock reads the clock of a client built after what reads it (the metrics, which
// the client's configuration holds): the engine's time, which is the database's clock on
// PostgreSQL, so that every process counts the same steps due. time.Now until the client
// exists.
type clientClock struct {
	c atomic.Pointer[onceflow.Client]
}

func (k *clientClock) Now() time.Time {
	if c := k.c.Load(); c != nil {
		return c.Now()
	}
	return time.Now()
}

// newMetrics returns the metrics of serve and worker on st, and the clock to give their
// client.
func newMetrics(st store.Store, log *slog.Logger) (*metrics.Metrics, *clientClock) {
	k := &clientClock{}
	return metrics.New(metrics.Config{Store: st, Logger: log, Now: k.Now}), k
}

// appConfig is the configuration serve and worker build their app with: f's workflow,
// step and engine flags, on st.
func (f *serveFlags) appConfig(st store.Store, log *slog.Logger, secrets []string, m *metrics.Metrics, clock *clientClock) appConfig {
	return appConfig{store: st, workflows: f.workflows, allowNet: f.allowNet, redirects: f.maxRedirects, workers: f.workers, log: log,
		redact: f.redact, secrets: secrets, metrics: m, clock: clock, tune: f.tuneEngine, maxDepth: f.maxDepth, maxConns: f.maxConns}
}

// newApp loads and builds the workflow files and registers them on a new client.
func newApp(c appConfig) (*app, error) {
	if c.workflows == "" {
		return nil, usagef("--workflows is required: a workflow YAML file or a directory of them")
	}
	if c.env == nil {
		c.env = os.LookupEnv
	}
	var allow []netip.Prefix
	for _, s := range c.allowNet {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, usagef("--allow-net %q is not a CIDR range such as 127.0.0.1/32", s)
		}
		allow = append(allow, p)
	}
	own := &listeners{}
	kinds, err := stdsteps.New(stdsteps.Options{Store: c.store, AllowNet: allow, MaxRedirects: c.redirects, Env: c.env, Funcs: c.funcs,
		Listeners: own.Addrs})
	if err != nil {
		return nil, err
	}
	built := false
	defer func() {
		if !built {
			_ = kinds.Close()
		}
	}()
	reader := &flowfile.Reader{Kinds: kinds}
	defs, err := reader.Load(c.workflows)
	if err != nil {
		return nil, err
	}
	// Every {env.NAME} a step reads must be set now, not found missing by the first run.
	var missing flowfile.Problems
	for _, d := range defs {
		missing = append(missing, d.CheckEnv(c.env)...)
	}
	if len(missing) > 0 {
		return nil, missing
	}
	egressPolicy := &egress.Policy{Allow: allow, MaxRedirects: c.redirects, Own: own.Addrs}
	build := flowfile.NewBuilder(flowfile.BuildOptions{Store: c.store, Redact: c.redact, Env: c.env, HTTPClient: egressPolicy.Client(0)})
	red, policy, err := c.redaction(defs)
	if err != nil {
		return nil, err
	}
	wfs, err := build.Workflows(defs)
	if err != nil {
		return nil, err
	}
	notify, err := build.Notify(defs)
	if err != nil {
		return nil, err
	}
	cfg := onceflow.Config{Store: c.store, Workers: c.workers, Logger: c.log, Notify: notify, Redact: red, MaxInputDepth: c.maxDepth}
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
	if c.clock != nil {
		c.clock.c.Store(client)
	}
	for _, w := range wfs {
		if err := client.Register(w); err != nil {
			return nil, err
		}
	}
	if err := flowfile.RegisterSchedules(client, defs, build); err != nil {
		return nil, err
	}
	a := &app{store: c.store, client: client, defs: defs, log: maskedLogger(c.log, policy), env: c.env, redact: policy, metrics: c.metrics, kinds: kinds,
		maxDepth: c.maxDepth, listeners: own, maxConns: c.maxConns}
	a.reload = newReloadState(c.workflows, reader, build, defs, notify)
	if err := a.registerRejects(); err != nil {
		return nil, err
	}
	built = true
	return a, nil
}

// run serves the API on ln and executes steps until ctx ends, then shuts both down. ln
// holds at most the API's connection limit at once, and the app's steps never reach it.
func (a *app) run(ctx context.Context, ln net.Listener, tokens []onceflowhttp.Token) error {
	h, err := a.handler(tokens)
	if err != nil {
		ln.Close()
		return err
	}
	a.listeners.add(ln)
	maxConns, _ := connLimits(a.maxConns)
	hs := onceflowhttp.HTTPServer(a.withConsole(h))
	engine := make(chan error, 1)
	go func() { engine <- a.client.Serve(ctx) }()
	consumers := make(chan error, len(a.triggers))
	for _, t := range a.triggers {
		go func() { consumers <- t.Run(ctx) }()
	}
	served := make(chan error, 1)
	go func() { served <- serveLimited(hs, ln, maxConns) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = hs.Shutdown(shutdown)
	for range a.triggers {
		err = errors.Join(err, <-consumers)
	}
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
	g.log = log
	st, loc, err := g.openStore(ctx, false)
	if err != nil {
		return err
	}
	defer st.Close()
	m, clock := newMetrics(st, log)
	a, err := newApp(f.appConfig(st, log, processSecrets(loc, tokens), m, clock))
	if err != nil {
		return err
	}
	defer a.close()
	log = a.log
	// A token whose list names a workflow it cannot start, or a file naming a token that
	// does not exist, is refused before anything listens (NewHandler checks it again).
	callers := make([]onceflow.Caller, len(tokens))
	for i, t := range tokens {
		callers[i] = t.Caller()
	}
	if err := a.client.CheckCallers(callers); err != nil {
		return fmt.Errorf("ONCEFLOW_API_TOKENS and the workflow files do not fit: %w", err)
	}
	// A webhook without a usable secret would answer every delivery 500: refuse to start,
	// as for incomplete SMTP settings.
	if err := onceflowhttp.CheckWebhooks(a.defs, a.env); err != nil {
		return err
	}
	if f.metricsAddr == "" {
		a.metricsOnAPI = true
	} else {
		_, side := connLimits(f.maxConns)
		stop, err := serveMetrics(ctx, a.listeners, f.metricsAddr, side, m, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	stopUI, err := a.startConsole(ctx, f, tokens)
	if err != nil {
		return err
	}
	defer stopUI()
	if a.triggers, err = a.newTriggers(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr) // run adds it to a.listeners
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		log.Warn("no API tokens configured: the /v1 API answers 401 until ONCEFLOW_API_TOKENS is set; webhooks work")
	}
	a.reloadOnHangup(ctx)
	log.Info("onceflow serving", "addr", "http://"+ln.Addr().String(), "db", loc.URL(), "workflows", a.client.Workflows())
	return a.run(ctx, ln, tokens)
}
