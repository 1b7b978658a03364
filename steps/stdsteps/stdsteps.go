// Package stdsteps is the set of standard step kinds, registered in one place: http,
// slack, email, transition, sql, nats, amqp and go, in that order. The onceflow command reads
// workflow files against it; a program that embeds onceflow starts from it and adds its
// own kinds:
//
//	kinds, err := stdsteps.New(stdsteps.Options{Env: os.LookupEnv, Store: st})
//	if err != nil { … }
//	defer kinds.Close()
//	if err := kinds.Add(myKind); err != nil { … }
//	reader := &flowfile.Reader{Kinds: kinds}
//
// The zero Options check files without building anything that reaches out: no SMTP
// server, no store for transitions, no Go functions.
package stdsteps

import (
	"net"
	"net/netip"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/amqpstep"
	"github.com/onceflow/onceflow/steps/emailstep"
	"github.com/onceflow/onceflow/steps/gostep"
	"github.com/onceflow/onceflow/steps/httpstep"
	"github.com/onceflow/onceflow/steps/natsstep"
	"github.com/onceflow/onceflow/steps/slackstep"
	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/steps/transitionstep"
	"github.com/onceflow/onceflow/store"
)

// Options configure the standard kinds.
type Options struct {
	// Env is the environment the kinds read their own settings from: the SMTP server
	// (ONCEFLOW_SMTP_ADDR, ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD,
	// ONCEFLOW_SMTP_TLS); nil reads none. Steps read {env.NAME}, a broker's URL and a
	// database's DSN through the environment they are built with.
	Env func(name string) (string, bool)
	// Store holds the entities transition steps move; nil: no transition step is built.
	Store store.EntityStore
	// AllowNet opens internal address ranges to http and email steps, which otherwise
	// reach only public addresses; MaxRedirects is how many redirects an http step
	// follows, each hop checked.
	AllowNet     []netip.Prefix
	MaxRedirects int
	// Listeners, when set, returns the addresses the process listens on (its API, web
	// console and metrics); http and email steps never connect to them, also after a
	// redirect and whatever AllowNet opens. It is asked at each connection, so listeners
	// opened after New count.
	Listeners func() []net.Addr
	// Funcs are the Go functions steps of kind go name, looked up when a step is built.
	Funcs map[string]onceflow.StepFunc
	// Hooks are signals for tests, given to every step of their kind.
	Hooks Hooks
}

// Hooks are the standard kinds' signals for tests.
type Hooks struct {
	SQL  sqlstep.Hooks
	AMQP amqpstep.Hooks
}

// New returns a registry of the standard kinds. Its error is a misconfigured SMTP server
// (the variable at fault named, never the password). Close the registry when the steps
// built from it are done: it closes their database pools and broker connections.
func New(o Options) (*steps.Registry, error) {
	policy := &egress.Policy{Allow: o.AllowNet, MaxRedirects: o.MaxRedirects, Own: o.Listeners}
	var srv *emailstep.Server
	if o.Env != nil {
		getenv := func(k string) string { v, _ := o.Env(k); return v }
		if getenv(emailstep.EnvAddr) != "" {
			s, err := emailstep.ServerFromEnv(getenv)
			if err != nil {
				return nil, err
			}
			srv = &s
		}
	}
	r := steps.NewRegistry()
	for _, k := range []steps.Kind{
		httpstep.NewKind(httpstep.KindOptions{Client: policy.Client(0)}),
		slackstep.NewKind(slackstep.KindOptions{Client: policy.Client(0)}),
		emailstep.NewKind(emailstep.KindOptions{Server: srv, Dial: policy.DialContext}),
		transitionstep.NewKind(transitionstep.KindOptions{Store: o.Store}),
		sqlstep.NewKind(sqlstep.KindOptions{Hooks: o.Hooks.SQL}),
		natsstep.NewKind(),
		amqpstep.NewKind(amqpstep.KindOptions{Hooks: o.Hooks.AMQP}),
		gostep.New(o.Funcs),
	} {
		if err := r.Add(k); err != nil {
			return nil, err
		}
	}
	return r, nil
}
