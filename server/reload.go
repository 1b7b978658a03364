package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/triggers"
)

// reloadState is what reloading the workflow files needs: where they are, and what may not
// change without a restart.
type reloadState struct {
	mu    sync.Mutex // one reload at a time
	paths []string
	// env are the environment variables the files read at start, each with whether it is
	// secret.
	env    map[string]bool
	notify notifyShape
	// consumers are the blocks of the files whose triggers are consumers (queue:), at
	// start, by workflow and block: a consumer runs from start to stop.
	consumers map[string]consumerShape
	// callers are the API's tokens: a reload may not leave one whose list names a
	// workflow it cannot start, nor a workflow naming a token that does not exist.
	callers []onceflow.Caller

	receiversMu sync.Mutex
	receivers   []triggers.Receiver
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

// consumerShape is a block whose trigger is a consumer, as its file states it.
type consumerShape struct {
	workflow, block, file string
	config                triggers.Config
}

// consumersOf are the blocks of defs whose built triggers, ts (flowfile.Triggers' answer,
// in its order), are consumers.
func consumersOf(defs []*flowfile.Definition, ts []triggers.Trigger) map[string]consumerShape {
	out := map[string]consumerShape{}
	i := 0
	for _, d := range defs {
		for _, td := range d.Triggers {
			if i < len(ts) {
				if _, ok := ts[i].(triggers.Consumer); ok {
					blk := td.Kind().Spec().Block
					out[d.Name+"\x00"+blk] = consumerShape{workflow: d.Name, block: blk, file: d.File(), config: td.Config}
				}
			}
			i++
		}
	}
	return out
}

func newReloadState(paths []string, defs []*flowfile.Definition, notify onceflow.NotifyConfig, ts []triggers.Trigger) reloadState {
	return reloadState{paths: paths, env: envNames(defs), notify: shapeOf(notify), consumers: consumersOf(defs, ts)}
}

func (r *reloadState) where() string { return strings.Join(r.paths, ", ") }

func (r *reloadState) currentReceivers() []triggers.Receiver {
	r.receiversMu.Lock()
	defer r.receiversMu.Unlock()
	return r.receivers
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

// Reload reads the workflow files again and, only if all of them are valid and change
// nothing that needs a restart, puts them in place of the running definitions — the
// workflows, their schedules and their triggers' companions in the engine, the webhook
// receivers in the API — and returns what changed. Otherwise it changes nothing and
// returns flowfile.Problems saying why. Needing a restart: a file that reads an
// environment variable no file read at start, or makes one secret that was not (its value
// would not be masked); changed notify: settings; and changed queue: settings, including
// a queue added or removed with its file (a queue consumer runs from start to stop). One
// reload runs at a time; POST /v1/admin/reload calls it.
func (s *Server) Reload(ctx context.Context) (onceflowhttp.ReloadResult, error) {
	res, err := s.reloadFiles(ctx)
	if err != nil {
		return onceflowhttp.ReloadResult{}, asProblems(s.reload.where(), err)
	}
	return res, nil
}

// apiReload is the API's Reloader: Reload, its problems as the API answers them.
func (s *Server) apiReload(ctx context.Context) (onceflowhttp.ReloadResult, error) {
	res, err := s.Reload(ctx)
	var ps flowfile.Problems
	if errors.As(err, &ps) {
		out := make(onceflowhttp.ReloadProblems, len(ps))
		for i, p := range ps {
			out[i] = onceflowhttp.ReloadProblem{File: p.File, Line: p.Line, Col: p.Col, Message: p.Message}
		}
		return res, out
	}
	return res, err
}

func (s *Server) reloadFiles(context.Context) (onceflowhttp.ReloadResult, error) {
	r := &s.reload
	r.mu.Lock()
	defer r.mu.Unlock()
	defs, err := s.reader.Load(r.paths...)
	if err != nil {
		return onceflowhttp.ReloadResult{}, err
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
	notify, err := s.builder.Notify(defs)
	switch {
	case err != nil:
		ps = append(ps, asProblems(r.where(), err)...)
	case !reflect.DeepEqual(shapeOf(notify), r.notify):
		ps = append(ps, flowfile.Problem{File: r.where(), Message: "the notify: settings changed; they take effect when onceflow restarts, so restart it (or undo the change) to reload"})
	}
	// The companions and the webhook receivers of the new files (the secrets are read
	// now); the queue consumers are the ones started with the server, whose settings may
	// not change.
	ts, err := flowfile.Triggers(defs, flowfile.TriggerOptions{Env: s.cfg.Env})
	if err != nil {
		ps = append(ps, asProblems(r.where(), err)...)
	} else {
		ps = append(ps, r.consumerChanges(defs, ts)...)
	}
	if len(ps) > 0 {
		return onceflowhttp.ReloadResult{}, ps
	}
	// The files' limits are declared once the client took the new definitions: a reload
	// that is refused leaves them as they were.
	wfs, declareLimits, err := s.builder.Pending(defs)
	if err != nil {
		return onceflowhttp.ReloadResult{}, err
	}
	ss, err := s.builder.Schedules(defs)
	if err != nil {
		return onceflowhttp.ReloadResult{}, err
	}
	set := triggerSet{all: ts, receivers: triggers.Receivers(ts)}
	wfs = append(wfs, set.companions(s.client)...)
	if err := onceflow.CheckCallers(r.callers, wfs, ss); err != nil {
		return onceflowhttp.ReloadResult{}, err
	}
	ch, err := s.client.ReplaceDefinitions(wfs, ss)
	if err != nil {
		return onceflowhttp.ReloadResult{}, err
	}
	declareLimits()
	if s.api != nil {
		if err := s.api.SetReceivers(set.receivers); err != nil {
			// Every receiver's workflow was just registered: a bug, not a file's problem.
			s.log.Error("reload: the webhooks of the new files are not served; the old ones are", "error", err)
		}
	}
	r.receiversMu.Lock()
	r.receivers = set.receivers
	r.receiversMu.Unlock()
	return onceflowhttp.ReloadResult{Workflows: s.client.Workflows(), Added: ch.Added, Removed: ch.Removed, Replaced: ch.Replaced}, nil
}

// consumerChanges are the problems of defs, whose triggers are ts, whose consumer blocks
// (queue:) differ from those the server started with: a consumer is started, changed or
// stopped only with the process, and a consumer whose workflow went away would take
// messages it cannot start.
func (r *reloadState) consumerChanges(defs []*flowfile.Definition, ts []triggers.Trigger) flowfile.Problems {
	now := consumersOf(defs, ts)
	keys := map[string]bool{}
	for k := range now {
		keys[k] = true
	}
	for k := range r.consumers {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	const restart = "a queue consumer is started, changed or stopped only when onceflow starts, so restart it (or undo the change) to reload"
	var ps flowfile.Problems
	for _, k := range sorted {
		was, had := r.consumers[k]
		is, has := now[k]
		switch {
		case had && has && !reflect.DeepEqual(was.config, is.config):
			ps = append(ps, flowfile.Problem{File: is.file, Message: fmt.Sprintf("the %s: settings of workflow %s changed; %s", is.block, is.workflow, restart)})
		case !had && has:
			ps = append(ps, flowfile.Problem{File: is.file, Message: fmt.Sprintf("workflow %s now consumes a %s; %s", is.workflow, is.block, restart)})
		case had && !has:
			ps = append(ps, flowfile.Problem{File: was.file, Message: fmt.Sprintf("workflow %s no longer consumes its %s (its %s: block or its file was removed), but its consumer would go on taking messages; %s",
				was.workflow, was.block, was.block, restart)})
		}
	}
	return ps
}

// asProblems returns err as flowfile.Problems: itself if it is, else one problem at where
// per error it joins.
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
