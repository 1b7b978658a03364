package flowfile

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/internal/emailstep"
	"github.com/onceflow/onceflow/internal/limit"
	"github.com/onceflow/onceflow/internal/transitionstep"
	"github.com/onceflow/onceflow/store"
)

// Options configure StandardDeps.
type Options struct {
	// Store backs transition steps.
	Store store.Store
	// AllowNet opens internal address ranges to http and email steps, which otherwise
	// reach only public addresses.
	AllowNet []netip.Prefix
	// MaxRedirects is how many redirects an http step follows, each hop checked.
	MaxRedirects int
	// Listeners, when set, returns the addresses the process listens on (its API, web
	// console and metrics); http and e-mail steps and fan-out list fetches never connect
	// to them, also after a redirect and whatever AllowNet opens. It is asked at each
	// connection, so listeners opened after StandardDeps count.
	Listeners func() []net.Addr
	// Env looks up {env.NAME} values, webhook secrets and the SMTP settings
	// (ONCEFLOW_SMTP_ADDR, …). Required.
	Env func(name string) (string, bool)
	// Funcs are the Go functions "go" steps name.
	Funcs map[string]onceflow.StepFunc
}

// StandardDeps wires the step kinds as the onceflow command does: http and email steps
// behind the egress policy, e-mail through the SMTP server the environment names (if any),
// transitions on the store.
func StandardDeps(o Options) (Deps, error) {
	policy := &egress.Policy{Allow: o.AllowNet, MaxRedirects: o.MaxRedirects, Own: o.Listeners}
	deps := Deps{HTTPClient: policy.Client(0), Env: o.Env, Funcs: o.Funcs}
	// One limiter for every workflow built with these deps, so that a host's limit holds
	// for all of them; shared with other processes through the store when it can.
	lo := limit.Options{Owner: processName()}
	if g, ok := o.Store.(limit.Gate); ok {
		lo.Gate = g
	}
	deps.limiter = limit.New(lo)
	getenv := func(k string) string { v, _ := o.Env(k); return v }
	if getenv(emailstep.EnvAddr) != "" {
		srv, err := emailstep.ServerFromEnv(getenv)
		if err != nil {
			return Deps{}, err
		}
		deps.Email = func(d *EmailDef) (onceflow.StepFunc, error) {
			st, err := emailstep.New(emailstep.Spec{From: d.From, To: d.To, Cc: d.Cc, ReplyTo: d.ReplyTo, Subject: d.Subject, Body: d.Body, HTML: d.HTML, AllowLists: d.AllowLists},
				srv, o.Env, policy.DialContext)
			if err != nil {
				return nil, err
			}
			return st.Do, nil
		}
	}
	if o.Store != nil {
		deps.Transition = func(d *TransitionDef) (onceflow.StepFunc, error) {
			st, err := transitionstep.New(transitionstep.Spec{Entity: d.Entity, From: d.From, Initial: d.Initial, To: d.To,
				Review: d.OnInvalid == "needs_review"}, o.Store)
			if err != nil {
				return nil, err
			}
			return st.Do, nil
		}
	}
	brokerDeps(&deps, o.Env)
	return deps, nil
}

// processName names this process in shared limit slots: host and process id.
func processName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
