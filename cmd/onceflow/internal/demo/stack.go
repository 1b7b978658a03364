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
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/stdsteps"
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
	build  *flowfile.Builder
	hs     *http.Server
	stop   context.CancelFunc
	engine chan error
	served chan error
}

// stackConfig says how to assemble a stack.
type stackConfig struct {
	store   store.Store
	defs    []*flowfile.Definition // read with kinds
	kinds   *steps.Registry
	env     map[string]string
	tokens  []onceflowhttp.Token
	workers int
	log     *slog.Logger
}

// startStack builds the workflows and starts executing steps and serving the API.
func startStack(c stackConfig) (*stack, error) {
	lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
	build := flowfile.NewBuilder(flowfile.BuildOptions{Store: c.store, Env: lookup, HTTPClient: loopbackClient})
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
		return nil, err
	}
	if err := registerAll(client, c.defs, build); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: listen: %w", err)
	}
	api, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Workflows: c.defs, Tokens: c.tokens, Env: lookup, Logger: c.log})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	s := &stack{
		client: client, url: "http://" + ln.Addr().String(), build: build,
		hs: &http.Server{
			Handler:           api,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
		},
		engine: make(chan error, 1),
		served: make(chan error, 1),
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.engine <- client.Serve(ctx) }()
	go func() { s.served <- s.hs.Serve(ln) }()
	return s, nil
}

// loopback lets the demo's steps and lists reach its destinations, as --allow-net
// 127.0.0.1/32 does; loopbackClient fetches the lists of schedules.
var (
	loopback       = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	loopbackClient = (&egress.Policy{Allow: loopback}).Client(0)
)

// demoKinds are the standard step kinds the demo's files are read and built against, on
// st with the environment env: steps and lists reach loopback.
func demoKinds(st store.Store, env map[string]string) (*steps.Registry, error) {
	return stdsteps.New(stdsteps.Options{Store: st, AllowNet: loopback, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
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
	loopbackClient.CloseIdleConnections()
	return err
}
