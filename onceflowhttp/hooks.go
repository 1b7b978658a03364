package onceflowhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/webhook"
)

// hookConfig builds the verification settings of a webhook, reading its secrets from the
// environment.
func (s *Server) hookConfig(h *flowfile.Webhook) (webhook.Config, error) {
	return hookConfig(h, s.cfg.Env)
}

func hookConfig(h *flowfile.Webhook, env func(string) (string, bool)) (webhook.Config, error) {
	scheme, err := webhook.ParseScheme(h.Scheme)
	if err != nil {
		return webhook.Config{}, err
	}
	if scheme == webhook.GitHub && h.EventID == "" {
		return webhook.Config{}, fmt.Errorf("webhook %q: scheme github needs event_id: its delivery id header is not signed, so the run key must come from the signed payload", h.Name)
	}
	cfg := webhook.Config{Scheme: scheme, Tolerance: time.Duration(h.Tolerance)}
	if scheme == webhook.HMAC {
		cfg.Header, cfg.Encoding, cfg.Prefix, cfg.TimestampHeader = h.Header, h.Encoding, h.Prefix, h.TimestampHeader
	}
	for _, name := range h.SecretEnv {
		if v, ok := env(name); ok && v != "" {
			cfg.Secrets = append(cfg.Secrets, v)
		}
	}
	if len(cfg.Secrets) == 0 {
		return cfg, fmt.Errorf("webhook %q: none of its secret variables %v is set", h.Name, h.SecretEnv)
	}
	if err := cfg.Validate(); err != nil {
		// The validation error never quotes a secret; name the variables to fix.
		return cfg, fmt.Errorf("webhook %q: a secret of %v is not usable: %w", h.Name, h.SecretEnv, err)
	}
	return cfg, nil
}

// CheckWebhooks reports, in one error, every webhook of defs whose signing secrets are
// missing from env or malformed, naming the webhook, its file and the variables to set.
// onceflow serve refuses to start on it, as it does for incomplete SMTP settings, rather
// than answer every delivery with a 500; a Server built anyway fails /readyz.
func CheckWebhooks(defs []*flowfile.Definition, env func(string) (string, bool)) error {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	var errs []error
	for _, d := range defs {
		if d.Webhook == nil {
			continue
		}
		if _, err := hookConfig(d.Webhook, env); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.File(), err))
		}
	}
	return errors.Join(errs...)
}

// webhook is POST /hooks/{name}: verify the signature, then start the workflow with the
// provider's event id as run key. A repeated delivery is answered 200 and starts nothing.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	def, ok := s.hook(name)
	if !ok {
		return newProblem(http.StatusNotFound, "webhook-not-found", "Webhook not found", fmt.Sprintf("no workflow declares the webhook %q", name))
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	cfg, err := s.hookConfig(def.Webhook)
	if err != nil {
		s.log.Error("webhook is not configured", "webhook", name, "error", err)
		return newProblem(http.StatusInternalServerError, "webhook-misconfigured", "Webhook not configured",
			"the receiver's webhook secret is not configured; nothing was accepted")
	}
	delivery, err := webhook.Verify(cfg, r.Header, body, s.cfg.Now())
	if err != nil {
		s.delivered(def.Name, "rejected")
	}
	switch {
	case errors.Is(err, webhook.ErrMissingSignature), errors.Is(err, webhook.ErrMalformed):
		return newProblem(http.StatusBadRequest, "signature-missing", "Signature missing or malformed", err.Error())
	case errors.Is(err, webhook.ErrBadSignature), errors.Is(err, webhook.ErrExpired):
		s.log.Warn("webhook signature refused", "webhook", name, "error", err)
		return newProblem(http.StatusUnauthorized, "signature-invalid", "Signature invalid", err.Error())
	case err != nil:
		return err
	}
	if err := s.checkBody(body); err != nil {
		return err
	}
	tree, err := keytmpl.Decode(body)
	payload, isObject := tree.(map[string]any)
	if err != nil || !isObject {
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the delivery body is not a JSON object")
	}
	hook := def.Webhook
	if len(hook.EventTypes) > 0 {
		field := hook.EventTypeField
		if field == "" {
			field = "type"
		}
		t, _ := payload[field].(string)
		if !contains(hook.EventTypes, t) {
			s.delivered(def.Name, "ignored")
			return writeJSON(w, http.StatusOK, map[string]any{"status": "ignored", "reason": fmt.Sprintf("event type %q is not handled by %s", t, def.Name)})
		}
	}
	key := delivery.ID
	if hook.EventID != "" {
		if key, err = def.DeriveEventID(body); err != nil {
			var fe *keytmpl.FieldError
			if errors.As(err, &fe) {
				return newProblem(http.StatusBadRequest, "event-id-missing", "Event id missing", fmt.Sprintf("the delivery has no event id: %v", err))
			}
			return err
		}
	}
	if key == "" {
		return newProblem(http.StatusBadRequest, "event-id-missing", "Event id missing", "the delivery carries no event id")
	}
	// The signature verified the delivery for this webhook: the audit trail names it as
	// the run's starter (webhook:NAME).
	run, err := s.cfg.Client.StartFrom(r.Context(), onceflow.Caller{Webhook: hook.Name}, def.Name, key, json.RawMessage(body))
	if errors.Is(err, onceflow.ErrWorkflowNotFound) || errors.Is(err, onceflow.ErrStartRefused) {
		return newProblem(http.StatusNotFound, "webhook-not-found", "Webhook not found", fmt.Sprintf("no workflow declares the webhook %q", name))
	}
	if err != nil {
		return startProblem(err)
	}
	if run.Duplicate {
		w.Header().Set("Idempotent-Replayed", "true")
		s.delivered(def.Name, "duplicate")
	} else {
		s.delivered(def.Name, "accepted")
	}
	return writeJSON(w, http.StatusOK, map[string]any{"status": "accepted", "run_id": run.ID, "event_id": key, "duplicate": run.Duplicate})
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
