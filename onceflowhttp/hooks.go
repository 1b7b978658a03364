package onceflowhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/triggers"
)

// webhook is POST /hooks/{name}: the receiver verifies the signature and routes the
// delivery, then the workflow starts with the provider's event id as run key. A repeated
// delivery is answered 200 and starts nothing.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	rcv, ok := s.hook(name)
	if !ok {
		return newProblem(http.StatusNotFound, "webhook-not-found", "Webhook not found", fmt.Sprintf("no workflow declares the webhook %q", name))
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	d := &triggers.Delivery{Header: r.Header, Body: body, Received: s.cfg.Now()}
	err = rcv.Verify(d)
	kind := triggers.KindOf(err)
	if err != nil && kind != triggers.Misconfigured {
		s.delivered(rcv.Workflow(), "rejected")
	}
	switch kind {
	case 0:
		if err != nil {
			return err
		}
	case triggers.Misconfigured:
		s.log.Error("webhook is not configured", "webhook", name, "error", err)
		return newProblem(http.StatusInternalServerError, "webhook-misconfigured", "Webhook not configured",
			"the receiver's webhook secret is not configured; nothing was accepted")
	case triggers.Forged, triggers.Expired:
		s.log.Warn("webhook signature refused", "webhook", name, "error", err)
		return newProblem(http.StatusUnauthorized, "signature-invalid", "Signature invalid", err.Error())
	default:
		return newProblem(http.StatusBadRequest, "signature-missing", "Signature missing or malformed", err.Error())
	}
	if err := s.checkBody(body); err != nil {
		return err
	}
	route, err := rcv.Route(d)
	switch triggers.KindOf(err) {
	case 0:
		if err != nil {
			return err
		}
	case triggers.NoEventID:
		return newProblem(http.StatusBadRequest, "event-id-missing", "Event id missing", err.Error())
	default:
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
	}
	if route.Ignored {
		s.delivered(rcv.Workflow(), "ignored")
		return writeJSON(w, http.StatusOK, map[string]any{"status": "ignored", "reason": route.Why})
	}
	// The signature verified the delivery for this webhook: the audit trail names it as
	// the run's starter (webhook:NAME).
	run, err := s.cfg.Client.StartFrom(r.Context(), onceflow.Caller{Webhook: rcv.Name()}, rcv.Workflow(), route.RunKey, json.RawMessage(body))
	if errors.Is(err, onceflow.ErrWorkflowNotFound) || errors.Is(err, onceflow.ErrStartRefused) {
		return newProblem(http.StatusNotFound, "webhook-not-found", "Webhook not found", fmt.Sprintf("no workflow declares the webhook %q", name))
	}
	if err != nil {
		return startProblem(err)
	}
	if run.Duplicate {
		w.Header().Set("Idempotent-Replayed", "true")
		s.delivered(rcv.Workflow(), "duplicate")
	} else {
		s.delivered(rcv.Workflow(), "accepted")
	}
	return writeJSON(w, http.StatusOK, map[string]any{"status": "accepted", "run_id": run.ID, "event_id": route.RunKey, "duplicate": run.Duplicate})
}
