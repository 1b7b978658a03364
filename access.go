package onceflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Access says who, from outside the program, may start a workflow's runs: requests to the
// HTTP API and deliveries to webhooks (package onceflowhttp), which start runs through
// Client.StartFrom. The program's own calls to Start and StartTx, its schedules and its
// queue consumers are not limited by it.
//
// Client.MayStart decides, for every entry point, in this order:
//
//   - a workflow that is not registered, or is Internal, does not exist for the caller
//     (ErrWorkflowNotFound), whatever its token;
//   - a webhook delivery starts the workflow whose webhook verified it;
//   - a token whose Caller.Workflows is set starts only the workflows listed there;
//   - a workflow whose Tokens is set is started only by the tokens named there;
//   - a workflow a trigger feeds — Trigger is set, or a schedule was registered for it —
//     is started by tokens only with API set (or Tokens naming them): its trigger is what
//     decides when it runs and with which input;
//   - any other workflow is started by every token (with the ingest scope, which
//     onceflowhttp checks).
//
// The zero value lets every token start the workflow unless a schedule feeds it.
type Access struct {
	// Internal marks a workflow that only the engine or the program starts: a
	// schedule's fan-out walker (NAME.for-each), a queue's rejected-message companion
	// (NAME.rejected), a notification channel. No request starts it, and requests are
	// answered as if it did not exist. The engine sets it on the workflows it registers
	// for itself.
	Internal bool
	// Trigger names what feeds the workflow's runs besides the API. A schedule registered
	// with RegisterSchedule counts without it.
	Trigger Trigger
	// API lets tokens start a workflow a trigger feeds.
	API bool
	// Tokens, when set, names the only API tokens that may start the workflow; it implies
	// API.
	Tokens []string
}

// Trigger names what starts a workflow's runs besides requests to the API.
type Trigger string

// Triggers.
const (
	// TriggerSchedule: a schedule's ticks, or a fan-out's items.
	TriggerSchedule Trigger = "schedule"
	// TriggerQueue: the messages of a broker's queue.
	TriggerQueue Trigger = "queue"
	// TriggerWebhook: a provider's signed deliveries to the workflow's webhook. A token
	// that could start such a workflow would go around the signature.
	TriggerWebhook Trigger = "webhook"
)

// Caller is who asks, from outside the program, to start a run (see Access and
// StartFrom): an API token, or a webhook whose signature verified the delivery.
type Caller struct {
	// Token is the name of the API token that authenticated the request; "" for a
	// webhook delivery.
	Token string
	// Workflows, when not nil, are the only workflows the token may start.
	Workflows []string
	// Webhook is the name of the webhook that verified the delivery; "" for a request
	// with a token. The entry point passes it only for the workflow that declares the
	// webhook.
	Webhook string
	// Queue names the queue a message came from (a queue trigger's source, such as
	// nats:ORDERS/onceflow); "" for any other caller. The trigger passes it only for the
	// workflow the queue feeds.
	Queue string
}

// Actor is the caller's name in the audit trail: token:NAME for an API token,
// webhook:NAME for a webhook's delivery, queue:SOURCE for a queue's message.
func (by Caller) Actor() string {
	switch {
	case by.Webhook != "":
		return "webhook:" + by.Webhook
	case by.Queue != "":
		return "queue:" + by.Queue
	}
	return "token:" + by.Token
}

// ErrStartRefused: the caller may not start the workflow (see Access); StartFrom and
// MayStart return a *StartRefusedError, which says what would let it.
var ErrStartRefused = errors.New("start refused")

// Refusal is why a caller may not start a workflow.
type Refusal string

// Refusals.
const (
	// RefusedNotInList: the token's own list of workflows does not name the workflow.
	RefusedNotInList Refusal = "not_in_token_list"
	// RefusedTokenNotNamed: the workflow's Access.Tokens does not name the token.
	RefusedTokenNotNamed Refusal = "token_not_named"
	// RefusedTriggered: a trigger feeds the workflow and its Access does not open it to
	// tokens.
	RefusedTriggered Refusal = "triggered"
)

