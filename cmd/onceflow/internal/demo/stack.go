package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/store"
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
	deps   flowfile.Deps
	hs     *http.Server
	stop   context.CancelFunc
	engine chan error
	served chan error
}

// stackConfig says how to assemble a stack.
type stackConfig struct {
	store   store.Store
	defs    []*flowfile.Definition
	env     map[string]string
	tokens  []onceflowhttp.Token
	workers int
	log     *slog.Logger
}

// startStack builds the workflows and starts executing steps and serving the API.
func startStack(c stackConfig) (*stack, error) {
	lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: listen: %w", err)
	}
	// The steps reach the simulated services on loopback, never the stack's own API.
	own := func() []net.Addr { return []net.Addr{ln.Addr()} }
	deps, err := flowfile.StandardDeps(flowfile.Options{Store: c.store, AllowNet: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Env: lookup,
		Listeners: own})
	if err != nil {
		ln.Close()
		return nil, err
	}
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
	if err := registerAll(client, c.defs, deps); err != nil {
		ln.Close()
		return nil, err
	}
	api, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Workflows: c.defs, Tokens: c.tokens, Env: lookup, Logger: c.log})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	s := &stack{
		client: client, url: "http://" + ln.Addr().String(), deps: deps,
		hs:     onceflowhttp.HTTPServer(api),
		engine: make(chan error, 1),
		served: make(chan error, 1),
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.engine <- client.Serve(ctx) }()
	go func() { s.served <- s.hs.Serve(onceflowhttp.LimitListener(s.hs, ln, 0)) }()
	return s, nil
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
	s.deps.HTTPClient.CloseIdleConnections()
	return err
}
