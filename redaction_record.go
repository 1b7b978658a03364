package onceflow

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/onceflow/onceflow/store"
)

// recordRedaction records in the store the personal-data fields each registered workflow
// declares (Workflow.Redact), so that a reader that has not registered the workflow — the
// onceflow command without the workflow files — masks its runs as this engine does (see
// LoadRecordedRedaction). Serve and Work record them when they start, and Serve again
// when they change (a reload); what was recorded already is not written again.
func (c *Client) recordRedaction(ctx context.Context) error {
	c.mu.RLock()
	list := make([]store.WorkflowRedaction, 0, len(c.workflows))
	for name, def := range c.workflows {
		list = append(list, store.WorkflowRedaction{Workflow: name, Fields: append([]string{}, def.Redact...)})
	}
	c.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Workflow < list[j].Workflow })
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	c.redactionMu.Lock()
	defer c.redactionMu.Unlock()
	if c.recordedRedaction == string(b) {
		return nil
	}
	if err := c.store.WorkflowRedactionPut(ctx, list, c.now(ctx)); err != nil {
		return fmt.Errorf("onceflow: record the workflows' personal-data fields: %w", err)
	}
	c.recordedRedaction = string(b)
	return nil
}

// LoadRecordedRedaction reads the personal-data fields that the engines serving this
// database recorded for their workflows (each engine records those its workflows declare
// when Serve or Work starts), and masks by them what this client shows about the runs of
// every workflow it has not registered itself. A program that reads runs without
// registering their workflows — a report, an audit tool, the onceflow command without
// --workflows — calls it once after New, so that it masks a run's declared personal data
// as the engine that ran it does; the fields of a registered workflow are its definition's.
func (c *Client) LoadRecordedRedaction(ctx context.Context) error {
	list, err := c.store.WorkflowRedactionList(ctx)
	if err != nil {
		return fmt.Errorf("onceflow: the workflows' personal-data fields: %w", err)
	}
	for _, wr := range list {
		if _, err := c.workflow(wr.Workflow); err == nil {
			continue // registered: its definition says
		}
		if err := c.redact.SetWorkflow(wr.Workflow, wr.Fields); err != nil {
			return fmt.Errorf("onceflow: the personal-data fields recorded for workflow %q: %w", wr.Workflow, err)
		}
	}
	return nil
}
