package flowfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/emailstep"
	"github.com/onceflow/onceflow/internal/httpstep"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// NotifyDef is a notify block: who is alerted when steps wait for review. On a workflow it
// covers every step without a notify block of its own; on a step, what it leaves out
// (reasons, window, channels) comes from the workflow's block.
//
//	notify:
//	  slack: {webhook: "{env.SLACK_OPS_WEBHOOK}"}
//	  email: {to: "ops@example.com", from: "onceflow@example.com"}
//	  reasons: [permanent_error, attempts_exhausted, outcome_unknown]
//	  window: 1h
//
// One alert goes out per incident — the review items of one step with one reason — at its
// first item; the repeats within the window are reported in one digest when it ends.
type NotifyDef struct {
	// Off, on a step, sends nothing about it.
	Off bool `yaml:"off"`
	// Reasons restricts alerts to these review reasons (default: every reason).
	Reasons []string `yaml:"reasons"`
	// Window is how long an incident collects repeats before its digest (default 1h).
	Window Duration        `yaml:"window"`
	Slack  *SlackDef       `yaml:"slack"`
	Email  *NotifyEmailDef `yaml:"email"`
}

// SlackDef posts alerts to a Slack incoming webhook, or to any endpoint that accepts its
// JSON ({"text": …, "blocks": […]}).
type SlackDef struct {
	// Webhook is the URL, read from the environment, e.g. "{env.SLACK_WEBHOOK_URL}": a
	// webhook URL is a secret and never written in a workflow file.
	Webhook string `yaml:"webhook"`
}

// NotifyEmailDef e-mails alerts through the SMTP server of ONCEFLOW_SMTP_ADDR.
type NotifyEmailDef struct {
	// To lists the recipients, separated by commas; From is the sender. Either may read
	// {env.NAME}.
	To   string `yaml:"to"`
	From string `yaml:"from"`
}

var reasonRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// checkNotify validates the notify blocks of the workflow and its steps.
func (d *Definition) checkNotify() Problems {
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	if n := d.Notify; n != nil {
		if n.Off {
			add("$.notify.off", "off applies to steps; remove the workflow's notify block to send nothing")
		}
		if n.Slack == nil && n.Email == nil {
			add("$.notify", "notify needs a channel: slack, email or both")
		}
		ps = append(ps, d.checkNotifyDef("$.notify", n)...)
	}
	for i, s := range d.Steps {
		n := s.Notify
		if n == nil {
			continue
		}
		at := fmt.Sprintf("$.steps[%d].notify", i)
		if n.Off {
			if len(n.Reasons) > 0 || n.Window != 0 || n.Slack != nil || n.Email != nil {
				add(at, "step %q: notify with off: true takes no other settings", s.ID)
			}
			continue
		}
		if n.Slack == nil && n.Email == nil && (d.Notify == nil || (d.Notify.Slack == nil && d.Notify.Email == nil)) {
			add(at, "step %q: notify needs a channel (slack or email), here or in the workflow's notify block", s.ID)
		}
		for _, p := range d.checkNotifyDef(at, n) {
			p.Message = fmt.Sprintf("step %q: %s", s.ID, p.Message)
			ps = append(ps, p)
		}
	}
	return ps
}

func (d *Definition) checkNotifyDef(at string, n *NotifyDef) Problems {
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	for i, r := range n.Reasons {
		if !reasonRE.MatchString(r) {
			add(fmt.Sprintf("%s.reasons[%d]", at, i), "reason %q is not a review reason code such as permanent_error", r)
		}
	}
	if n.Window != 0 && time.Duration(n.Window) < time.Second {
		add(at+".window", "window %s is shorter than a second", time.Duration(n.Window))
	}
	if n.Slack != nil {
		if err := envOnly(n.Slack.Webhook, true); err != nil {
			add(at+".slack.webhook", "slack webhook: %v", err)
		}
	}
	if e := n.Email; e != nil {
		for _, f := range []struct{ name, v string }{{"to", e.To}, {"from", e.From}} {
			path := at + ".email." + f.name
			if f.v == "" {
				add(at+".email", "email %s is required", f.name)
				continue
			}
			if err := envOnly(f.v, false); err != nil {
				add(path, "email %s: %v", f.name, err)
				continue
			}
			if !strings.Contains(f.v, "{") {
				if _, err := mail.ParseAddressList(f.v); err != nil {
					add(path, "email %s %q is not an address list: %v", f.name, f.v, err)
				}
			}
		}
	}
	return ps
}

