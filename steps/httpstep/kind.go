package httpstep

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sort"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
)

// KindOptions configure the http kind.
type KindOptions struct {
	// Client sends the requests; it must enforce the egress policy
	// (egress.Policy.Client). Without one, files are checked but no step is built.
	Client *http.Client
}

// Kind is the http step kind, `kind: http` with an `http:` block.
type Kind struct {
	client *http.Client
}

// NewKind returns the http kind.
func NewKind(o KindOptions) *Kind { return &Kind{client: o.Client} }

var _ steps.Kind = (*Kind)(nil)

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:    "http",
		Summary: "Sends a templated HTTP request with the effect key as its idempotency key.",
		Doc: `The request's URL, headers and JSON body are templates over the run's input, earlier
steps' outputs and the environment ({env.NAME}, for URLs and credentials). Every attempt
carries the effect key in the Idempotency-Key header (idempotency_header renames it, "-"
sends none), so a destination that deduplicates by it applies the effect once.

Outcomes: 2xx is success; 408, 425, 429 and 5xx are retried, honouring Retry-After up to
the step's retry.max_retry_after; other 4xx and unfollowed 3xx are permanent and wait for
review; an error before the request was written is retried; one after it (a timeout, a
dropped connection) leaves the outcome unknown. classify: rules, first match first, change
the class of statuses. After an unknown outcome, verify: asks the destination whether the
effect exists (2xx completes the step with its answer, 404 acts again); a destination that
does not deduplicate (idempotent: false) and cannot be asked sends an unknown outcome to
review instead of sending the request again.

Requests reach public addresses only, unless the process allows others (--allow-net), and
never the process's own listeners. A step's limits: bound its own requests; a workflow's
limits: bound a host's.`,
		Example: `- id: crm_lead
  kind: http
  effect_key: "lead-create:{input.submission_id}"
  http:
    url: "{env.CRM_URL}/leads"
    headers: {Authorization: "Bearer {env.CRM_TOKEN}"}
    body: {email: "{input.email}", external_id: "{input.submission_id}"}
    verify:
      method: GET
      url: "{env.CRM_URL}/leads/by-external-id/{input.submission_id}"
      headers: {Authorization: "Bearer {env.CRM_TOKEN}"}
`,
		Schema: json.RawMessage(`{
			"$ref": "#/$defs/http.request",
			"unevaluatedProperties": false,
			"properties": {
				"idempotency_header": {
					"type": "string",
					"description": "Renames the Idempotency-Key header."
				},
				"timeout": {
					"$ref": "#/$defs/duration"
				},
				"classify": {
					"type": "array",
					"items": {
						"type": "object",
						"required": [
							"status",
							"class"
						],
						"additionalProperties": false,
						"properties": {
							"status": {
								"type": "string",
								"description": "A status (409), a class (4xx) or a range (500-503)."
							},
							"class": {
								"enum": [
									"success",
									"retryable",
									"permanent",
									"unknown"
								]
							}
						}
					}
				},
				"verify": {
					"$ref": "#/$defs/http.verify"
				},
				"idempotent": {
					"type": "boolean",
					"description": "Whether the destination deduplicates by the idempotency header (default true)."
				},
				"redact": {
					"$ref": "#/$defs/redact"
				}
			}
		}`),
		Defs: map[string]json.RawMessage{
			"http.request": json.RawMessage(`{
			"type": "object",
			"required": [
				"url"
			],
			"properties": {
				"method": {
					"type": "string",
					"description": "Default POST (GET for verify)."
				},
				"url": {
					"$ref": "#/$defs/template"
				},
				"headers": {
					"type": "object",
					"additionalProperties": {
						"type": "string"
					}
				},
				"body": {
					"description": "JSON to send; its strings may be templates."
				}
			}
		}`),
			"http.verify": json.RawMessage(`{
			"description": "After an unknown outcome, asks the destination whether the effect exists.",
			"$ref": "#/$defs/http.request",
			"unevaluatedProperties": false
		}`),
		},
		Settings: reflect.TypeFor[Settings](),
		Limits:   true,
	}
}

