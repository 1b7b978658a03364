package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/onceflow/onceflow/store"
)

// notifierLeader names the leadership that decides which of many workers notifies, and
// notifierCursor the position in the audit trail it has read up to.
const (
	notifierLeader = "notifier"
	notifierCursor = "notifier"
)

// notifyPage is how many review events one IncidentRecord applies at most.
const notifyPage = 500

// NotifyResult says what one pass of the notifier did.
type NotifyResult struct {
	// Events counts the review events read; Opened the incidents they opened.
	Events int
	Opened int
	// Alerts and Digests count the messages started (one run per channel each); Closed
	// the incidents whose window ended.
	Alerts  int
	Digests int
	Closed  int
}

// notifyLoop runs the notifier every Notify.Interval until ctx ends, on the worker that
// leads the notifier, like the lease reaper.
func (c *Client) notifyLoop(ctx context.Context) {
	if len(c.cfg.Notify.Policies) == 0 {
		return
	}
	c.leaderLoop(ctx, notifierLeader, c.cfg.Notify.Interval, nil, c.notifyOnce)
}

// notifyOnce runs one pass of the notifier and logs what it did.
func (c *Client) notifyOnce(ctx context.Context) {
	res, err := c.Notify(ctx)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("notifier failed; it tries again", "error", err, "interval", c.cfg.Notify.Interval)
	}
	if res.Opened+res.Alerts+res.Digests+res.Closed > 0 {
		c.log.Info("notifier", "review_events", res.Events, "incidents_opened", res.Opened, "alerts", res.Alerts,
			"digests", res.Digests, "incidents_closed", res.Closed)
	}
}

// Notify reads the review items that appeared since its last pass, groups them into the
// incidents of the matching policies, starts the alert of every new incident and the
// digest of every incident whose window ended. The messages are runs of the channels'
// workflows, executed like any other; their run keys come from the incident, so that
// however often Notify runs, in however many processes, an incident is alerted once and
// digested once. Serve calls Notify every Notify.Interval on the worker that leads the
// notifier; Notify itself runs unconditionally.
//
// A store that has never been notified about starts with the review items of the last
// window only (the longest of the policies'): older ones are not announced.
func (c *Client) Notify(ctx context.Context) (NotifyResult, error) {
	var res NotifyResult
	if len(c.cfg.Notify.Policies) == 0 {
		return res, nil
	}
	if err := c.notifyScan(ctx, &res); err != nil {
		return res, fmt.Errorf("onceflow: notify: %w", err)
	}
	if err := c.notifyDue(ctx, &res); err != nil {
		return res, fmt.Errorf("onceflow: notify: %w", err)
	}
	return res, nil
}

// notifyScan records the review events after the cursor as incident hits, page by page.
func (c *Client) notifyScan(ctx context.Context, res *NotifyResult) error {
	pos, found, err := c.store.IncidentCursorGet(ctx, notifierCursor)
	if err != nil {
		return err
	}
	var staleBefore time.Time
	if !found {
		var longest time.Duration
		for _, p := range c.cfg.Notify.Policies {
			longest = max(longest, p.window())
		}
		staleBefore = c.now(ctx).Add(-longest)
	}
	for {
		page, err := c.store.EventScan(ctx, store.EventScanParams{AfterID: pos, Types: []store.EventType{store.EventStepNeedsReview}, Limit: notifyPage})
		if err != nil {
			return err
		}
		if page.Through == pos {
			return nil
		}
		opened, err := c.store.IncidentRecord(ctx, store.IncidentRecordParams{
			Cursor: notifierCursor, From: pos, To: page.Through, Hits: c.notifyHits(page.Events, staleBefore),
			Actor: store.ActorNotifier, Now: c.now(ctx),
		})
		if errors.Is(err, store.ErrCursorMoved) {
			// Another process recorded these events; it, or the next pass, alerts.
			return nil
		}
		if err != nil {
			return err
		}
		res.Events += len(page.Events)
		res.Opened += len(opened)
		pos = page.Through
		if len(page.Events) < notifyPage {
			return nil
		}
	}
}