// StartRefusedError says why a caller may not start a workflow, and so what would let it.
type StartRefusedError struct {
	Workflow string
	Caller   Caller
	Reason   Refusal
	// Allowed are the workflows the token's list names (RefusedNotInList) or the tokens
	// the workflow names (RefusedTokenNotNamed).
	Allowed []string
	// Trigger is what feeds the workflow (RefusedTriggered).
	Trigger Trigger
}

func (e *StartRefusedError) Error() string {
	who := e.Caller.Actor()
	switch e.Reason {
	case RefusedNotInList:
		return fmt.Sprintf("%s may start only %s, not %q; add %q to the token's list of workflows to let it", who,
			strings.Join(e.Allowed, ", "), e.Workflow, e.Workflow)
	case RefusedTokenNotNamed:
		return fmt.Sprintf("workflow %q may be started only by the tokens %s, not by %s; name the token in the workflow's access tokens to let it",
			e.Workflow, strings.Join(e.Allowed, ", "), who)
	case RefusedTriggered:
		return fmt.Sprintf("workflow %q is started by its %s, not by API tokens; set its access API (api: true in a workflow file) to let tokens start it",
			e.Workflow, e.Trigger)
	}
	return fmt.Sprintf("%s may not start workflow %q: the caller names neither an API token nor a webhook", who, e.Workflow)
}

// Is reports whether target is ErrStartRefused.
func (e *StartRefusedError) Is(target error) bool { return target == ErrStartRefused }

// MayStart reports whether by may start a run of workflow: nil, a *WorkflowNotFoundError
// for a workflow that is not registered or is internal, or a *StartRefusedError. It is the
// one rule every entry point applies (see Access); StartFrom applies it too.
func (c *Client) MayStart(by Caller, workflow string) error {
	_, err := c.workflowFor(workflow, &by)
	return err
}

// StartFrom is Start on behalf of a caller from outside the program: it starts the run
// only if MayStart allows it, and the audit trail names by.Actor() as the run's starter.
func (c *Client) StartFrom(ctx context.Context, by Caller, workflow, runKey string, input any) (*Run, error) {
	return c.startAs(ctx, &by, workflow, runKey, input, by.Actor())
}

// StartableBy returns the registered workflows by may start, sorted.
func (c *Client) StartableBy(by Caller) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for _, name := range c.names {
		if mayStart(by, name, c.workflows[name].Access, c.scheduledLocked(name)) == nil {
			out = append(out, name)
		}
	}
	return out
}

// workflowFor returns the registered workflow name, checking with the same view of the
// definitions that by, when not nil, may start it.
func (c *Client) workflowFor(name string, by *Caller) (*workflowDef, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	def, ok := c.workflows[name]
	if !ok {
		return nil, &WorkflowNotFoundError{Name: name}
	}
	if by != nil {
		if err := mayStart(*by, name, def.Access, c.scheduledLocked(name)); err != nil {
			return nil, err
		}
	}
	return def, nil
}

// scheduledLocked reports whether a registered schedule starts workflow; c.mu is held.
func (c *Client) scheduledLocked(workflow string) bool {
	for _, sd := range c.schedules {
		if sd.Workflow == workflow {
			return true
		}
	}
	return false
}

// mayStart is the rule of Access for one workflow, registered under name with access a;
// scheduled says a schedule feeds it.
func mayStart(by Caller, name string, a Access, scheduled bool) error {
	if a.Internal {
		return &WorkflowNotFoundError{Name: name}
	}
	if by.Webhook != "" || by.Queue != "" {
		return nil // the entry point passes only the workflow that declares the webhook or queue
	}
	if by.Token == "" {
		return &StartRefusedError{Workflow: name, Caller: by}
	}
	if by.Workflows != nil && !slices.Contains(by.Workflows, name) {
		return &StartRefusedError{Workflow: name, Caller: by, Reason: RefusedNotInList, Allowed: by.Workflows}
	}
	if len(a.Tokens) > 0 {
		if !slices.Contains(a.Tokens, by.Token) {
			return &StartRefusedError{Workflow: name, Caller: by, Reason: RefusedTokenNotNamed, Allowed: a.Tokens}
		}
		return nil
	}
	trigger := a.Trigger
	if trigger == "" && scheduled {
		trigger = TriggerSchedule
	}
	if trigger != "" && !a.API {
		return &StartRefusedError{Workflow: name, Caller: by, Reason: RefusedTriggered, Trigger: trigger}
	}
	return nil
}

