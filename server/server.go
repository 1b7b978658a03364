package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/emailstep"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// Server is a running onceflow: a client with the workflows of the files, their triggers,
// and, as configured, the API, the console and the metrics. New builds it, Run runs it.
type Server struct {
	cfg    Config
	client *onceflow.Client
	log    *slog.Logger
	// kinds are the step kinds the files are read and built against (closed by Close
	// when the server made them), reader and builder what reads and builds the files.
	kinds    *steps.Registry
	ownKinds bool
	reader   *flowfile.Reader
	builder  *flowfile.Builder

	metrics *metrics.Metrics
	api     *onceflowhttp.Server
	handler http.Handler // the API, with the console at /ui/ when it is served there
	console http.Handler // the console, when served on a listener of its own

	// listeners are the opened listeners by name ("api", "console", "metrics"), each
	// holding at most maxConns connections; Run serves them, Close closes them if Run did
	// not. own are their addresses, which the steps never reach.
	listeners map[string]net.Listener
	handlers  map[string]http.Handler
	maxConns  map[string]int
	own       atomic.Pointer[[]net.Addr]
	ran       atomic.Bool

	// consumers are the queue consumers Run runs.
	consumers []triggers.Consumer
	reload    reloadState
}

// New builds the server of cfg: it reads and checks the workflow files against the step
// kinds (every {env.NAME} a step reads must be set), builds their steps and triggers, creates the client and
// registers the workflows, their schedules and their triggers' companion workflows,
// builds the API and the console, and opens the listeners. Nothing runs until Run. An
// error that is, or wraps, flowfile.Problems lists what to fix in the files; a
// *ConfigError a mistake in cfg.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, &ConfigError{Field: "Store", Problem: "is required: open a store (store/sqlite, store/postgres) first"}
	}
	if len(cfg.Workflows) == 0 {
		return nil, &ConfigError{Field: "Workflows", Problem: "is required: a workflow YAML file or a directory of them"}
	}
	if cfg.Console != nil && cfg.API == nil {
		return nil, &ConfigError{Field: "Console", Problem: "needs API: the console signs people in with the API's tokens"}
	}
	if m := cfg.Metrics; m != nil && m.Listener == nil && m.Addr == "" && cfg.API == nil {
		return nil, &ConfigError{Field: "Metrics", Problem: "has no address and there is no API to serve it on: set Metrics.Addr"}
	}
	if cfg.Env == nil {
		cfg.Env = os.LookupEnv
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = onceflowhttp.DefaultMaxDepth
	}
	s := &Server{cfg: cfg, listeners: map[string]net.Listener{}, handlers: map[string]http.Handler{}, maxConns: map[string]int{}}
	var err error
	s.kinds = cfg.Kinds
	if s.kinds == nil {
		// The steps never reach the server's own listeners (opened below; asked at each
		// connection), whatever AllowNet opens.
		kinds, err := stdsteps.New(stdsteps.Options{Store: cfg.Store, AllowNet: cfg.AllowNet, MaxRedirects: cfg.MaxRedirects, Env: cfg.Env,
			Funcs: cfg.Funcs, Listeners: s.ownAddrs})
		if err != nil {
			return nil, err
		}
		s.kinds, s.ownKinds = kinds, true
	}
	trigs := cfg.Triggers
	if trigs == nil {
		if trigs, err = stdtriggers.New(); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.reader = &flowfile.Reader{Kinds: s.kinds, Triggers: trigs}
	egressPolicy := &egress.Policy{Allow: cfg.AllowNet, MaxRedirects: cfg.MaxRedirects, Own: s.ownAddrs}
	s.builder = flowfile.NewBuilder(flowfile.BuildOptions{Store: cfg.Store, Redact: cfg.RedactFields, Env: cfg.Env, HTTPClient: egressPolicy.Client(0)})
	defs, err := s.reader.Load(cfg.Workflows...)
	if err != nil {
		s.Close()
		return nil, err
	}
	// Every {env.NAME} a step reads must be set now, not found missing by the first run.
	var missing flowfile.Problems
	for _, d := range defs {
		missing = append(missing, d.CheckEnv(cfg.Env)...)
	}
	if len(missing) > 0 {
		s.Close()
		return nil, missing
	}
	if err := s.build(ctx, defs); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// build does New's work once the steps' dependencies exist; New closes them on an error.
func (s *Server) build(ctx context.Context, defs []*flowfile.Definition) error {
	cfg := s.cfg
	red, err := s.redaction(defs)
	if err != nil {
		return err
	}
	wfs, err := s.builder.Workflows(defs)
	if err != nil {
		return err
	}
	notify, err := s.builder.Notify(defs)
	if err != nil {
		return err
	}
	ec := cfg.Engine
	ec.Store, ec.Notify, ec.Redact, ec.Logger = cfg.Store, notify, red, cfg.Logger
	if ec.MaxInputDepth <= 0 {
		ec.MaxInputDepth = cfg.MaxDepth
	}
	clock := &clientClock{}
	if cfg.Metrics != nil {
		// The metrics count the steps due by the client's clock (the database's on
		// PostgreSQL), so that every process counts the same; the client is built after.
		s.metrics = metrics.New(metrics.Config{Store: cfg.Store, Logger: cfg.Logger, Now: clock.Now})
		ec.Metrics = s.metrics
	}
	client, err := onceflow.New(ec)
	if err != nil {
		return err
	}
	clock.c.Store(client)
	s.client = client
	// What the server logs is masked with the client's secrets, as the engine's own log.
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.log = slog.New(client.LogHandler(log.Handler()))
	for _, w := range wfs {
		if err := client.Register(w); err != nil {
			return err
		}
	}
	if err := flowfile.RegisterSchedules(client, defs, s.builder); err != nil {
		return err
	}
	set, err := s.triggers(defs)
	if err != nil {
		return err
	}
	for _, w := range set.companions(client) {
		if err := client.Register(w); err != nil {
			return err
		}
	}
	s.consumers = set.consumers
	// A webhook without a usable secret would answer every delivery 500: refuse to serve
	// it, as for incomplete SMTP settings. A worker serves no webhooks.
	if cfg.API != nil {
		if err := s.checkReceivers(set.receivers); err != nil {
			return err
		}
	}
	s.reload = newReloadState(cfg.Workflows, defs, notify, set.all)
	s.reload.receivers = set.receivers
	if cfg.API != nil {
		if err := s.buildAPI(set.receivers); err != nil {
			return err
		}
	}
	return s.listen(ctx)
}

// clientClock reads the clock of a client built after what reads it (the metrics, which
// the client's configuration holds): the engine's time. time.Now until the client exists.
type clientClock struct {
	c atomic.Pointer[onceflow.Client]
}

func (k *clientClock) Now() time.Time {
	if c := k.c.Load(); c != nil {
		return c.Now()
	}
	return time.Now()
}

// buildAPI builds the API, and the console beside it or on its own.
func (s *Server) buildAPI(receivers []triggers.Receiver) error {
	api := s.cfg.API
	// A token whose list names a workflow it cannot start, or a file naming a token that
	// does not exist, is refused before anything listens.
	callers := make([]onceflow.Caller, len(api.Tokens))
	for i, t := range api.Tokens {
		callers[i] = t.Caller()
	}
	if err := s.client.CheckCallers(callers); err != nil {
		return fmt.Errorf("the API tokens and the workflow files do not fit: %w", err)
	}
	opts := onceflowhttp.Options{Receivers: receivers, Tokens: api.Tokens, Logger: s.log, MaxBody: api.MaxBody, MaxDepth: s.cfg.MaxDepth,
		Reload: s.apiReload}
	if len(s.consumers) > 0 {
		opts.Ready = s.consumersReady
	}
	if s.metrics != nil {
		opts.Metrics = s.metrics
		if m := s.cfg.Metrics; m.Listener == nil && m.Addr == "" {
			opts.MetricsHandler = s.metrics.Handler()
		}
	}
	h, err := onceflowhttp.NewHandler(s.client, opts)
	if err != nil {
		return err
	}
	s.api = h
	s.handler = h
	if s.cfg.Middleware != nil {
		s.handler = s.cfg.Middleware(h)
	}
	s.reload.callers = callers
	if c := s.cfg.Console; c != nil {
		ui, err := onceflowui.New(onceflowui.Config{Client: s.client, Tokens: api.Tokens, Logger: s.log, SecureCookies: c.SecureCookies,
			SessionTTL: c.SessionTTL, SessionIdle: c.SessionIdle, OIDC: c.OIDC, NoTokenSignIn: c.NoTokenSignIn})
		if err != nil && (c.OIDC != nil || c.NoTokenSignIn) {
			return &ConfigError{Field: "Console.OIDC", Problem: strings.TrimPrefix(err.Error(), "onceflowui: ")}
		}
		if err != nil {
			return err
		}
		if c.Listener == nil && c.Addr == "" {
			mux := http.NewServeMux()
			mux.Handle("/ui/", ui)
			mux.Handle("/ui", ui)
			mux.Handle("/", s.handler)
			s.handler = mux
		} else {
			s.console = ui
		}
	}
	return nil
}

// ownAddrs are the addresses the server listens on.
func (s *Server) ownAddrs() []net.Addr {
	if p := s.own.Load(); p != nil {
		return *p
	}
	return nil
}

// connLimits are the connections each listener may hold at once: the API's
// (APIConfig.MaxConns, by default onceflowhttp.DefaultMaxConns: half the open-file
// limit), and the console's and the metrics' own listeners', a quarter of it each, at most
// 256 — together below the file limit, with room left for the database pool and the
// steps' connections.
func (s *Server) connLimits() (api, side int) {
	if a := s.cfg.API; a != nil {
		api = a.MaxConns
	}
	if api <= 0 {
		api = onceflowhttp.DefaultMaxConns()
	}
	return api, min(256, max(4, api/4))
}

// listen opens the listeners the configuration asks for.
func (s *Server) listen(ctx context.Context) error {
	apiConns, sideConns := s.connLimits()
	open := func(name string, ln net.Listener, addr string, h http.Handler) error {
		if ln == nil {
			if addr == "" {
				return nil
			}
			var err error
			if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", addr); err != nil {
				return &ConfigError{Field: listenField[name], Problem: err.Error()}
			}
		}
		s.listeners[name], s.handlers[name], s.maxConns[name] = ln, h, sideConns
		if name == "api" {
			s.maxConns[name] = apiConns
		}
		own := append(s.ownAddrs(), ln.Addr())
		s.own.Store(&own)
		return nil
	}
	if a := s.cfg.API; a != nil {
		if err := open("api", a.Listener, a.Addr, s.handler); err != nil {
			return err
		}
	}
	if c := s.cfg.Console; c != nil && s.console != nil {
		if err := open("console", c.Listener, c.Addr, s.console); err != nil {
			return err
		}
		s.log.Info("serving the web console", "addr", "http://"+s.listeners["console"].Addr().String()+"/ui/")
	}
	if m := s.cfg.Metrics; m != nil && (m.Listener != nil || m.Addr != "") {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.metrics.Handler())
		if err := open("metrics", m.Listener, m.Addr, mux); err != nil {
			return err
		}
		s.log.Info("serving metrics", "addr", "http://"+s.listeners["metrics"].Addr().String()+"/metrics")
	}
	return nil
}