// notifyHits matches review events against the policies. A channel's own review items
// never match: a failing notifier must not notify about itself.
func (c *Client) notifyHits(evs []*store.Event, staleBefore time.Time) []store.IncidentHit {
	var hits []store.IncidentHit
	for _, e := range evs {
		if e.At.Before(staleBefore) || c.isNotifyChannel(e.Workflow) {
			continue
		}
		var d struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(e.Detail, &d)
		ex := store.IncidentExample{EventID: e.ID, RunID: e.RunID, Entity: e.Entity, At: e.At, Error: shorten(d.Error, 300)}
		for i := range c.cfg.Notify.Policies {
			p := &c.cfg.Notify.Policies[i]
			if p.matches(e.Workflow, e.StepName, e.Reason) {
				hits = append(hits, store.IncidentHit{Policy: p.Name, Workflow: e.Workflow, StepName: e.StepName, Reason: e.Reason,
					Window: p.window(), Event: ex})
			}
		}
	}
	return hits
}

func (c *Client) isNotifyChannel(workflow string) bool {
	return slices.ContainsFunc(c.cfg.Notify.Channels, func(ch NotifyChannel) bool { return ch.Name == workflow })
}

func (c *Client) notifyPolicy(name string) *NotifyPolicy {
	for i := range c.cfg.Notify.Policies {
		if c.cfg.Notify.Policies[i].Name == name {
			return &c.cfg.Notify.Policies[i]
		}
	}
	return nil
}

// notifyDue starts the alerts of new incidents and the digests of ended ones. An incident
// is marked only once its messages are started, so a crash in between starts them again
// under the same run keys, which creates nothing new. Incidents of policies this client
// does not know (renamed, or known only to another version) are left alone.
func (c *Client) notifyDue(ctx context.Context, res *NotifyResult) error {
	now := c.now(ctx)
	var policies []string
	for _, p := range c.cfg.Notify.Policies {
		policies = append(policies, p.Name)
	}
	due, err := c.store.IncidentListDue(ctx, store.IncidentListDueParams{Now: now, Policies: policies, Limit: notifyPage})
	if err != nil {
		return err
	}
	var errs []error
	mark := store.IncidentMarkParams{Actor: store.ActorNotifier, Now: now}
	for _, inc := range due {
		mark.ID = inc.ID
		p := c.notifyPolicy(inc.Policy)
		if p == nil {
			continue
		}
		if inc.AlertedAt.IsZero() {
			if err := c.startAlert(ctx, p, inc, AlertFirst); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Alerts++
			if _, err := c.store.IncidentMarkAlerted(ctx, mark); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if inc.EndsAt.After(now) {
			continue
		}
		if inc.Count > 1 {
			if err := c.startAlert(ctx, p, inc, AlertDigest); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Digests++
		}
		if _, err := c.store.IncidentClose(ctx, mark); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Closed++
	}
	return errors.Join(errs...)
}

// startAlert starts one run per channel of p for an incident's alert or digest.
func (c *Client) startAlert(ctx context.Context, p *NotifyPolicy, inc *store.Incident, kind string) error {
	a := Alert{Kind: kind, Incident: inc.ID, Policy: inc.Policy, Workflow: inc.Workflow, Step: inc.StepName, Reason: inc.Reason,
		Since: inc.OpenedAt, Until: inc.EndsAt, Window: alertDuration(inc.EndsAt.Sub(inc.OpenedAt))}
	runKey := fmt.Sprintf("incident:%d", inc.ID)
	examples := []store.IncidentExample{inc.First}
	a.Count = 1
	if kind == AlertDigest {
		runKey += ":digest"
		examples, a.Count = inc.Repeats, inc.Count-1
	}
	for _, e := range examples {
		a.Examples = append(a.Examples, AlertExample{RunID: e.RunID, Entity: e.Entity, At: e.At, Error: e.Error})
	}
	a.describe()
	for _, ch := range p.Channels {
		if err := c.startNotification(ctx, ch, runKey, a); err != nil {
			return fmt.Errorf("%s of incident %d on channel %s: %w", kind, inc.ID, ch, err)
		}
	}
	return nil
}

// startNotification starts a channel's run for a message, as the notifier. A run already
// started under the key is the same message: started by another process, or by this one
// before it crashed; its input may differ if the policy changed meanwhile, and it stands.
func (c *Client) startNotification(ctx context.Context, channel, runKey string, a Alert) error {
	p, err := c.runInsertParams(ctx, nil, channel, runKey, a)
	if err != nil {
		return err
	}
	p.Actor = store.ActorNotifier
	run, created, err := c.store.RunInsert(ctx, p)
	if err != nil {
		return err
	}
	var conflict *RunConflictError
	if _, err := c.started(p, run, created); err != nil && !errors.As(err, &conflict) {
		return err
	}
	if created {
		c.poke()
	}
	return nil
}
