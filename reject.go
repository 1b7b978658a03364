package onceflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// RejectedSuffix ends the name of the companion workflow that keeps, for a person, what a
// trigger could not start a run of workflow NAME from: NAME.rejected (see Reject).
const RejectedSuffix = ".rejected"

// Rejection is an item a trigger received and could not start a run from — a queue's
// message that is not a JSON object, lacks a required field, has no key, or reuses a key
// with other content — to be kept for a person rather than redelivered in a loop or
// dropped (see Client.Reject).
type Rejection struct {
	// Workflow is the workflow the item was meant to start. The item is kept as a run of
	// Workflow+RejectedSuffix, the trigger's companion workflow, which must be registered
	// wherever steps are executed.
	Workflow string
	// By, when set, is who the item came from (a webhook's delivery, a queue's message);
	// the audit trail names its Actor as the kept run's starter. Zero: "api", as Start.
	By Caller
	// Source names where the item came from, such as "amqp:orders", and Identity what
	// identifies it there: a message id, a stream sequence, a digest of the message.
	// Together they make the kept run's key, so that a redelivery keeps one item.
	Source   string
	Identity string
	// Input is what the kept run holds for the person who decides: the raw item, why it
	// was refused, what the companion needs to start the run once corrected. A JSON
	// object: a map, a struct or a json.RawMessage.
	Input any
}

// Reject keeps an item a trigger could not start a run from as a run of the companion
// workflow r.Workflow+RejectedSuffix, whose steps park it in the review queue, and returns
// once it is durably stored: the trigger may then acknowledge the item.
//
// One item is kept per identity: its run key is r.Source + "|" + r.Identity (or a digest
// of it, where that would break the key rules), so a redelivery finds the run kept
// before. Another item of the same identity with other content (two messages sharing a
// message id) is kept as a second item, under a key that adds the digest of its input,
// which a redelivery finds again. An error means nothing was kept: the item must not be
// acknowledged.
func (c *Client) Reject(ctx context.Context, r Rejection) (*Run, error) {
	companion := r.Workflow + RejectedSuffix
	if _, ok := c.Workflow(companion); !ok {
		return nil, fmt.Errorf("onceflow: keep rejected item: %w; register the companion workflow of the trigger of %s", &WorkflowNotFoundError{Name: companion}, r.Workflow)
	}
	actor := "api"
	if r.By.Token != "" || r.By.Webhook != "" || r.By.Queue != "" {
		actor = r.By.Actor()
	}
	run, err := c.startAs(ctx, nil, companion, rejectKey(r.Source, r.Identity), r.Input, actor)
	if errors.Is(err, ErrRunConflict) {
		// Another item with this identity was kept first, with other content (two
		// messages sharing a message id, or a reason that changed with the workflow): keep
		// this one too, under a key that adds its digest, which a redelivery finds again.
		raw, merr := json.Marshal(r.Input)
		if merr != nil {
			return nil, fmt.Errorf("onceflow: keep rejected item: %w", merr)
		}
		sum := sha256.Sum256(raw)
		run, err = c.startAs(ctx, nil, companion, rejectKey(r.Source, r.Identity+"|sha256:"+hex.EncodeToString(sum[:])), r.Input, actor)
	}
	if err != nil {
		return nil, fmt.Errorf("onceflow: keep rejected item: %w", err)
	}
	return run, nil
}

// rejectKey is the run key of a rejected item identified by id at source; one that would
// break the key rules is replaced by its digest.
func rejectKey(source, id string) string {
	key := source + "|" + id
	if ValidateKey("run key", key) != nil {
		sum := sha256.Sum256([]byte(key))
		key = source + "|sha256:" + hex.EncodeToString(sum[:])
		if ValidateKey("run key", key) != nil {
			key = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	return key
}