// listenField names the Config field of each listener, for its errors.
var listenField = map[string]string{"api": "API.Addr", "console": "Console.Addr", "metrics": "Metrics.Addr"}

// Client is the server's client: its workflows are the files', with their companions.
func (s *Server) Client() *onceflow.Client { return s.client }

// Logger is the server's logger, the secrets of its files and Config.Secrets masked.
func (s *Server) Logger() *slog.Logger { return s.log }

// Handler is the API (with the console at /ui/ when it is served there), wrapped by
// Config.Middleware; nil for a worker.
func (s *Server) Handler() http.Handler { return s.handler }

// Addr is the address of the listener name ("api", "console", "metrics"), or nil when
// that one is not served on a listener of its own.
func (s *Server) Addr(name string) net.Addr {
	if ln, ok := s.listeners[name]; ok {
		return ln.Addr()
	}
	return nil
}

// Run executes steps, runs the queue consumers and serves the listeners until ctx ends
// (or a listener fails), then stops them: the HTTP servers first (their requests get 10
// s), then the consumers, then the engine, whose running steps get
// onceflow.Config.ShutdownGrace. It returns what went wrong, joined. Run is called once.
func (s *Server) Run(ctx context.Context) error {
	if s.ran.Swap(true) {
		return errors.New("server: Run was called twice")
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	engine := make(chan error, 1)
	go func() { engine <- s.client.Serve(ctx) }()
	consumers := make(chan error, len(s.consumers))
	for _, c := range s.consumers {
		go func() { consumers <- c.Run(ctx, s.client) }()
	}
	names := make([]string, 0, len(s.listeners))
	for name := range s.listeners {
		names = append(names, name)
	}
	sort.Strings(names)
	servers := make([]*http.Server, len(names))
	failed := make(chan error, len(names))
	for i, name := range names {
		hs := onceflowhttp.HTTPServer(s.handlers[name])
		servers[i] = hs
		go func() {
			if err := hs.Serve(onceflowhttp.LimitListener(hs, s.listeners[name], s.maxConns[name])); err != nil && !errors.Is(err, http.ErrServerClosed) {
				failed <- fmt.Errorf("%s server: %w", name, err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, hs := range servers {
		err = errors.Join(err, ignoreClosed(hs.Shutdown(shutdown)))
	}
	stop() // a listener that failed stops the rest too
	for range s.consumers {
		err = errors.Join(err, <-consumers)
	}
	return errors.Join(err, <-engine)
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close releases what the server holds: the connections its steps opened, and the
// listeners if Run never served them. Call it after Run returned.
func (s *Server) Close() error {
	if !s.ran.Load() {
		for _, ln := range s.listeners {
			ln.Close()
		}
	}
	if s.ownKinds {
		return s.kinds.Close()
	}
	return nil
}

// Ready reports whether the server can do its work: nil, or why not — a queue consumer
// that is not consuming, a webhook receiver that cannot verify deliveries. /readyz
// answers it (with the database).
func (s *Server) Ready(ctx context.Context) error {
	var errs []error
	for _, r := range s.reload.currentReceivers() {
		if err := r.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, s.consumersReady(ctx))...)
}

// consumersReady is the /readyz check of the queue consumers.
func (s *Server) consumersReady(context.Context) error {
	var errs []error
	for _, c := range s.consumers {
		if err := c.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// redaction collects what the server must never write: the values of the secret
// environment variables the workflow files read (flowfile.Definition.SecretNames: declared
// in secrets:, named *_TOKEN, *_SECRET, *_KEY or *_PASSWORD, webhook and Slack webhook
// secrets) and the parts of the other variables that look like credentials
// (flowfile.Definition.MaskedValues), the SMTP password, Config.Secrets, and the
// personal-data fields of Config.RedactFields and of each file's redact list.
func (s *Server) redaction(defs []*flowfile.Definition) (onceflow.Redaction, error) {
	secrets := append([]string(nil), s.cfg.Secrets...)
	if v, ok := s.cfg.Env(emailstep.EnvPassword); ok && v != "" {
		secrets = append(secrets, v)
	}
	for _, d := range defs {
		secrets = append(secrets, d.MaskedValues(s.cfg.Env)...)
	}
	sort.Strings(secrets)
	red := onceflow.Redaction{Secrets: secrets, Fields: s.cfg.RedactFields}
	// The client masks with these (onceflow.Config.Redact); checked here first so that a
	// mistake names the flag or the file to fix.
	policy, err := redact.New(red.Secrets, red.Fields)
	if err != nil {
		return red, &ConfigError{Field: "RedactFields", Problem: err.Error()}
	}
	for _, d := range defs {
		if err := policy.SetWorkflow(d.Name, d.Redact); err != nil {
			return red, fmt.Errorf("%s: %w", d.File(), err)
		}
	}
	return red, nil
}
