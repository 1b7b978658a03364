package onceflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// NotifyConfig configures failure notifications. When a step enters needs_review, every
// policy that matches it groups the event into an incident — one per policy, workflow,
// step and reason — and alerts its channels once, at the first event; repeats within the
// policy's window are counted, and when the window ends one digest reports them. Alerts
// are runs of the channels' workflows, which New registers: a channel that fails is
// retried and audited like any step, and waits for review when it gives up, without
// alerting about itself. The zero value sends nothing.
//
// Review items are read once, by whichever process leads the notifier, and matched
// against its policies: give every process that serves the same database the same
// policies and channels (the onceflow command does, from the same workflow files).
type NotifyConfig struct {
	// Policies say which review items alert which channels.
	Policies []NotifyPolicy
	// Channels are the destinations policies name.
	Channels []NotifyChannel
	// Interval is how often the notifier looks for new review items and for incidents
	// whose window ended (default 5 s).
	Interval time.Duration
}

// DefaultNotifyWindow is how long an incident collects repeats when its policy sets no
// Window.
const DefaultNotifyWindow = time.Hour

// NotifyPolicy selects review items and the channels that hear about them. Empty filters
// match everything: a policy with no Workflow, Steps or Reasons alerts about every review
// item of every workflow (except the channels' own).
type NotifyPolicy struct {
	// Name identifies the policy in incidents; it must be unique among the client's
	// policies and stay the same across restarts.
	Name string
	// Workflow restricts the policy to one workflow.
	Workflow string
	// Steps restricts the policy to these steps (IDs).
	Steps []string
	// Reasons restricts the policy to these review reasons, such as "permanent_error",
	// "attempts_exhausted", "outcome_unknown" or "key_conflict".
	Reasons []Reason
	// Window is how long after its first event an incident counts repeats before they
	// are reported in one digest (default DefaultNotifyWindow).
	Window time.Duration
	// Channels name the NotifyChannels alerted; at least one.
	Channels []string
}

// NotifyChannel is a destination of alerts: a workflow with one step, "send", whose input
// is an Alert. New registers it under Name. Its run keys come from the incident, so an
// alert is started once however many processes notice it, and its effect key —
// "NAME.send:incident:ID" for an alert, with ":digest" for a digest — goes to the
// destination as its idempotency key.
type NotifyChannel struct {
	// Name is the channel's workflow name, by convention "onceflow.notify-KIND.LABEL".
	Name string
	// Send delivers one Alert (sc.DecodeInput). Its errors are classified as any step's.
	Send StepFunc
	// Retry, OnUnknown and Timeout are the send step's policies (see Step).
	Retry     RetryPolicy
	OnUnknown UnknownAction
	Timeout   time.Duration
}

// Kinds of Alert.
const (
	// AlertFirst announces an incident at its first event.
	AlertFirst = "alert"
	// AlertDigest reports the repeats of an incident when its window has ended.
	AlertDigest = "digest"
)

// Alert is the input of a channel's run: one message about one incident, ready to send as
// a Slack-compatible webhook body ({"text": Text, "blocks": Blocks}) or as an e-mail
// (Subject, Text).
type Alert struct {
	Kind     string `json:"kind"`
	Incident int64  `json:"incident"`
	Policy   string `json:"policy"`
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
	Reason   Reason `json:"reason"`
	// Count is how many review items the message reports: 1 for an alert, the repeats
	// for a digest.
	Count int `json:"count"`
	// Since is the time of the incident's first event; Until the end of its window.
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	Window string    `json:"window"`
	// Examples are the first event (alert) or the first repeats (digest).
	Examples []AlertExample `json:"examples"`
	Subject  string         `json:"subject"`
	Text     string         `json:"text"`
	// Blocks are Slack Block Kit blocks saying what Text says.
	Blocks []map[string]any `json:"blocks"`
}

// AlertExample is one review item an Alert names.
type AlertExample struct {
	RunID  int64     `json:"run_id"`
	Entity string    `json:"entity,omitempty"`
	At     time.Time `json:"at"`
	Error  string    `json:"error,omitempty"`
}

// notifySendStep is the ID of a channel workflow's only step.
const notifySendStep = "send"

