package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/onceflowhttp"
)

// reloadState is what reloading an app's workflow files needs: where they are, how their
// steps are built, and what may not change without a restart.
type reloadState struct {
	mu     sync.Mutex // one reload at a time
	dir    string
	reader *flowfile.Reader
	build  *flowfile.Builder
	env    map[string]bool // environment variables the files read at start: are they secret
	notify notifyShape
	server *onceflowhttp.Server
	// callers are the API's tokens: a reload may not leave one whose list names a
	// workflow it cannot start, nor a workflow naming a token that does not exist.
	callers []onceflow.Caller
}

// notifyShape is what a NotifyConfig says, without its functions: reloading may not
// change it (its channels are built once, and the notifier's cursors depend on it).
type notifyShape struct {
	Policies []onceflow.NotifyPolicy
	Channels []string
}

func shapeOf(n onceflow.NotifyConfig) notifyShape {
	s := notifyShape{Policies: n.Policies}
	for _, ch := range n.Channels {
		s.Channels = append(s.Channels, ch.Name)
	}
	return s
}

func newReloadState(dir string, reader *flowfile.Reader, build *flowfile.Builder, defs []*flowfile.Definition, notify onceflow.NotifyConfig) reloadState {
	return reloadState{dir: dir, reader: reader, build: build, env: envNames(defs), notify: shapeOf(notify)}
}

func (r *reloadState) setServer(s *onceflowhttp.Server, tokens []onceflowhttp.Token) {
	r.mu.Lock()
	r.server = s
	r.callers = nil
	for _, t := range tokens {
		r.callers = append(r.callers, t.Caller())
	}
	r.mu.Unlock()
}

// envNames returns the environment variables defs read, each with whether it is secret
// (flowfile.Definition.SecretNames), so masked whole.
func envNames(defs []*flowfile.Definition) map[string]bool {
	out := map[string]bool{}
	for _, d := range defs {
		for _, n := range d.EnvNames() {
			if _, ok := out[n]; !ok {
				out[n] = false
			}
		}
		for _, n := range d.SecretNames() {
			out[n] = true
		}
	}
	return out
}

// reloadWorkflows reads the workflow files again and, only if all of them are valid,
// puts them (workflows and schedules) in place of the running definitions, in the engine
// and in the API. Otherwise
// it changes nothing and returns flowfile.Problems saying why. It is the API's Reloader
// and what SIGHUP does.
func (a *app) reloadWorkflows(ctx context.Context) (onceflowhttp.ReloadResult, error) {
	r := &a.reload
	r.mu.Lock()
	defer r.mu.Unlock()
	defs, err := r.reader.Load(r.dir)
	if err != nil {
		return onceflowhttp.ReloadResult{}, asProblems(r.dir, err)
	}
	// What is masked of the values a file reads from the environment is set when the
	// process starts, so a file may not start reading a new variable, nor make one secret
	// that was not (its value would show where it is now meant to be masked whole).
	var ps flowfile.Problems
	for _, d := range defs {
		for _, n := range d.EnvNames() {
			if _, ok := r.env[n]; !ok {
				ps = append(ps, flowfile.Problem{File: d.File(), Message: "reads the environment variable " + n +
					", which no workflow file read when onceflow started: its value would not be masked; restart onceflow to use it"})
			}
		}
		for _, n := range d.SecretNames() {
			if secret, ok := r.env[n]; ok && !secret {
				ps = append(ps, flowfile.Problem{File: d.File(), Message: "makes the environment variable " + n +
					" secret, which it was not when onceflow started: its value would not be masked; restart onceflow to use it"})
			}
		}
	}
	notify, err := r.build.Notify(defs)
	switch {
	case err != nil:
		ps = append(ps, asProblems(r.dir, err)...)
	case !reflect.DeepEqual(shapeOf(notify), r.notify):
		ps = append(ps, flowfile.Problem{File: r.dir, Message: "the notify: settings changed; they take effect when onceflow restarts, so restart it (or undo the change) to reload"})
	}
	if len(ps) > 0 {
		return onceflowhttp.ReloadResult{}, ps
	}
	// The files' limits are declared once the client took the new definitions: a reload
	// that is refused leaves them as they were.
	wfs, declareLimits, err := r.build.Pending(defs)
	if err != nil {
		return onceflowhttp.ReloadResult{}, asProblems(r.dir, err)
	}
	ss, err := r.build.Schedules(defs)
	if err != nil {
		return onceflowhttp.ReloadResult{}, asProblems(r.dir, err)
	}
	rejects, err := rejectWorkflows(a.client, defs)
	if err != nil {
		return onceflowhttp.ReloadResult{}, asProblems(r.dir, err)
	}
	wfs = append(wfs, rejects...)
	if err := onceflow.CheckCallers(r.callers, wfs, ss); err != nil {
		return onceflowhttp.ReloadResult{}, asProblems(r.dir, err)
	}
	ch, err := a.client.ReplaceDefinitions(wfs, ss)
	if err != nil {
		return onceflowhttp.ReloadResult{}, asProblems(r.dir, err)
	}
	declareLimits()
	if r.server != nil {
		r.server.SetDefinitions(defs)
	}
	a.defs = defs
	return onceflowhttp.ReloadResult{Workflows: a.client.Workflows(), Added: ch.Added, Removed: ch.Removed, Replaced: ch.Replaced}, nil
}

// asProblems returns err as flowfile.Problems: itself if it is, else one problem at where.
func asProblems(where string, err error) flowfile.Problems {
	var ps flowfile.Problems
	if errors.As(err, &ps) {
		return ps
	}
	var out flowfile.Problems
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			out = append(out, flowfile.Problem{File: where, Message: e.Error()})
		}
		return out
	}
	return flowfile.Problems{{File: where, Message: err.Error()}}
}

// reloadOnHangup reloads the app's workflows on every SIGHUP until ctx ends, logging what
// changed or, for a refused reload, every problem; the old definitions then keep running.
// It returns once the signal is being caught.
func (a *app) reloadOnHangup(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				res, err := a.reloadWorkflows(ctx)
				if err != nil {
					var problems []string
					for _, p := range asProblems(a.reload.dir, err) {
						problems = append(problems, p.String())
					}
					a.log.Error("SIGHUP: workflows not reloaded; the definitions loaded before keep running", "problems", problems)
					continue
				}
				a.log.Info("SIGHUP: workflows reloaded", "workflows", res.Workflows, "added", res.Added, "removed", res.Removed,
					"replaced", res.Replaced)
			}
		}
	}()
}
