// Package webhook is the receiver of a provider's signed deliveries: a triggers.Receiver
// that package onceflowhttp serves at /hooks/{name}. It verifies the delivery's signature
// and timestamp (Stripe, Standard Webhooks, GitHub or a generic HMAC, with several secrets
// during a rotation), ignores the event types its workflow does not handle, and derives
// the run key from the provider's event id, so that a repeated delivery starts nothing.
//
//	r, err := webhook.New("payments", webhook.Config{Name: "stripe", Scheme: "stripe",
//		SecretEnv: []string{"STRIPE_WEBHOOK_SECRET"}, EventID: "{input.id}",
//		EventTypes: []string{"payment_intent.succeeded"}}, os.LookupEnv)
//	// serve it: onceflowhttp.Options{Receivers: []triggers.Receiver{r}}
//
// The secrets are read from the environment when the receiver is built, never from a
// workflow file. A receiver whose secrets are missing or malformed is built anyway, with
// Err saying which variables to set: it answers every delivery 500 webhook-misconfigured,
// /readyz fails, and package server refuses to start with it.
package webhook

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/triggers"
)

// Config is a webhook's settings: the webhook: block of a workflow file.
type Config struct {
	// Name is the webhook's name, its path /hooks/{Name}.
	Name string
	// Scheme names how deliveries are signed: stripe, standard-webhooks, github or hmac.
	Scheme string
	// SecretEnv names the environment variables holding the signing secrets (several for
	// a rotation; any one may match).
	SecretEnv []string
	// Tolerance is how far a signed timestamp may be from the time of receipt (default 5
	// minutes).
	Tolerance time.Duration
	// EventID is a template over {input.…} (the JSON body) deriving the run key, such as
	// "{input.id}" for Stripe; the default is the delivery id header of the schemes that
	// sign one. Required for github, whose delivery id header is not signed.
	EventID string
	// EventTypes, when set, are the only event types that start runs: a delivery whose
	// EventTypeField (default "type") holds another is acknowledged and ignored.
	EventTypes     []string
	EventTypeField string
	// Header, Encoding, Prefix and TimestampHeader configure the generic hmac scheme (see
	// package internal/signature).
	Header          string
	Encoding        string
	Prefix          string
	TimestampHeader string
}

// Receiver verifies and routes the deliveries of one webhook.
type Receiver struct {
	workflow string
	cfg      Config
	sig      signature.Config
	eventID  *keytmpl.Template
	// err says why the receiver cannot verify anything (its secrets); nil when it can.
	err error
}

var _ triggers.Receiver = (*Receiver)(nil)

// New returns the receiver of workflow's webhook cfg, reading its signing secrets from
// env (nil: none is set). The error is a mistake in cfg itself — an unknown scheme, github
// without an event id, an event id template that reads more than the input; secrets that
// are missing or malformed are reported by Err instead.
func New(workflow string, cfg Config, env func(string) (string, bool)) (*Receiver, error) {
	scheme, err := signature.ParseScheme(cfg.Scheme)
	if err != nil {
		return nil, err
	}
	if scheme == signature.GitHub && cfg.EventID == "" {
		return nil, fmt.Errorf("webhook %q: scheme github needs event_id: its delivery id header is not signed, so the run key must come from the signed payload", cfg.Name)
	}
	r := &Receiver{workflow: workflow, cfg: cfg, sig: signature.Config{Scheme: scheme, Tolerance: cfg.Tolerance}}
	if cfg.EventID != "" {
		t, err := keytmpl.Parse(cfg.EventID)
		if err != nil {
			return nil, fmt.Errorf("webhook %q: event_id: %w", cfg.Name, err)
		}
		for _, f := range t.Fields() {
			if !strings.HasPrefix(f, "input.") {
				return nil, fmt.Errorf("webhook %q: event_id: {%s}: event_id may read only {input.…}", cfg.Name, f)
			}
		}
		r.eventID = t
	}
	if scheme == signature.HMAC {
		r.sig.Header, r.sig.Encoding, r.sig.Prefix, r.sig.TimestampHeader = cfg.Header, cfg.Encoding, cfg.Prefix, cfg.TimestampHeader
	}
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	for _, name := range cfg.SecretEnv {
		if v, ok := env(name); ok && v != "" {
			r.sig.Secrets = append(r.sig.Secrets, v)
		}
	}
	switch {
	case len(r.sig.Secrets) == 0:
		r.err = fmt.Errorf("webhook %q: none of its secret variables %v is set", cfg.Name, cfg.SecretEnv)
	default:
		if err := r.sig.Validate(); err != nil {
			// The validation error never quotes a secret; name the variables to fix.
			r.err = fmt.Errorf("webhook %q: a secret of %v is not usable: %w", cfg.Name, cfg.SecretEnv, err)
		}
	}
	return r, nil
}