// check reports the problems of a workflow's Access through bad (see compile).
func (a Access) check(bad func(field, format string, args ...any)) {
	switch a.Trigger {
	case "", TriggerSchedule, TriggerQueue, TriggerWebhook:
	default:
		bad("access", "Access.Trigger %q is not %q, %q or %q", a.Trigger, TriggerSchedule, TriggerQueue, TriggerWebhook)
	}
	if a.Internal && (a.API || len(a.Tokens) > 0) {
		bad("access", "an internal workflow is never started from outside; remove Access.API and Access.Tokens")
	}
	seen := map[string]bool{}
	for _, t := range a.Tokens {
		switch {
		case t == "" || strings.ContainsAny(t, ":,") || strings.TrimSpace(t) != t:
			bad("access", "Access.Tokens: %q is not a token name (no spaces around it, no ':' or ',')", t)
		case seen[t]:
			bad("access", "Access.Tokens names %q twice", t)
		}
		seen[t] = true
	}
}

// CheckCallers reports, in one error, what would refuse a caller's starts whatever it
// sends: a caller whose Workflows names a workflow that is not registered, is internal,
// or that the caller may not start; and a registered workflow whose Access.Tokens names a
// token that no caller has. A program that serves an API calls it when it starts, with
// every token as a Caller (onceflowhttp.NewHandler does).
func (c *Client) CheckCallers(callers []Caller) error {
	c.mu.RLock()
	ws := make([]Workflow, 0, len(c.workflows))
	for _, name := range c.names {
		ws = append(ws, c.workflows[name].Workflow)
	}
	ss := make([]Schedule, 0, len(c.schedules))
	for _, sd := range c.schedules {
		ss = append(ss, sd.Schedule)
	}
	c.mu.RUnlock()
	return CheckCallers(callers, ws, ss)
}

// CheckCallers is Client.CheckCallers for workflows ws and schedules ss that are not yet
// registered: a program reloading its definitions calls it before it replaces them.
func CheckCallers(callers []Caller, ws []Workflow, ss []Schedule) error {
	byName := make(map[string]Access, len(ws)+len(ss))
	for _, w := range ws {
		byName[w.Name] = w.Access
	}
	scheduled := map[string]bool{}
	for _, s := range ss {
		scheduled[s.Workflow] = true
		if s.ForEach != nil {
			name := s.Name
			if name == "" {
				name = s.Workflow
			}
			byName[name+fanOutSuffix] = Access{Internal: true}
		}
	}
	var problems []error
	tokens := map[string]bool{}
	for _, by := range callers {
		if by.Token == "" {
			continue
		}
		tokens[by.Token] = true
		for _, name := range by.Workflows {
			a, ok := byName[name]
			switch {
			case !ok:
				problems = append(problems, fmt.Errorf("API token %q names workflow %q, which is not registered; remove it from the token's list or load its workflow", by.Token, name))
			case a.Internal:
				problems = append(problems, fmt.Errorf("API token %q names workflow %q, which only the engine starts (a fan-out, a rejected-message companion or a notification channel); remove it from the token's list", by.Token, name))
			default:
				if err := mayStart(by, name, a, scheduled[name]); err != nil {
					problems = append(problems, fmt.Errorf("API token %q names workflow %q, which it may not start: %w", by.Token, name, err))
				}
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, t := range byName[name].Tokens {
			if !tokens[t] {
				problems = append(problems, fmt.Errorf("workflow %q may be started only by API token %q, which is not configured; define the token or remove it from the workflow's access tokens", name, t))
			}
		}
	}
	return errors.Join(problems...)
}
