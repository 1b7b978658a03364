package slackstep

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/httpstep"
)

var _ steps.Alerter = (*Kind)(nil)

// AlertBlock is the notify field of the channel the kind carries.
func (k *Kind) AlertBlock() string { return "slack" }

// AlertSchema is the JSON Schema of a notify block's slack channel.
func (k *Kind) AlertSchema() json.RawMessage {
	return json.RawMessage(`{
		"type": "object",
		"required": ["webhook"],
		"additionalProperties": false,
		"properties": {
			"webhook": {
				"$ref": "#/$defs/template",
				"description": "The incoming webhook's URL, from the environment: \"{env.SLACK_WEBHOOK_URL}\"."
			}
		}
	}`)
}

// AlertChannel decodes a notify block's slack channel: {webhook: "{env.NAME}"}. Each alert
// is posted as Slack's JSON, {"text": …, "blocks": […]} of the onceflow.Alert, with the
// effect key in the Idempotency-Key header; 5xx and 429 are retried, other 4xx wait for
// review. The channel is named after the variables its webhook reads.
func (k *Kind) AlertChannel(s block.Settings) (steps.Channel, error) {
	c := &Channel{kind: k}
	if err := s.Decode(c); err != nil {
		return steps.Channel{}, err
	}
	var vars []string
	if t, err := steps.ParseTemplate(c.Webhook); err == nil {
		for _, f := range t.Fields() {
			vars = append(vars, strings.TrimPrefix(f, "env."))
		}
	}
	return steps.Channel{Config: c, Label: strings.Join(vars, "-"), Identity: "slack\x00" + c.Webhook}, nil
}

// Channel is a notify block's slack channel.
type Channel struct {
	// Webhook is the URL, read from the environment, e.g. "{env.SLACK_WEBHOOK_URL}": a
	// webhook URL is a secret and never written in a workflow file.
	Webhook string `yaml:"webhook"`

	kind *Kind
}

// Spec is the request each alert is posted with.
func (c *Channel) Spec() httpstep.Spec {
	return httpstep.Spec{
		Request: httpstep.Request{Method: http.MethodPost, URL: c.Webhook, Body: map[string]any{"text": "{input.text}", "blocks": "{input.blocks}"}},
		Timeout: DefaultTimeout,
	}
}

// Walk checks that the webhook comes from the environment, whose variables are secrets.
func (c *Channel) Walk(w block.Walker) { WalkWebhook(w, c.Webhook) }

// OnUnknown leaves an alert whose post's outcome is unknown to the engine, which posts it
// again: a repeated alert is noise, a lost one is not seen.
func (c *Channel) OnUnknown() onceflow.UnknownAction { return "" }

// Build compiles the request.
func (c *Channel) Build(b *steps.Build) (onceflow.StepFunc, error) {
	if c.kind == nil || c.kind.client == nil {
		return nil, errors.New("slack notifications need an HTTP client")
	}
	st, err := httpstep.New(c.Spec(), c.kind.client, httpstep.Env(b.Env))
	if err != nil {
		return nil, err
	}
	return st.Do, nil
}