// Workflow names the workflow the deliveries start.
func (r *Receiver) Workflow() string { return r.workflow }

// Name is the webhook's name: its path is /hooks/{Name}.
func (r *Receiver) Name() string { return r.cfg.Name }

// Config returns the receiver's settings.
func (r *Receiver) Config() Config { return r.cfg }

// Info describes the receiver for GET /v1/workflows.
func (r *Receiver) Info() triggers.ReceiverInfo {
	return triggers.ReceiverInfo{Name: r.cfg.Name, Scheme: r.cfg.Scheme, EventTypes: r.cfg.EventTypes}
}

// Err is nil when the receiver can verify deliveries, else why not: its secret variables
// are not set, or one holds a secret of the wrong form. It names the variables, never a
// secret.
func (r *Receiver) Err() error { return r.err }

// Verify checks the delivery's signature and timestamp (against d.Received) and sets d.ID
// to the delivery id of the schemes that sign one.
func (r *Receiver) Verify(d *triggers.Delivery) error {
	if r.err != nil {
		return &triggers.DeliveryError{Kind: triggers.Misconfigured, Err: r.err}
	}
	del, err := signature.Verify(r.sig, d.Header, d.Body, d.Received)
	switch {
	case errors.Is(err, signature.ErrMissingSignature), errors.Is(err, signature.ErrMalformed):
		return &triggers.DeliveryError{Kind: triggers.Unsigned, Err: err}
	case errors.Is(err, signature.ErrBadSignature):
		return &triggers.DeliveryError{Kind: triggers.Forged, Err: err}
	case errors.Is(err, signature.ErrExpired):
		return &triggers.DeliveryError{Kind: triggers.Expired, Err: err}
	case err != nil:
		return err
	}
	d.ID = del.ID
	return nil
}

// Route decides what a verified delivery starts: nothing for an event type the workflow
// does not handle, else a run keyed by the event id (the EventID template, or the
// delivery id the signature covers).
func (r *Receiver) Route(d *triggers.Delivery) (triggers.Route, error) {
	// Numbers keep every digit: an event id of 9007199254740993 is that id.
	tree, err := keytmpl.Decode(d.Body)
	payload, isObject := tree.(map[string]any)
	if err != nil || !isObject {
		return triggers.Route{}, &triggers.DeliveryError{Kind: triggers.NotJSON, Err: errors.New("the delivery body is not a JSON object")}
	}
	if len(r.cfg.EventTypes) > 0 {
		field := r.cfg.EventTypeField
		if field == "" {
			field = "type"
		}
		t, _ := payload[field].(string)
		if !slices.Contains(r.cfg.EventTypes, t) {
			return triggers.Route{Ignored: true, Why: fmt.Sprintf("event type %q is not handled by %s", t, r.workflow)}, nil
		}
	}
	key := d.ID
	if r.eventID != nil {
		if key, err = r.eventID.Render(map[string]any{"input": tree}); err != nil {
			var fe *keytmpl.FieldError
			if errors.As(err, &fe) {
				return triggers.Route{}, &triggers.DeliveryError{Kind: triggers.NoEventID, Err: fmt.Errorf("the delivery has no event id: %v", err)}
			}
			return triggers.Route{}, err
		}
	}
	if key == "" {
		return triggers.Route{}, &triggers.DeliveryError{Kind: triggers.NoEventID, Err: errors.New("the delivery carries no event id")}
	}
	return triggers.Route{RunKey: key}, nil
}
