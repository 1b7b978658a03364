package triggers

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/onceflow/onceflow"
)

// Starter is the part of the client a trigger starts runs through; *onceflow.Client
// implements it. Each method returns once what it did is durably stored, so that the
// trigger may then acknowledge what it received; an error means nothing durable happened
// and the item must not be acknowledged (the broker redelivers it, the provider sends it
// again).
type Starter interface {
	// Start starts a run of workflow under runKey, or returns the run the key already
	// started (Run.Duplicate): the start of a trigger the program configured for the
	// workflow, such as a queue consumer, which no access rule limits. The same key with
	// other input is an onceflow.ErrRunConflict; input the workflow refuses an
	// onceflow.ErrInvalidInput; a key that breaks the key rules an onceflow.ErrInvalidKey.
	Start(ctx context.Context, workflow, runKey string, input any) (*onceflow.Run, error)
	// StartFrom is Start on behalf of a caller from outside the program — a webhook
	// whose signature verified the delivery (Caller.Webhook) — under the client's access
	// rule (onceflow.Client.MayStart); the audit trail names by.Actor() as the run's
	// starter.
	StartFrom(ctx context.Context, by onceflow.Caller, workflow, runKey string, input any) (*onceflow.Run, error)
	// Reject keeps an item the trigger could not start a run from — not JSON, missing a
	// required field, no key, a key reused with other content — as a run of the
	// workflow's companion NAME.rejected, which waits in the review queue for a person:
	// the item is then neither redelivered in a loop nor dropped. One item is kept per
	// identity at its source (see onceflow.Client.Reject).
	Reject(ctx context.Context, r onceflow.Rejection) (*onceflow.Run, error)
	// Due counts the steps due and not yet claimed, by the engine's clock: a trigger
	// that could feed runs faster than the workers execute them takes nothing new while
	// the count is above its limit.
	Due(ctx context.Context) (int64, error)
}

var _ Starter = (*onceflow.Client)(nil)

// Trigger is something that starts runs of one workflow from outside the program. What
// it does besides is said by the capabilities it implements: Consumer, Receiver,
// Scheduler and Companions.
type Trigger interface {
	// Workflow names the workflow the trigger starts.
	Workflow() string
}

// Consumer is a trigger that pulls items from a source — a broker's queue — and starts a
// run for each, acknowledging an item only once Starter returned for it. Every process
// that executes steps runs the consumers (onceflow serve and onceflow worker alike), so
// that a fleet of workers shares a queue's load; the broker hands each item to one of
// them, and a redelivery to another finds the run by its key.
type Consumer interface {
	Trigger
	// Run consumes until ctx ends, connecting again with backoff whenever the source
	// cannot be reached, and returns nil when ctx ends. It returns an error only for a
	// mistake that trying again cannot mend.
	Run(ctx context.Context, s Starter) error
	// Err is nil while the consumer is connected and consuming, else why not, with no
	// credentials in its text: /readyz answers 503 with it.
	Err() error
}

// Companions is a trigger that needs workflows of its own registered wherever steps are
// executed, such as the NAME.rejected workflow whose step starts a rejected item's run
// once a person corrected it. They must be internal (onceflow.Access.Internal).
type Companions interface {
	Trigger
	// Companions returns the trigger's workflows, which start runs through s.
	Companions(s Starter) []onceflow.Workflow
}

// Scheduler is a trigger that starts runs on the clock. It only describes its schedules:
// the engine's leader fires their ticks (onceflow.Client.RegisterSchedule), one process at
// a time, with run keys from the nominal tick.
type Scheduler interface {
	Trigger
	Schedules() []onceflow.Schedule
}

