package flowfile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/steps"
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
// Each channel is a field named by a step kind that carries notifications (a
// steps.Alerter: slack and email among the standard kinds), which decodes and checks it.
// One alert goes out per incident — the review items of one step with one reason — at its
// first item; the repeats within the window are reported in one digest when it ends.
type NotifyDef struct {
	// Off, on a step, sends nothing about it.
	Off bool `yaml:"off"`
	// Reasons restricts alerts to these review reasons (default: every reason).
	Reasons []string `yaml:"reasons"`
	// Window is how long an incident collects repeats before its digest (default 1h).
	Window Duration `yaml:"window"`
	// Channels are the block's channels, in the order of the kinds' registry.
	Channels []ChannelDef `yaml:"-"`
}

// ChannelDef is one channel of a notify block.
type ChannelDef struct {
	// Field is the notify block's field that configures it ("slack").
	Field string
	// Kind is the step kind that sends its alerts.
	Kind steps.Alerter
	// Channel is what the kind made of the field's settings.
	Channel steps.Channel
}

func (n *NotifyDef) channel(field string) *ChannelDef {
	for i := range n.Channels {
		if n.Channels[i].Field == field {
			return &n.Channels[i]
		}
	}
	return nil
}

var reasonRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// checkNotify validates the notify blocks of the workflow and its steps.
func (d *Definition) checkNotify() Problems {
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	var fields []string
	for _, a := range d.registry().Alerters() {
		fields = append(fields, a.AlertBlock())
	}
	d.notifyUses = nil
	if n := d.Notify; n != nil {
		if n.Off {
			add("$.notify.off", "off applies to steps; remove the workflow's notify block to send nothing")
		}
		if len(n.Channels) == 0 {
			all := steps.List(fields, "or")
			if len(fields) == 2 {
				all += " or both"
			}
			add("$.notify", "notify needs a channel: %s", all)
		}
		ps = append(ps, d.checkNotifyDef("$.notify", "", n, &d.notifyUses)...)
	}
	for i := range d.Steps {
		s := &d.Steps[i]
		s.notifyUses = nil
		n := s.Notify
		if n == nil {
			continue
		}
		at := fmt.Sprintf("$.steps[%d].notify", i)
		if n.Off {
			if len(n.Reasons) > 0 || n.Window != 0 || len(n.Channels) > 0 {
				add(at, "step %q: notify with off: true takes no other settings", s.ID)
			}
			continue
		}
		if len(n.Channels) == 0 && (d.Notify == nil || len(d.Notify.Channels) == 0) {
			add(at, "step %q: notify needs a channel (%s), here or in the workflow's notify block", s.ID, steps.List(fields, "or"))
		}
		ps = append(ps, d.checkNotifyDef(at, fmt.Sprintf("step %q: ", s.ID), n, &s.notifyUses)...)
	}
	return ps
}

func (d *Definition) checkNotifyDef(at, prefix string, n *NotifyDef, uses *[]use) Problems {
	var ps Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, d.problemAt(path, "%s%s", prefix, fmt.Sprintf(format, args...)))
	}
	for i, r := range n.Reasons {
		if !reasonRE.MatchString(r) {
			add(fmt.Sprintf("%s.reasons[%d]", at, i), "reason %q is not a review reason code such as permanent_error", r)
		}
	}
	if n.Window != 0 && time.Duration(n.Window) < time.Second {
		add(at+".window", "window %s is shorter than a second", time.Duration(n.Window))
	}
	for _, c := range n.Channels {
		c.Channel.Config.Walk(&walker{d: d, base: at + "." + c.Field, prefix: prefix, ps: &ps, uses: uses})
	}
	return ps
}

// Notify turns the notify blocks of checked definitions into the failure notification
// policies and channels of onceflow.Config.Notify: one policy per workflow block (named
// after the workflow) and per step block ("workflow/step"), and one channel per distinct
// channel setting (a Slack webhook, an e-mail address list), shared by the policies that
// name it. Each channel is a step of the kind that carries it.
func (b *Builder) Notify(defs []*Definition) (onceflow.NotifyConfig, error) {
	var cfg onceflow.NotifyConfig
	var ps Problems
	chans := map[string]string{} // channel identity → channel name
	names := map[string]bool{}
	channel := func(d *Definition, at string, c ChannelDef) string {
		key := c.Field + "\x00" + c.Channel.Identity
		if name, ok := chans[key]; ok {
			return name
		}
		name := channelName(c.Field, c.Channel.Label, c.Channel.Identity, names)
		send, err := c.Channel.Config.Build(&steps.Build{Workflow: name, Step: "send", Env: b.env})
		if err != nil {
			ps = append(ps, d.problemAt(at, "%s notifications: %v", c.Field, err))
			return ""
		}
		chans[key], names[name] = name, true
		cfg.Channels = append(cfg.Channels, onceflow.NotifyChannel{Name: name, Send: send, Retry: onceflow.RetryPolicy{MaxAttempts: 8},
			OnUnknown: c.Channel.Config.OnUnknown()})
		return name
	}
	policy := func(d *Definition, at, name string, steps []string, wf, own *NotifyDef) {
		n := merged(wf, own)
		p := onceflow.NotifyPolicy{Name: name, Workflow: d.Name, Steps: steps, Reasons: reasons(n.Reasons), Window: time.Duration(n.Window)}
		for _, c := range n.Channels {
			where := notifyOrigin(at, own, c.Field) + "." + c.Field
			if ch := channel(d, where, c); ch != "" {
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
	if len(n.Channels) == 0 {
		n.Channels = wf.Channels
	}
	return n
}

// notifyOrigin is the path of the block a channel setting comes from: the step's own, or
// the workflow's.
func notifyOrigin(at string, own *NotifyDef, field string) string {
	if at == "$.notify" || own.channel(field) != nil {
		return at
	}
	return "$.notify"
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

// reasons returns the review reason codes of a notify block's reasons: list (nil for none).
func reasons(names []string) []onceflow.Reason {
	if names == nil {
		return nil
	}
	out := make([]onceflow.Reason, len(names))
	for i, n := range names {
		out[i] = onceflow.Reason(n)
	}
	return out
}
