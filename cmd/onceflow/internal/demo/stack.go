package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/triggers"
)

// stack is onceflow as `onceflow serve` runs it: workflow definitions built with the
// standard step kinds behind the egress policy (loopback allowed, as --allow-net
// 127.0.0.1/32 does), registered on a client that executes steps, and the API and webhook
// endpoints served on a loopback port. It mirrors the cli package's newApp and app.run, from
// definitions in memory and an environment map instead of a directory and the process
// environment.
type stack struct {
	client *onceflow.Client
	url    string
	build  *flowfile.Builder
	own    *ownListeners
	hs     *http.Server
	stop   context.CancelFunc
	engine chan error
	served chan error
}

// stackConfig says how to assemble a stack.
type stackConfig struct {
	store   store.Store
	defs    []*flowfile.Definition // read with kinds
	kinds   *steps.Registry        // made with demoKinds(…, own)
	own     *ownListeners
	env     map[string]string
	tokens  []onceflowhttp.Token
	workers int
	log     *slog.Logger
	// console serves the web console at /ui/ beside the API, signed in with tokens.
	console bool
}

// startStack builds the workflows and starts executing steps and serving the API.
func startStack(c stackConfig) (*stack, error) {
	lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: listen: %w", err)
	}
	// The steps reach the simulated services on loopback, never the stack's own API.
	c.own.set(ln.Addr())
	build := flowfile.NewBuilder(flowfile.BuildOptions{Store: c.store, Env: lookup, HTTPClient: c.own.client})
	client, err := onceflow.New(onceflow.Config{
		Store:          c.store,
		Workers:        c.workers,
		WorkerID:       "demo-worker",
		LeaseFor:       5 * time.Second,
		HeartbeatEvery: time.Second,
		PollInterval:   20 * time.Millisecond,
		ReapInterval:   500 * time.Millisecond,
		EffectWait:     50 * time.Millisecond,
		ShutdownGrace:  3 * time.Second,
		Logger:         c.log,
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	if err := registerAll(client, c.defs, build); err != nil {
		ln.Close()
		return nil, err
	}
	ts, err := flowfile.Triggers(c.defs, flowfile.TriggerOptions{Env: lookup})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	api, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Receivers: triggers.Receivers(ts), Tokens: c.tokens, Logger: c.log})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	var h http.Handler = api
	if c.console {
		ui, err := onceflowui.New(onceflowui.Config{Client: client, Tokens: c.tokens, Logger: c.log})
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("demo: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/ui/", ui)
		mux.Handle("/ui", ui)
		mux.Handle("/", api)
		h = mux
	}
	s := &stack{
		client: client, url: "http://" + ln.Addr().String(), build: build, own: c.own,
		hs:     onceflowhttp.HTTPServer(h),
		engine: make(chan error, 1),
		served: make(chan error, 1),
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.engine <- client.Serve(ctx) }()
	go func() { s.served <- s.hs.Serve(onceflowhttp.LimitListener(s.hs, ln, 0)) }()
	return s, nil
}

// loopback lets the demo's steps and lists reach its destinations, as --allow-net
// 127.0.0.1/32 does.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// ownListeners is the address the demo's current stack listens on, which its steps and
// lists never reach (the egress policy's Own), and the client that fetches the lists of
// schedules.
type ownListeners struct {
	mu     sync.Mutex
	addrs  []net.Addr
	client *http.Client
}

func newOwnListeners() *ownListeners {
	o := &ownListeners{}
	o.client = (&egress.Policy{Allow: loopback, Own: o.Addrs}).Client(0)
	return o
}

func (o *ownListeners) set(a net.Addr) {
	o.mu.Lock()
	o.addrs = []net.Addr{a}
	o.mu.Unlock()
}

// Addrs returns the stack's listener.
func (o *ownListeners) Addrs() []net.Addr {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]net.Addr(nil), o.addrs...)
}

// demoKinds are the standard step kinds the demo's files are read and built against, on
// st with the environment env: steps reach loopback, but not the stacks' listeners.
func demoKinds(st store.Store, env map[string]string, own *ownListeners) (*steps.Registry, error) {
	return stdsteps.New(stdsteps.Options{Store: st, AllowNet: loopback, Listeners: own.Addrs,
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
}

// shutdown stops serving the API, then lets running steps finish and stops the workers.
func (s *stack) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.hs.Shutdown(ctx)
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	s.stop()
	err = errors.Join(err, <-s.engine)
	s.own.client.CloseIdleConnections()
	return err
}