// Receiver is a trigger that a provider pushes deliveries to over HTTP: a webhook,
// served by package onceflowhttp at /hooks/{Name}. The server keeps the framing — it bounds
// the body, calls Verify, checks the JSON's depth and duplicate members, calls Route, then
// starts the run with a Caller whose Webhook is Name — and answers with the status each
// *DeliveryError kind maps to.
type Receiver interface {
	Trigger
	// Name is the receiver's name, unique among the served ones: its path is
	// /hooks/{Name}.
	Name() string
	// Info describes the receiver for GET /v1/workflows.
	Info() ReceiverInfo
	// Verify checks the delivery's signature and timestamp against d.Received, and sets
	// d.ID to the delivery id the signed headers carry, if the scheme has one. Its error
	// is a *DeliveryError: Unsigned, Forged, Expired or Misconfigured.
	Verify(d *Delivery) error
	// Route decides what a verified delivery starts: the run key (the provider's event
	// id), or that the delivery is acknowledged and ignored (an event type the workflow
	// does not handle). Its error is a *DeliveryError: NotJSON or NoEventID.
	Route(d *Delivery) (Route, error)
	// Err is nil when the receiver can verify deliveries, else why not (its signing
	// secrets are missing or malformed), naming what to set and never a secret. A server
	// refuses to start while a receiver has one; /readyz fails on it.
	Err() error
}

// ReceiverInfo is what GET /v1/workflows shows of a receiver.
type ReceiverInfo struct {
	Name string
	// Scheme names how deliveries are signed, such as "stripe".
	Scheme string
	// EventTypes, when set, are the only event types that start runs.
	EventTypes []string
}

// Delivery is one HTTP delivery to a Receiver, its body already bounded.
type Delivery struct {
	Header http.Header
	Body   []byte
	// Received is when the delivery arrived, by the server's clock: Verify checks the
	// signature's timestamp against it.
	Received time.Time
	// ID is the delivery id the scheme's signed headers carry, set by Verify ("" when the
	// scheme has none).
	ID string
}

// Route is what a verified delivery starts.
type Route struct {
	// Ignored says the delivery starts nothing and is acknowledged (200), and Why says
	// why, such as an event type the workflow does not handle.
	Ignored bool
	Why     string
	// RunKey is the run's key: the provider's event id, so that a repeated delivery
	// starts nothing.
	RunKey string
}

// DeliveryErrorKind says what is wrong with a delivery, and so how it is answered.
type DeliveryErrorKind int

// Kinds of DeliveryError, with the answer onceflowhttp gives.
const (
	// Unsigned: no signature, or one that is not well-formed (400 signature-missing).
	Unsigned DeliveryErrorKind = iota + 1
	// Forged: the signature does not match the body (401 signature-invalid).
	Forged
	// Expired: the signature's timestamp is outside the tolerance (401
	// signature-invalid).
	Expired
	// NotJSON: the body is not a JSON object (400 malformed-json).
	NotJSON
	// NoEventID: the delivery carries no event id to make the run key of (400
	// event-id-missing).
	NoEventID
	// Misconfigured: the receiver cannot verify anything, its secrets being missing or
	// malformed (500 webhook-misconfigured; the detail is logged, not answered).
	Misconfigured
)

var kindNames = map[DeliveryErrorKind]string{Unsigned: "unsigned", Forged: "forged", Expired: "expired", NotJSON: "not JSON",
	NoEventID: "no event id", Misconfigured: "misconfigured"}

func (k DeliveryErrorKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "unknown"
}

// DeliveryError is why a Receiver refuses a delivery. Its text is answered to the sender
// (but for Misconfigured), so it never quotes a secret.
type DeliveryError struct {
	Kind DeliveryErrorKind
	Err  error
}

func (e *DeliveryError) Error() string {
	if e.Err == nil {
		return "delivery " + e.Kind.String()
	}
	return e.Err.Error()
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// KindOf returns the kind of the *DeliveryError in err's chain, or 0.
func KindOf(err error) DeliveryErrorKind {
	var de *DeliveryError
	if errors.As(err, &de) {
		return de.Kind
	}
	return 0
}

// Receivers returns the receivers among ts, in their order.
func Receivers(ts []Trigger) []Receiver {
	var out []Receiver
	for _, t := range ts {
		if r, ok := t.(Receiver); ok {
			out = append(out, r)
		}
	}
	return out
}

// Consumers returns the consumers among ts, in their order.
func Consumers(ts []Trigger) []Consumer {
	var out []Consumer
	for _, t := range ts {
		if c, ok := t.(Consumer); ok {
			out = append(out, c)
		}
	}
	return out
}
