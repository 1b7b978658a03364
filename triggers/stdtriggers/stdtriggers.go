// Package stdtriggers holds onceflow's standard trigger kinds in one registry: a workflow
// file's webhook: block (package triggers/webhook), its queue: block with the nats: and
// amqp: brokers (triggers/queue, triggers/natsqueue, triggers/amqpqueue) and its schedule:
// block (triggers/schedule). A program that adds a kind of its own adds it to the registry
// New returns:
//
//	trigs, err := stdtriggers.New()
//	…
//	err = trigs.Add(mytrigger.Kind())
//	defs, err := (&flowfile.Reader{Kinds: kinds, Triggers: trigs}).Load("workflows")
package stdtriggers

import (
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/amqpqueue"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
	"github.com/onceflow/onceflow/triggers/schedule"
	"github.com/onceflow/onceflow/triggers/webhook"
)

// New returns a registry of the standard trigger kinds, in this order: webhook, queue
// (nats, amqp), schedule.
func New() (*triggers.Registry, error) {
	r := triggers.NewRegistry()
	for _, k := range []triggers.Kind{
		webhook.Kind(),
		queue.Kind(natsqueue.Broker(), amqpqueue.Broker()),
		schedule.Kind(),
	} {
		if err := r.Add(k); err != nil {
			return nil, err
		}
	}
	return r, nil
}
