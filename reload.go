package onceflow

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/onceflow/onceflow/internal/redact"
)

// WorkflowChanges says what ReplaceWorkflows changed, by workflow name, sorted.
type WorkflowChanges struct {
	Added   []string
	Removed []string
	// Replaced are the workflows registered before and after: their new definitions take
	// effect for every step claimed from now on.
	Replaced []string
}

// ReplaceWorkflows makes ws the client's workflows, in place of those registered so far,
// while it serves: a program reloading its workflow files calls it. Every workflow is
// validated first, as Register does; if any has a problem, nothing changes and the error
// joins a *DefinitionError for each problem, so a bad definition never replaces a good
// one. Otherwise the swap is atomic: each step claimed afterwards runs under its new
// definition, steps already running finish, and are recorded, under the definition they
// started with, and the steps of a removed workflow are no longer claimed by this client
// (they stay in the database, due, for a client that has the workflow). The schedules
// registered stay, with their fan-out workflows; removing the workflow of one is a
// problem — replace both with ReplaceDefinitions.
func (c *Client) ReplaceWorkflows(ws []Workflow) (WorkflowChanges, error) {
	c.mu.RLock()
	ss := make([]Schedule, 0, len(c.schedules))
	for _, sd := range c.schedules {
		ss = append(ss, sd.Schedule)
	}
	c.mu.RUnlock()
	return c.ReplaceDefinitions(ws, ss)
}

// ReplaceDefinitions makes ws the client's workflows and ss its schedules, in place of
// those registered so far, as one atomic swap: what ReplaceWorkflows does, for the
// schedules too. Every schedule is validated as RegisterSchedule does, against the new
// workflows; if any workflow or schedule has a problem, nothing changes. A schedule that
// keeps its name keeps its place in time (the ticks it fired are in the database); a new
// one starts from now; a removed one fires no more ticks. The fan-out workflow of a
// schedule with ForEach is registered with it, so that the fan-outs in flight go on, and
// the workflows of Config.Notify's channels stay.
func (c *Client) ReplaceDefinitions(ws []Workflow, ss []Schedule) (WorkflowChanges, error) {
	var problems []error
	defs := make(map[string]*workflowDef, len(ws)+len(ss))
	// The notification channels' workflows are the client's own (Config.Notify): they stay.
	channels := make([]Workflow, len(c.cfg.Notify.Channels))
	for i := range c.cfg.Notify.Channels {
		channels[i] = c.cfg.Notify.Channels[i].workflow()
	}
	for i, w := range slices.Concat(ws, channels) {
		if _, dup := defs[w.Name]; dup {
			problem := "is defined twice"
			if i >= len(ws) {
				problem = "is the name of a notification channel (Config.Notify)"
			}
			problems = append(problems, &DefinitionError{Workflow: w.Name, Field: "name", Problem: problem})
			continue
		}
		def, err := compile(w)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for _, f := range w.Redact {
			if err := redact.CheckField(f); err != nil {
				problems = append(problems, &DefinitionError{Workflow: w.Name, Field: "redact", Problem: err.Error()})
			}
		}
		defs[w.Name] = def
	}
	schedules := make(map[string]*scheduleDef, len(ss))
	for _, s := range ss {
		sd, err := compileSchedule(s)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if _, ok := defs[sd.Workflow]; !ok {
			problems = append(problems, &DefinitionError{Workflow: sd.Workflow, Field: "schedule.workflow", Problem: "the workflow is not among the workflows given"})
			continue
		}
		if _, dup := schedules[sd.Name]; dup {
			problems = append(problems, &DefinitionError{Workflow: sd.Workflow, Field: "schedule.name", Problem: fmt.Sprintf("schedule %q is defined twice", sd.Name)})
			continue
		}
		schedules[sd.Name] = sd
		if sd.ForEach != nil {
			fw := c.fanOutWorkflow(sd)
			if _, dup := defs[fw.Name]; dup {
				problems = append(problems, &DefinitionError{Workflow: fw.Name, Field: "name", Problem: fmt.Sprintf("is the name of schedule %q's fan-out workflow", sd.Name)})
				continue
			}
			def, err := compile(fw)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			defs[fw.Name] = def
		}
	}
	if len(problems) > 0 {
		return WorkflowChanges{}, errors.Join(problems...)
	}
	for _, w := range ws {
		if err := c.redact.SetWorkflow(w.Name, w.Redact); err != nil { // checked above
			return WorkflowChanges{}, fmt.Errorf("onceflow: workflow %q: %w", w.Name, err)
		}
	}
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)

	c.mu.Lock()
	old := c.names
	c.workflows, c.names, c.schedules = defs, names, schedules
	c.mu.Unlock()

	var ch WorkflowChanges
	for _, n := range names {
		if slices.Contains(old, n) {
			ch.Replaced = append(ch.Replaced, n)
		} else {
			ch.Added = append(ch.Added, n)
		}
	}
	for _, n := range old {
		if _, ok := defs[n]; !ok {
			ch.Removed = append(ch.Removed, n)
		}
	}
	c.log.Info("workflows replaced", "workflows", names, "added", ch.Added, "removed", ch.Removed, "schedules", len(schedules))
	c.poke()
	return ch, nil
}
