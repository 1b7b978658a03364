package flowfile

import (
	"github.com/onceflow/onceflow/steps/amqpstep"
	"github.com/onceflow/onceflow/steps/emailstep"
	"github.com/onceflow/onceflow/steps/gostep"
	"github.com/onceflow/onceflow/steps/httpstep"
	"github.com/onceflow/onceflow/steps/natsstep"
	"github.com/onceflow/onceflow/steps/slackstep"
	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/steps/transitionstep"
)

// What the golden dump of built definitions (built_test.go) reads of the package's
// insides: the specs the step kinds receive and the limits the definitions declare.

// BuiltSpec returns what the kind package of step i of d receives when b builds the
// step: its compiled spec (httpstep.Spec with the excerpt fields and limit keys,
// emailstep.Spec, transitionstep.Spec, sqlstep.Spec, natsstep.Spec, amqpstep.Spec) or the
// name of its Go function. nil when the step has no block of its kind.
func BuiltSpec(b *Builder, d *Definition, i int) (any, error) {
	s := d.Steps[i]
	sb := b.stepBuild(d, s, append(append([]string(nil), b.redact...), d.Redact...))
	switch c := s.Config.(type) {
	case *httpstep.Settings:
		spec, err := c.Spec()
		spec.Fields, spec.Limiter, spec.LimitKeys, spec.MaxRetryAfter = sb.Fields, sb.Limiter, sb.LimitKeys, sb.Retry.MaxRetryAfter
		return spec, err
	case *emailstep.Settings:
		return c.Spec(), nil
	case *transitionstep.Settings:
		return c.Spec(), nil
	case *sqlstep.Settings:
		return c.Spec(), nil
	case *natsstep.Settings:
		return c.Spec(), nil
	case *amqpstep.Settings:
		return c.Spec(), nil
	case *gostep.Settings:
		return c.Func, nil
	}
	return nil, nil
}

// ChannelSpecs returns, for a workflow's or step's notify block merged with the
// workflow's, the spec of each channel it names, by field: the request of its Slack
// channel (httpstep.Spec) and the message of its e-mail channel (emailstep.Spec).
func ChannelSpecs(wf, own *NotifyDef) map[string]any {
	n := merged(wf, own)
	out := map[string]any{}
	for _, c := range n.Channels {
		switch cfg := c.Channel.Config.(type) {
		case *slackstep.Channel:
			out[c.Field] = cfg.Spec()
		case *emailstep.Channel:
			out[c.Field] = cfg.Spec()
		}
	}
	return out
}

// DeclaredLimit is one limit a definition declares.
type DeclaredLimit struct {
	Key, Path, What    string
	Concurrency, Burst int
	PerSecond          float64
}

// DeclaredLimits lists the limits defs declare, in order.
func DeclaredLimits(defs []*Definition) []DeclaredLimit {
	var out []DeclaredLimit
	for _, dl := range declaredLimits(defs) {
		out = append(out, DeclaredLimit{Key: dl.key, Path: dl.path, What: dl.what, Concurrency: dl.lim.Concurrency, Burst: dl.lim.Burst, PerSecond: dl.lim.PerSecond})
	}
	return out
}