// envOnly checks that a channel template reads nothing but {env.NAME}: an alert's
// destination does not depend on the review item. required says it must read one.
func envOnly(src string, required bool) error {
	if src == "" {
		return errors.New(`is required, e.g. "{env.SLACK_WEBHOOK_URL}"`)
	}
	t, err := keytmpl.Parse(src)
	if err != nil {
		return err
	}
	fields := t.Fields()
	if required && len(fields) == 0 {
		return fmt.Errorf("%q must come from the environment, e.g. \"{env.SLACK_WEBHOOK_URL}\": a webhook URL is a secret", src)
	}
	for _, f := range fields {
		name, ok := strings.CutPrefix(f, "env.")
		if !ok || !envNameRE.MatchString(name) {
			return fmt.Errorf("{%s}: notification settings read only {env.NAME}", f)
		}
	}
	return nil
}

// BuildNotify turns the notify blocks of checked definitions into the failure
// notification policies and channels of onceflow.Config.Notify: one policy per workflow
// block (named after the workflow) and per step block ("workflow/step"), and one channel
// per distinct Slack webhook or e-mail address list, shared by the policies that name it.
func BuildNotify(defs []*Definition, deps Deps) (onceflow.NotifyConfig, error) {
	var cfg onceflow.NotifyConfig
	var ps Problems
	chans := map[string]string{} // channel settings → channel name
	names := map[string]bool{}
	channel := func(d *Definition, at string, kind, label, key string, build func(name string) (onceflow.NotifyChannel, error)) string {
		if name, ok := chans[key]; ok {
			return name
		}
		name := channelName(kind, label, key, names)
		ch, err := build(name)
		if err != nil {
			ps = append(ps, d.problemAt(at, "%s notifications: %v", kind, err))
			return ""
		}
		chans[key], names[name] = name, true
		cfg.Channels = append(cfg.Channels, ch)
		return name
	}
	policy := func(d *Definition, at, name string, steps []string, wf, own *NotifyDef) {
		n := merged(wf, own)
		p := onceflow.NotifyPolicy{Name: name, Workflow: d.Name, Steps: steps, Reasons: n.Reasons, Window: time.Duration(n.Window)}
		if s := n.Slack; s != nil {
			where := notifyOrigin(at, own, func(n *NotifyDef) bool { return n.Slack != nil }) + ".slack"
			if ch := channel(d, where, "slack", strings.Join(envNames(s.Webhook), "-"), "slack\x00"+s.Webhook,
				func(name string) (onceflow.NotifyChannel, error) { return SlackChannel(name, s.Webhook, deps) }); ch != "" {
				p.Channels = append(p.Channels, ch)
			}
		}
		if e := n.Email; e != nil {
			where := notifyOrigin(at, own, func(n *NotifyDef) bool { return n.Email != nil }) + ".email"
			if ch := channel(d, where, "email", e.To, "email\x00"+e.To+"\x00"+e.From,
				func(name string) (onceflow.NotifyChannel, error) { return EmailChannel(name, e.To, e.From, deps) }); ch != "" {
				p.Channels = append(p.Channels, ch)
			}
		}
		if len(p.Channels) > 0 {
			cfg.Policies = append(cfg.Policies, p)
		}
	}
	for _, d := range defs {
		var own, rest []string
		for _, s := range d.Steps {
			if s.Notify != nil {
				own = append(own, s.ID)
			} else {
				rest = append(rest, s.ID)
			}
		}
		if d.Notify != nil && len(rest) > 0 {
			var steps []string // every step
			if len(own) > 0 {
				steps = rest
			}
			policy(d, "$.notify", d.Name, steps, nil, d.Notify)
		}
		for i, s := range d.Steps {
			if s.Notify != nil && !s.Notify.Off {
				policy(d, fmt.Sprintf("$.steps[%d].notify", i), d.Name+"/"+s.ID, []string{s.ID}, d.Notify, s.Notify)
			}
		}
	}
	if len(ps) > 0 {
		return onceflow.NotifyConfig{}, ps
	}
	return cfg, nil
}

// merged is a step's notify block completed by its workflow's.
func merged(wf, own *NotifyDef) NotifyDef {
	n := *own
	if wf == nil {
		return n
	}
	if n.Reasons == nil {
		n.Reasons = wf.Reasons
	}
	if n.Window == 0 {
		n.Window = wf.Window
	}
	if n.Slack == nil && n.Email == nil {
		n.Slack, n.Email = wf.Slack, wf.Email
	}
	return n
}

