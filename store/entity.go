package store

import (
	"context"
	"time"
)

// Entity is a business object with a guarded state (an order: pending → paid → fulfilled).
type Entity struct {
	Key     string
	State   string
	Version int64
	// RunID and EffectKey name the transition that set the state.
	RunID     int64
	EffectKey string
	UpdatedAt time.Time
}

// EntityTransitionParams are the arguments of EntityTransition.
type EntityTransitionParams struct {
	Key string
	// From lists the states the entity must be in; Initial is the state of an entity that
	// has never been transitioned.
	From    []string
	Initial string
	To      string
	// EffectKey makes the transition idempotent: a transition already applied under this
	// key is reported again, not applied again.
	EffectKey string
	RunID     int64
	StepID    int64
	StepName  string
	Workflow  string
	Actor     string
	Now       time.Time
}

// TransitionResult says what EntityTransition did.
type TransitionResult struct {
	// Applied: the entity moved From → To (now, or earlier under the same effect key when
	// Replayed).
	Applied  bool
	Replayed bool
	// From is the state the entity was in; State is its state now.
	From  string
	State string
}

// Entity events.
const (
	EventEntityTransitioned EventType = "entity.transitioned"
	EventEntityRefused      EventType = "entity.transition_refused"
)

// EntityStore keeps guarded entity states; every Store is one.
type EntityStore interface {
	// EntityTransition moves an entity to To by compare-and-set if its current state is
	// one of From, in one transaction with its audit event (entity.transitioned, or
	// entity.transition_refused naming the state it found). Under an effect key it already
	// applied, it reports that transition again (Replayed) and changes nothing.
	EntityTransition(ctx context.Context, p EntityTransitionParams) (*TransitionResult, error)
	// EntityGetByKey returns ErrNotFound for an entity never transitioned.
	EntityGetByKey(ctx context.Context, key string) (*Entity, error)
}
