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
// (they stay in the database, due, for a client that has the workflow).
func (c *Client) ReplaceWorkflows(ws []Workflow) (WorkflowChanges, error) {
	var problems []error
	defs := make(map[string]*workflowDef, len(ws))
	for _, w := range ws {
		if _, dup := defs[w.Name]; dup {
			problems = append(problems, &DefinitionError{Workflow: w.Name, Field: "name", Problem: "is defined twice"})
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
	c.workflows, c.names = defs, names
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
	c.log.Info("workflows replaced", "workflows", names, "added", ch.Added, "removed", ch.Removed)
	c.poke()
	return ch, nil
}