// initNotify checks Config.Notify and registers the channels' workflows.
func (c *Client) initNotify() error {
	n := &c.cfg.Notify
	if n.Interval <= 0 {
		n.Interval = 5 * time.Second
	}
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("onceflow: Config.Notify: "+format, args...))
	}
	channels := map[string]bool{}
	for i, ch := range n.Channels {
		switch {
		case channels[ch.Name]:
			bad("channel %q is defined twice", ch.Name)
			continue
		case ch.Send == nil:
			bad("channel %d (%q) has no Send function", i, ch.Name)
		}
		channels[ch.Name] = true
	}
	names := map[string]bool{}
	for i, p := range n.Policies {
		switch {
		case p.Name == "" || strings.TrimSpace(p.Name) != p.Name || !utf8.ValidString(p.Name) || len(p.Name) > 200:
			bad("policy %d: Name %q must be 1-200 bytes of UTF-8 without surrounding spaces", i, p.Name)
		case names[p.Name]:
			bad("policy %q is defined twice", p.Name)
		}
		names[p.Name] = true
		if p.Window < 0 {
			bad("policy %q: Window %v is negative", p.Name, p.Window)
		}
		if len(p.Channels) == 0 {
			bad("policy %q names no channel", p.Name)
		}
		for _, ch := range p.Channels {
			if !channels[ch] {
				bad("policy %q names channel %q, which is not among Config.Notify.Channels", p.Name, ch)
			}
		}
		if slices.Contains(p.Channels, p.Workflow) && p.Workflow != "" {
			bad("policy %q watches a channel's own workflow; channels never alert about themselves", p.Name)
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	for _, ch := range n.Channels {
		if err := c.Register(ch.workflow()); err != nil {
			return fmt.Errorf("onceflow: Config.Notify: channel %q: %w", ch.Name, err)
		}
	}
	return nil
}

// workflow is the channel's workflow, which the client registers itself and keeps when
// its definitions are replaced.
func (ch *NotifyChannel) workflow() Workflow {
	return Workflow{
		Name:          ch.Name,
		Entity:        "incident:{input.incident}",
		RequiredInput: []string{"kind", "incident"},
		Access:        Access{Internal: true},
		Steps:         []Step{{ID: notifySendStep, Do: ch.Send, Retry: ch.Retry, OnUnknown: ch.OnUnknown, Timeout: ch.Timeout}},
	}
}

// window is the policy's window with its default.
func (p *NotifyPolicy) window() time.Duration {
	if p.Window > 0 {
		return p.Window
	}
	return DefaultNotifyWindow
}

// matches reports whether the policy selects a review item of workflow/step for reason.
func (p *NotifyPolicy) matches(workflow, step string, reason Reason) bool {
	return (p.Workflow == "" || p.Workflow == workflow) &&
		(len(p.Steps) == 0 || slices.Contains(p.Steps, step)) &&
		(len(p.Reasons) == 0 || slices.Contains(p.Reasons, reason))
}

// alertDuration formats a window without zero units: "1h", "1h30m", "10m".
func alertDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// alertTime formats times in messages: in UTC, to the minute.
func alertTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// describe fills in an Alert's Subject, Text and Blocks.
func (a *Alert) describe() {
	what := fmt.Sprintf("%s/%s (%s)", a.Workflow, a.Step, a.Reason)
	ctx := fmt.Sprintf("incident %d · policy %s", a.Incident, a.Policy)
	if a.Kind == AlertDigest {
		var ex []string
		for _, e := range a.Examples {
			ex = append(ex, exampleLine(e))
		}
		more := ""
		if a.Count > len(a.Examples) {
			more = ", …"
		}
		a.Subject = fmt.Sprintf("[onceflow] %d more needs_review of %s", a.Count, what)
		a.Text = fmt.Sprintf("%d more needs_review of %s since %s; examples: %s%s", a.Count, what, alertTime(a.Since), strings.Join(ex, ", "), more)
		a.Blocks = []map[string]any{
			section(fmt.Sprintf("*%d more* needs_review of *%s/%s* (`%s`) since %s", a.Count, slackEscape(a.Workflow), slackEscape(a.Step),
				slackEscape(string(a.Reason)), alertTime(a.Since))),
			section("Examples: " + slackEscape(strings.Join(ex, ", ")+more)),
			contextBlock(ctx + " · window " + a.Window + " ended " + alertTime(a.Until)),
		}
		return
	}
	e := AlertExample{}
	if len(a.Examples) > 0 {
		e = a.Examples[0]
	}
	a.Subject = fmt.Sprintf("[onceflow] %s needs review", what)
	a.Text = fmt.Sprintf("%s needs review: %s at %s.", what, exampleLine(e), alertTime(e.At))
	if e.Error != "" {
		a.Text += "\nError: " + e.Error
	}
	a.Text += fmt.Sprintf("\nRepeats until %s are reported in one digest (%s).", alertTime(a.Until), ctx)
	a.Blocks = []map[string]any{
		section(fmt.Sprintf("*%s/%s* needs review (`%s`): %s at %s", slackEscape(a.Workflow), slackEscape(a.Step), slackEscape(string(a.Reason)),
			slackEscape(exampleLine(e)), alertTime(e.At))),
	}
	if e.Error != "" {
		a.Blocks = append(a.Blocks, section("```"+slackEscape(strings.ReplaceAll(e.Error, "```", "'''"))+"```"))
	}
	a.Blocks = append(a.Blocks, contextBlock(ctx+" · repeats within "+a.Window+" go into one digest"))
}

// exampleLine names a review item: "run 4 lead:web-1005".
func exampleLine(e AlertExample) string {
	if e.Entity == "" {
		return fmt.Sprintf("run %d", e.RunID)
	}
	return fmt.Sprintf("run %d %s", e.RunID, e.Entity)
}

func section(text string) map[string]any {
	return map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}}
}

func contextBlock(text string) map[string]any {
	return map[string]any{"type": "context", "elements": []any{map[string]any{"type": "mrkdwn", "text": slackEscape(text)}}}
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
