// Package slackstep is the "slack" step kind: one message posted to a Slack incoming
// webhook, or to any endpoint that accepts its JSON ({"text": …, "blocks": […]}).
//
//   - id: tell_sales
//     kind: slack
//     effect_key: "sales-message:{input.order_id}"
//     slack:
//     webhook: "{env.SLACK_SALES_WEBHOOK}"
//     text: "Order {input.order_id} paid: {input.total} EUR"
//
// The webhook's URL is a credential: it comes from the environment and is masked whole
// wherever text leaves onceflow. The message is an http request (package httpstep)
// carrying the effect key in its Idempotency-Key header; Slack ignores the header, an
// endpoint that deduplicates by it does not.
//
// Outcomes: 2xx is success; 429 (after its Retry-After), 408, 425, 5xx and a failure
// before the request was sent are retried; another 4xx — invalid_payload, no_service,
// channel_is_archived — is permanent. A failure after the request was sent leaves the
// outcome unknown, and Slack does not deduplicate: an unknown outcome waits for review by
// default rather than posting the message twice (on_unknown: retry posts it again).
package slackstep

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/httpstep"
)

// DefaultTimeout bounds one post when the step sets no timeout.
const DefaultTimeout = 15 * time.Second

// KindOptions configure the slack kind.
type KindOptions struct {
	// Client sends the posts; it must enforce the egress policy (egress.Policy.Client).
	// Without one, files are checked but no step is built.
	Client *http.Client
}

// Kind is the slack step kind, `kind: slack` with a `slack:` block. It also posts the
// alerts of a notify block's `slack:` channel.
type Kind struct {
	client *http.Client
}

// NewKind returns the slack kind.
func NewKind(o KindOptions) *Kind { return &Kind{client: o.Client} }

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:    "slack",
		Summary: "Posts one message to a Slack incoming webhook.",
		Doc: `webhook is the incoming webhook's URL, read from the environment ("{env.NAME}"): it is a
credential, masked whole wherever text leaves onceflow. text is the message (Slack mrkdwn)
and blocks, when set, Block Kit blocks whose strings may be templates; both read the run's
input and earlier steps' outputs. The post carries the effect key in its Idempotency-Key
header, which Slack ignores and a compatible endpoint may use.

Outcomes: 2xx is success; 429 (after its Retry-After), 408, 425, 5xx and a failure before
the request was sent are retried; another 4xx (invalid_payload, no_service,
channel_is_archived) is permanent. A failure after the request was sent leaves the outcome
unknown, and Slack does not deduplicate: an unknown outcome waits for review by default
rather than posting the message twice.`,
		Example: `- id: tell_sales
  kind: slack
  effect_key: "sales-message:{input.order_id}"
  slack:
    webhook: "{env.SLACK_SALES_WEBHOOK}"
    text: "Order {input.order_id} is paid"
`,
		Schema: json.RawMessage(`{
			"type": "object",
			"required": ["webhook", "text"],
			"additionalProperties": false,
			"properties": {
				"webhook": {
					"$ref": "#/$defs/template",
					"description": "The incoming webhook's URL, from the environment: \"{env.SLACK_WEBHOOK_URL}\"."
				},
				"text": {
					"$ref": "#/$defs/template",
					"description": "The message (Slack mrkdwn), and the notification's text when blocks are set."
				},
				"blocks": {
					"type": "array",
					"description": "Block Kit blocks; their strings may be templates."
				},
				"timeout": {
					"$ref": "#/$defs/duration"
				}
			}
		}`),
		Settings: reflect.TypeFor[Settings](),
	}
}

// Decode decodes a slack block.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	c := &Settings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Settings are a slack step's settings, its `slack:` block.
type Settings struct {
	// Webhook is the URL, read from the environment, e.g. "{env.SLACK_WEBHOOK_URL}".
	Webhook string `yaml:"webhook"`
	// Text is the message; Blocks, when set, Block Kit blocks.
	Text   string `yaml:"text"`
	Blocks any    `yaml:"blocks"`
	// Timeout bounds one post (default DefaultTimeout).
	Timeout block.Duration `yaml:"timeout"`

	kind *Kind
}

// Spec is the request the message is posted with.
func (s *Settings) Spec() httpstep.Spec {
	body := map[string]any{"text": s.Text}
	if s.Blocks != nil {
		body["blocks"] = s.Blocks
	}
	timeout := time.Duration(s.Timeout)
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return httpstep.Spec{Request: httpstep.Request{Method: http.MethodPost, URL: s.Webhook, Body: body}, Timeout: timeout}
}

// Walk checks that the webhook comes from the environment and reports the message's
// templates.
func (s *Settings) Walk(w block.Walker) {
	WalkWebhook(w, s.Webhook)
	if s.Text == "" {
		w.Problem("", "slack text is required: the message")
	} else {
		w.Template("text", s.Text, block.Use{Label: "slack text", ReportParse: true})
	}
	if s.Blocks != nil {
		if _, ok := s.Blocks.([]any); !ok {
			w.Problem("blocks", "slack blocks must be a list of Block Kit blocks")
		}
		steps.Strings(s.Blocks, func(v string) {
			w.Template("blocks", v, block.Use{Label: "slack blocks", ReportParse: true})
		})
	}
}

// WalkWebhook checks a webhook setting: required, read from the environment only, its
// variables secrets.
func WalkWebhook(w block.Walker, webhook string) {
	if webhook == "" {
		w.Problem("webhook", `slack webhook: is required, e.g. "{env.SLACK_WEBHOOK_URL}"`)
		return
	}
	w.Template("webhook", webhook, block.Use{Label: "slack webhook", EnvOnly: true, Secret: true, ReportParse: true})
	if t, err := steps.ParseTemplate(webhook); err == nil && len(t.Fields()) == 0 {
		w.Problem("webhook", "slack webhook: %q must come from the environment, e.g. \"{env.SLACK_WEBHOOK_URL}\": a webhook URL is a secret", webhook)
	}
}

// OnUnknown sends an unknown outcome to review: Slack does not deduplicate, so a post that
// may have arrived is not sent again on a guess.
func (s *Settings) OnUnknown() onceflow.UnknownAction { return onceflow.ReviewUnknown }

// Build compiles the post.
func (s *Settings) Build(b *steps.Build) (onceflow.StepFunc, error) {
	if s.kind == nil || s.kind.client == nil {
		return nil, errors.New("slack steps need an HTTP client")
	}
	spec := s.Spec()
	spec.Fields = b.Fields
	spec.MaxRetryAfter = b.Retry.MaxRetryAfter
	st, err := httpstep.New(spec, s.kind.client, httpstep.Env(b.Env))
	if err != nil {
		return nil, err
	}
	return st.Do, nil
}
