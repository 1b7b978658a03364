package flowfile

// What the golden dump of built definitions (built_test.go) reads of the package's
// insides: the specs the step kinds receive and the limits the definitions declare.

// BuiltSpec returns what the kind package of step i of d receives when the step is built
// with deps: its compiled spec (httpstep.Spec with the excerpt fields and limit keys,
// emailstep.Spec, transitionstep.Spec, sqlstep.Spec, natsstep.Spec, amqpstep.Spec) or the
// name of its Go function. nil when the step has no block of its kind.
func BuiltSpec(d *Definition, i int, deps Deps) (any, error) {
	s := d.Steps[i]
	switch {
	case s.Kind == KindHTTP && s.HTTP != nil:
		return deps.forWorkflow(d).httpStepSpec(s)
	case s.Kind == KindEmail && s.Email != nil:
		return emailSpec(s.Email), nil
	case s.Kind == KindTransition && s.Transition != nil:
		return transitionSpec(s.Transition), nil
	case s.Kind == KindSQL && s.SQL != nil:
		return sqlSpec(s.SQL), nil
	case s.Kind == KindNATS && s.NATS != nil:
		return natsSpec(s.NATS), nil
	case s.Kind == KindAMQP && s.AMQP != nil:
		return amqpSpec(s.AMQP), nil
	case s.Kind == KindGo && s.Func != "":
		return s.Func, nil
	}
	return nil, nil
}

// ChannelSpecs returns, for a workflow's or step's notify block merged with the
// workflow's, the spec of each channel it names, by kind: the request of its Slack
// channel (httpstep.Spec) and the message of its e-mail channel (emailstep.Spec).
func ChannelSpecs(wf, own *NotifyDef) map[string]any {
	n := merged(wf, own)
	out := map[string]any{}
	if n.Slack != nil {
		out["slack"] = slackSpec(n.Slack.Webhook)
	}
	if n.Email != nil {
		out["email"] = emailSpec(notifyEmailDef(n.Email.To, n.Email.From))
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
