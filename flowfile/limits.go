package flowfile

import (
	"fmt"
	"net"
	"strings"

	"github.com/onceflow/onceflow/internal/limit"
	"github.com/onceflow/onceflow/steps"
)

// LimitDef bounds the requests sent to one destination: at most Concurrency in flight and
// PerSecond started per second (a token bucket of Burst). In a workflow's limits: list it
// names the Host it applies to, for every http step of every workflow this process runs; in
// a step's limits: block it applies to that step's requests.
//
//	limits:
//	  - {host: api.crm.example, concurrency: 4, per_second: 10}
//	steps:
//	  - id: crm_lead
//	    kind: http
//	    limits: {concurrency: 1}
type LimitDef struct {
	// Host is a host name or address, optionally with a port ("127.0.0.1:8080"); without
	// one, the limit applies on every port.
	Host        string  `yaml:"host"`
	Concurrency int     `yaml:"concurrency"`
	PerSecond   float64 `yaml:"per_second"`
	Burst       int     `yaml:"burst"`
}

func (l LimitDef) limit() limit.Limit {
	return limit.Limit{Concurrency: l.Concurrency, PerSecond: l.PerSecond, Burst: l.Burst}
}

// checkLimits checks the workflow's limits: list and the steps' limits: blocks.
func (d *Definition) checkLimits() Problems {
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	checkValues := func(at string, l LimitDef) {
		if l.Concurrency < 0 {
			add(at+".concurrency", "concurrency %d is negative", l.Concurrency)
		}
		if l.PerSecond < 0 {
			add(at+".per_second", "per_second %v is negative", l.PerSecond)
		}
		if l.Burst < 0 {
			add(at+".burst", "burst %d is negative", l.Burst)
		}
		if l.Burst > 0 && l.PerSecond == 0 {
			add(at+".burst", "burst needs per_second")
		}
		if l.Concurrency == 0 && l.PerSecond == 0 {
			add(at, "a limit needs concurrency (requests in flight) or per_second (requests started a second), or both")
		}
	}
	hosts := map[string]int{}
	for i, l := range d.Limits {
		at := fmt.Sprintf("$.limits[%d]", i)
		checkValues(at, l)
		h := strings.ToLower(strings.TrimSpace(l.Host))
		switch {
		case h == "":
			add(at, "a limit in limits: needs the host it applies to, such as api.crm.example (a step's own limit goes in the step's limits:)")
			continue
		case strings.Contains(h, "/") || strings.Contains(h, "@"):
			add(at+".host", "host %q: write only the host name, with an optional port, such as api.crm.example or 127.0.0.1:8080", l.Host)
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil && strings.Count(h, ":") == 1 {
			add(at+".host", "host %q: %v", l.Host, err)
		}
		if prev, ok := hosts[h]; ok {
			add(at+".host", "host %q is limited twice (also limits[%d])", l.Host, prev)
		}
		hosts[h] = i
	}
	for i, s := range d.Steps {
		if s.Limits == nil {
			continue
		}
		at := fmt.Sprintf("$.steps[%d].limits", i)
		if !d.takesLimits(s) {
			add(at, "step %q: limits apply to %s steps only", s.ID, d.limitKinds())
			continue
		}
		if s.Limits.Host != "" {
			add(at+".host", "step %q: a step's limits apply to its own requests and take no host; limit a host in the workflow's limits:", s.ID)
		}
		checkValues(at, *s.Limits)
	}
	return ps
}

// limitKeys lists the limits the definitions declare, by key, with where each is written.
type declaredLimit struct {
	key  string
	lim  limit.Limit
	def  *Definition
	path string
	what string
}

func declaredLimits(defs []*Definition) []declaredLimit {
	var out []declaredLimit
	for _, d := range defs {
		for i, lim := range d.Limits {
			out = append(out, declaredLimit{limit.HostKey(strings.TrimSpace(lim.Host)), lim.limit(), d, fmt.Sprintf("$.limits[%d]", i), "host " + strconvQuote(lim.Host)})
		}
		for i, s := range d.Steps {
			if s.Limits != nil && d.takesLimits(s) {
				out = append(out, declaredLimit{limit.StepKey(d.Name, s.ID), s.Limits.limit(), d, fmt.Sprintf("$.steps[%d].limits", i), "step " + strconvQuote(s.ID)})
			}
		}
	}
	return out
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// checkLimitConflicts reports the declared limits l already holds differently: the same
// host limited otherwise by another workflow file, or, on a reload, a changed limit.
func checkLimitConflicts(defs []*Definition, l *limit.Limiter) Problems {
	var ps Problems
	seen := map[string]limit.Limit{}
	for _, dl := range declaredLimits(defs) {
		prev, dup := seen[dl.key]
		if dup && prev != dl.lim || l.Check(dl.key, dl.lim) != nil {
			ps = append(ps, dl.def.problemAt(dl.path, "%s has another limit already (in another workflow file, or before a reload: limits change when onceflow restarts)", dl.what))
		}
		seen[dl.key] = dl.lim
	}
	return ps
}

// registerLimits declares the definitions' limits on l, once checkLimitConflicts found none.
func registerLimits(defs []*Definition, l *limit.Limiter) {
	for _, dl := range declaredLimits(defs) {
		_ = l.Register(dl.key, dl.lim)
	}
}

// takesLimits reports whether the step's kind accepts a limits: block of its own.
func (d *Definition) takesLimits(s StepDef) bool {
	k, ok := d.registry().Lookup(s.Kind)
	return ok && k.Spec().Limits
}

// limitKinds names the kinds that accept limits: "http".
func (d *Definition) limitKinds() string {
	var names []string
	for _, k := range d.registry().Kinds() {
		if k.Spec().Limits {
			names = append(names, k.Spec().Name)
		}
	}
	return steps.List(names, "and")
}