// notifyOrigin is the path of the block a channel setting comes from: the step's own, or
// the workflow's.
func notifyOrigin(at string, own *NotifyDef, has func(*NotifyDef) bool) string {
	if at == "$.notify" || has(own) {
		return at
	}
	return "$.notify"
}

func envNames(src string) []string {
	t, err := keytmpl.Parse(src)
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range t.Fields() {
		out = append(out, strings.TrimPrefix(f, "env."))
	}
	return out
}

var labelRE = regexp.MustCompile(`[^a-z0-9._-]+`)

// channelName names a channel's workflow "onceflow.notify-KIND.LABEL" after what it
// reaches (an environment variable, an address), with a hash of its settings where the
// label is long or already taken, so that the name stays the same across restarts.
func channelName(kind, label, key string, taken map[string]bool) string {
	label = strings.Trim(labelRE.ReplaceAllString(strings.ToLower(label), "-"), "-.")
	sum := sha256.Sum256([]byte(key))
	hash := hex.EncodeToString(sum[:4])
	cut := len(label) > 60
	if cut {
		label = strings.TrimRight(label[:60], "-.")
	}
	name := "onceflow.notify-" + kind
	if label != "" {
		name += "." + label
	}
	if label == "" || cut || taken[name] {
		name += "." + hash
	}
	return name
}

// SlackChannel returns a notification channel that posts each alert to a Slack incoming
// webhook — or any endpoint that accepts Slack's JSON — as an http step: the body is
// {"text": …, "blocks": […]}, the effect key goes in the Idempotency-Key header, 5xx and 429
// are retried, other 4xx wait for review. webhook reads the URL from the environment
// through deps.Env, e.g. "{env.SLACK_WEBHOOK_URL}"; deps.HTTPClient sends the request.
func SlackChannel(name, webhook string, deps Deps) (onceflow.NotifyChannel, error) {
	if err := envOnly(webhook, true); err != nil {
		return onceflow.NotifyChannel{}, fmt.Errorf("webhook: %w", err)
	}
	if deps.HTTPClient == nil {
		return onceflow.NotifyChannel{}, errors.New("slack notifications need an HTTP client")
	}
	env := deps.Env
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	st, err := httpstep.New(slackSpec(webhook), deps.HTTPClient, env)
	if err != nil {
		return onceflow.NotifyChannel{}, err
	}
	return onceflow.NotifyChannel{Name: name, Send: st.Do, Retry: onceflow.RetryPolicy{MaxAttempts: 8}}, nil
}

// EmailChannel returns a notification channel that e-mails each alert (its subject and
// text) from from to the comma-separated addresses of to, through deps.Email (the SMTP
// server of ONCEFLOW_SMTP_ADDR with StandardDeps). A message whose delivery cannot be
// confirmed waits for review rather than going out twice.
func EmailChannel(name, to, from string, deps Deps) (onceflow.NotifyChannel, error) {
	if deps.Email == nil {
		return onceflow.NotifyChannel{}, errors.New("e-mail needs an SMTP server; set ONCEFLOW_SMTP_ADDR (and ONCEFLOW_SMTP_USERNAME, ONCEFLOW_SMTP_PASSWORD)")
	}
	for _, v := range []string{to, from} {
		if err := envOnly(v, false); err != nil {
			return onceflow.NotifyChannel{}, err
		}
	}
	send, err := deps.Email(notifyEmailDef(to, from))
	if err != nil {
		return onceflow.NotifyChannel{}, err
	}
	return onceflow.NotifyChannel{Name: name, Send: send, Retry: onceflow.RetryPolicy{MaxAttempts: 8}, OnUnknown: emailstep.DefaultOnUnknown}, nil
}

// slackSpec is the request a Slack channel sends for each alert.
func slackSpec(webhook string) httpstep.Spec {
	return httpstep.Spec{
		Request: httpstep.Request{Method: "POST", URL: webhook, Body: map[string]any{"text": "{input.text}", "blocks": "{input.blocks}"}},
		Timeout: 15 * time.Second,
	}
}

// notifyEmailDef is the message an e-mail channel sends for each alert.
func notifyEmailDef(to, from string) *EmailDef {
	return &EmailDef{From: from, To: to, Subject: "{input.subject}", Body: "{input.text}"}
}