// Decode decodes an http block.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	c := &Settings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// RequestSettings is a templated request of a file: an http block's own, or its verify
// request.
type RequestSettings struct {
	Method  string            `yaml:"method"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	Body    any               `yaml:"body"`
}

// Settings are an http step's settings, its `http:` block.
type Settings struct {
	RequestSettings   `yaml:",inline"`
	IdempotencyHeader string           `yaml:"idempotency_header"`
	Timeout           block.Duration   `yaml:"timeout"`
	Classify          []ClassifyRule   `yaml:"classify"`
	Verify            *RequestSettings `yaml:"verify"`
	// Idempotent says whether the destination deduplicates by the idempotency header
	// (default true). A non-idempotent destination without verify sends an unknown
	// outcome to review instead of risking a second effect.
	Idempotent *bool    `yaml:"idempotent"`
	Redact     []string `yaml:"redact"`

	kind *Kind
}

// ClassifyRule maps response statuses to a class.
type ClassifyRule struct {
	Status string `yaml:"status"`
	Class  string `yaml:"class"`
}

func (r RequestSettings) request() Request {
	return Request{Method: r.Method, URL: r.URL, Headers: r.Headers, Body: r.Body}
}

// Spec is the step's request compiled from the settings, without the workflow's
// personal-data fields and limits (which Build adds); its error joins one *SpecError per
// problem.
func (s *Settings) Spec() (Spec, error) {
	spec := Spec{
		Request:           s.request(),
		IdempotencyHeader: s.IdempotencyHeader,
		Timeout:           time.Duration(s.Timeout),
		Redact:            s.Redact,
	}
	for _, r := range s.Classify {
		spec.Classify = append(spec.Classify, Rule{Status: r.Status, Class: r.Class})
	}
	if s.Verify != nil {
		v := s.Verify.request()
		spec.Verify = &v
	}
	// Compile once to report template and rule problems now.
	_, err := New(spec, http.DefaultClient, func(string) (string, bool) { return "", false })
	return spec, err
}

// Walk reports every problem of the request at its field, and its templates: the URL,
// headers and body of the request and of verify, which may read the environment.
func (s *Settings) Walk(w block.Walker) {
	if _, err := s.Spec(); err != nil {
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			where := ""
			var se *SpecError
			if errors.As(e, &se) {
				where = se.Field
			}
			w.Problem(where, "%v", e)
		}
	}
	walkRequest(w, "", "", s.RequestSettings)
	if s.Verify != nil {
		walkRequest(w, "verify.", "verify ", *s.Verify)
	}
}

func walkRequest(w block.Walker, base, label string, r RequestSettings) {
	w.Template(base+"url", r.URL, block.Use{Label: label + "url", Env: true, URL: true})
	keys := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.Template(base+"headers."+k, r.Headers[k], block.Use{Label: label + "header " + k, Env: true})
	}
	steps.Strings(r.Body, func(v string) {
		w.Template(base+"body", v, block.Use{Label: label + "body", Env: true})
	})
}

// OnUnknown sends an unknown outcome to review when the destination does not deduplicate
// (idempotent: false) and cannot be asked (no verify): a second request on a guess could
// repeat the effect.
func (s *Settings) OnUnknown() onceflow.UnknownAction {
	if s.Idempotent != nil && !*s.Idempotent && s.Verify == nil {
		return onceflow.ReviewUnknown
	}
	return ""
}

// Build compiles the step's request.
func (s *Settings) Build(b *steps.Build) (onceflow.StepFunc, error) {
	if s.kind == nil || s.kind.client == nil {
		return nil, errors.New("http steps need an HTTP client")
	}
	spec, err := s.Spec()
	if err != nil {
		return nil, err
	}
	spec.Fields = b.Fields
	spec.Limiter = b.Limiter
	spec.LimitKeys = b.LimitKeys
	spec.MaxRetryAfter = b.Retry.MaxRetryAfter
	st, err := New(spec, s.kind.client, Env(b.Env))
	if err != nil {
		return nil, err
	}
	return st.Do, nil
}

// AlertBlock is the notify field of the channel the kind carries: a Slack incoming
// webhook.
func (k *Kind) AlertBlock() string { return "slack" }

// Close closes the idle connections of the kind's client.
func (k *Kind) Close() error {
	if k.client != nil {
		k.client.CloseIdleConnections()
	}
	return nil
}
