package onceflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/onceflow/onceflow/store"
)

// Errors of the operator's controls.
var (
	// ErrRunFinished: a cancel found no step of the run left to cancel.
	ErrRunFinished = store.ErrRunFinished
)

// CancelResult is what CancelRun did.
type CancelResult struct {
	// Run is the run after the cancel: cancelled (or failed, if a step had failed).
	Run *Run
	// Cancelled names the steps that were pending, retrying or waiting for review.
	Cancelled []string
	// Running names the steps whose attempt was under way: they are cancelled too, and
	// their attempt is recorded when it ends.
	Running []string
}

// CancelRun cancels run id on behalf of actor, with note, in one transaction: its pending,
// retrying and needs_review steps become cancelled and are never claimed again; a step
// whose attempt is running is cancelled too, and the attempt finishes and is recorded —
// the ledger keeps what happened (a success completes its key, so it is never performed
// again). Keys whose effect cannot have happened are released; keys whose effect may have
// happened stay held. The run and every step get an audit event with the actor and note.
// errors.Is(err, ErrNotFound) for an unknown run; ErrRunFinished when nothing is left to
// cancel. A cancelled run can be replayed (see Replay).
func (c *Client) CancelRun(ctx context.Context, id int64, actor, note string) (*CancelResult, error) {
	if actor == "" {
		return nil, errors.New("onceflow: cancel: the actor is required")
	}
	res, err := c.store.RunCancel(ctx, store.RunCancelParams{RunID: id, Actor: actor, Note: note, Now: c.now(ctx)})
	if err != nil {
		return nil, fmt.Errorf("onceflow: cancel run %d: %w", id, err)
	}
	out := &CancelResult{Run: runFrom(res.Run, false)}
	for _, st := range res.Cancelled {
		out.Cancelled = append(out.Cancelled, st.Name)
	}
	for _, st := range res.Running {
		out.Running = append(out.Running, st.Name)
	}
	c.log.Info("run cancelled", "run_id", id, "workflow", res.Run.Workflow, "entity", res.Run.Entity, "actor", actor,
		"cancelled", out.Cancelled, "running", out.Running)
	return out, nil
}

// PauseWorkflow pauses the execution of a workflow, durably, on behalf of actor: runs are
// still accepted and stored, but no client claims their steps until ResumeWorkflow (steps
// already running finish). This client stops claiming at once; other clients, in other
// processes, within Config.PauseRefresh. It reports false when the workflow was already
// paused. The name need not be registered with this client, but it must be known: a name
// that is not registered, has no run stored and is not paused is refused with
// ErrWorkflowNotFound (a misspelt name would otherwise be paused for nothing).
func (c *Client) PauseWorkflow(ctx context.Context, workflow, actor, note string) (bool, error) {
	return c.setPaused(ctx, workflow, actor, note, true)
}

// ResumeWorkflow ends a pause (see PauseWorkflow); false when the workflow was not paused.
func (c *Client) ResumeWorkflow(ctx context.Context, workflow, actor, note string) (bool, error) {
	return c.setPaused(ctx, workflow, actor, note, false)
}

func (c *Client) setPaused(ctx context.Context, workflow, actor, note string, pause bool) (bool, error) {
	if !workflowNameRE.MatchString(workflow) {
		return false, &DefinitionError{Workflow: workflow, Field: "name", Problem: "is not a workflow name"}
	}
	if actor == "" {
		return false, errors.New("onceflow: pause: the actor is required")
	}
	op, do := "pause", c.store.WorkflowPause
	if !pause {
		op, do = "resume", c.store.WorkflowResume
	}
	// A name no process could mean — a typo — is not paused for ever in silence.
	known, err := c.workflowKnown(ctx, workflow)
	if err != nil {
		return false, fmt.Errorf("onceflow: %s %s: %w", op, workflow, err)
	}
	if !known {
		return false, fmt.Errorf("onceflow: %s %s: no workflow of that name is registered with this client, has runs or is paused: %w",
			op, workflow, ErrWorkflowNotFound)
	}
	p := store.WorkflowPauseParams{Workflow: workflow, Actor: actor, Note: note, Now: c.now(ctx)}
	changed, err := do(ctx, p)
	if err != nil {
		return false, fmt.Errorf("onceflow: %s %s: %w", op, workflow, err)
	}
	// This client follows at once, without waiting for its next refresh.
	c.pauseMu.Lock()
	next := maps.Clone(c.paused)
	if pause {
		next[workflow] = true
	} else {
		delete(next, workflow)
	}
	c.setPausedSet(next)
	c.pauseMu.Unlock()
	if !pause {
		c.poke()
	}
	return changed, nil
}

// workflowKnown reports whether name is a workflow pause and resume may act on: one
// registered with this client, with a run stored, or paused.
func (c *Client) workflowKnown(ctx context.Context, name string) (bool, error) {
	if _, err := c.workflow(name); err == nil {
		return true, nil
	}
	paused, err := c.store.WorkflowPauseList(ctx)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(paused, func(wp store.WorkflowPause) bool { return wp.Workflow == name }) {
		return true, nil
	}
	runs, err := c.store.RunList(ctx, store.RunListParams{Workflow: name, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(runs) > 0, nil
}

// PausedWorkflows lists the paused workflows, by name, with who paused each and why, the
// client's secrets masked in both.
func (c *Client) PausedWorkflows(ctx context.Context) ([]WorkflowPause, error) {
	list, err := c.store.WorkflowPauseList(ctx)
	if err != nil {
		return nil, fmt.Errorf("onceflow: paused workflows: %w", err)
	}
	m := c.redact.Secrets()
	for i := range list {
		list[i].Actor, list[i].Note = m.Text(list[i].Actor), m.Text(list[i].Note)
	}
	return list, nil
}

// refreshPauses reads the paused workflows: one query, made when Serve or Work starts and
// every PauseRefresh while Serve runs, never per claim.
func (c *Client) refreshPauses(ctx context.Context) error {
	list, err := c.store.WorkflowPauseList(ctx)
	if err != nil {
		return err
	}
	next := make(map[string]bool, len(list))
	for _, wp := range list {
		next[wp.Workflow] = true
	}
	c.pauseMu.Lock()
	resumed := c.setPausedSet(next)
	c.pauseMu.Unlock()
	if resumed {
		c.poke() // the resumed workflows' steps may be due
	}
	return nil
}

// setPausedSet replaces the paused set, logging what changed, and reports whether a
// workflow was resumed; pauseMu is held.
func (c *Client) setPausedSet(next map[string]bool) (resumed bool) {
	for w := range next {
		if !c.paused[w] {
			c.log.Info("workflow paused: its steps are not claimed until it is resumed", "workflow", w)
		}
	}
	for w := range c.paused {
		if !next[w] {
			c.log.Info("workflow resumed: its steps are claimed again", "workflow", w)
			resumed = true
		}
	}
	c.paused = next
	return resumed
}

// claimable returns the workflows whose steps this client claims: the registered ones
// that are not paused.
func (c *Client) claimable() []string {
	names := c.Workflows()
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	if len(c.paused) == 0 {
		return names
	}
	return slices.DeleteFunc(names, func(n string) bool { return c.paused[n] })
}

// pauseLoop refreshes the paused workflows every PauseRefresh until ctx ends.
func (c *Client) pauseLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.PauseRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.refreshPauses(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("could not read the paused workflows; keeping the last known", "error", err)
			}
			// The definitions may have been replaced (a reload) since the last tick.
			if err := c.recordRedaction(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("could not record the workflows' personal-data fields", "error", err)
			}
		}
	}
}
