package demo

import (
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/httpstep"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// Names of the example workflows and their webhook, as the files define them.
const (
	leadWorkflow    = "website-lead"
	paymentWorkflow = "payment-succeeded"
	paymentsHook    = "payments"
)

// Speedup is how many times shorter than the example files say the demo makes retry
// delays and http timeouts, so that dozens of injected faults are retried in seconds.
const Speedup = 40

// httpTimeout is the http step's timeout when a file sets none (httpstep's default).
const httpTimeout = 30 * time.Second

// loadWorkflows reads and checks every *.yaml file at the root of fsys, leaving out the
// workflows started from a message queue. Files are named dir/NAME in problems.
func loadWorkflows(fsys fs.FS, dir string, r *flowfile.Reader) ([]*flowfile.Definition, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("demo: no workflow files in %s", dir)
	}
	var defs []*flowfile.Definition
	var problems flowfile.Problems
	for _, n := range names {
		src, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		d, ps := r.Parse(path.Join(dir, n), src)
		problems = append(problems, ps...)
		if d != nil {
			if _, fed := d.Trigger("queue"); fed {
				continue // fed by a broker, which the demo does not simulate
			}
		}
		if d != nil && len(ps) == 0 {
			defs = append(defs, d)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return defs, nil
}

// shorten divides, in place, every step's retry delays and every http step's timeout by
// factor. Attempts, effect keys and everything else stay as the files say.
func shorten(defs []*flowfile.Definition, factor int) {
	f := time.Duration(factor)
	for _, d := range defs {
		for i := range d.Steps {
			s := &d.Steps[i]
			r := flowfile.RetryDef{}
			if s.Retry != nil {
				r = *s.Retry
			}
			if r.Initial == 0 {
				r.Initial = flowfile.Duration(onceflow.DefaultRetryPolicy.Initial)
			}
			if r.Max == 0 {
				r.Max = flowfile.Duration(onceflow.DefaultRetryPolicy.Max)
			}
			r.Initial /= flowfile.Duration(f)
			r.Max /= flowfile.Duration(f)
			s.Retry = &r
			if h, ok := s.Config.(*httpstep.Settings); ok {
				t := time.Duration(h.Timeout)
				if t == 0 {
					t = httpTimeout
				}
				h.Timeout = flowfile.Duration(t / f)
			}
		}
	}
}

// stepKinds maps workflow → step → kind.
func stepKinds(defs []*flowfile.Definition) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, d := range defs {
		out[d.Name] = map[string]string{}
		for _, s := range d.Steps {
			out[d.Name][s.ID] = s.Kind
		}
	}
	return out
}

// reader reads workflow files against kinds and the standard trigger kinds.
func reader(kinds *steps.Registry) *flowfile.Reader {
	trigs, err := stdtriggers.New()
	if err != nil {
		panic(err) // the standard trigger kinds register without a conflict
	}
	return &flowfile.Reader{Kinds: kinds, Triggers: trigs}
}
