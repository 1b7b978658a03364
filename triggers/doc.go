// Package triggers is the contract between onceflow and what starts runs from outside the
// program: queue consumers, webhook receivers, schedules. A trigger starts runs through
// Starter, the narrow part of *onceflow.Client it needs, and says what it does by the
// capabilities it implements:
//
//   - Consumer pulls items from a source (a broker's queue) and acknowledges each only
//     once its run is stored: package queue, with natsqueue and amqpqueue;
//   - Receiver verifies and routes the deliveries a provider pushes over HTTP (a
//     webhook), which package onceflowhttp serves at /hooks/{name}: package webhook;
//   - Scheduler describes schedules, which the engine's leader fires: package schedule;
//   - Companions registers workflows of its own wherever steps run, such as the
//     NAME.rejected workflow that keeps what a consumer could not start.
//
// Package server assembles the triggers of the workflow files with the client, the API
// and the console; onceflow serve and onceflow worker both run it, so that every process
// that executes steps also consumes the queues.
//
// # Writing a trigger
//
// A trigger is a type with a Workflow method and the capabilities it needs. Its
// guarantees come from the Starter, whose methods return only once what they did is
// durably stored:
//
//   - acknowledge an item only after Start, StartFrom or Reject returned without an error for
//     it; after an error, nothing durable happened, so let the source deliver it again;
//   - derive the run key from the item's identity at its source (a message id, a
//     provider's event id), never from the time it arrived: a redelivery then finds the
//     run it started (Run.Duplicate) and starts nothing;
//   - start with Start when the program configured the trigger for its workflow (a queue
//     consumer), with StartFrom on behalf of a Caller from outside (Webhook for a verified
//     delivery), which the access rule checks and the audit trail names;
//   - keep what cannot start a run with Reject, and register the companion workflow
//     NAME.rejected that Reject starts (Companions): an item is then neither redelivered
//     in a loop nor dropped, and waits in the review queue for a person;
//   - take nothing new while Due says that more steps are due than the workers can
//     catch up with;
//   - report on Err why the trigger cannot work, with no credentials in the text: it is
//     shown by /readyz.
//
// A consumer of another broker (Kafka, SQS) is one package beside natsqueue and
// amqpqueue: it builds a queue.Handler, which implements the rules above for messages,
// and only fetches and acknowledges. A Go program registers its triggers' companions and
// runs each Consumer beside the client:
//
//	c, err := natsqueue.New(queue.Config{Workflow: "orders"}, natsqueue.Config{URL: url, Stream: "ORDERS"})
//	if err != nil {
//		return err
//	}
//	for _, w := range c.Companions(client) {
//		if err := client.Register(w); err != nil {
//			return err
//		}
//	}
//	go client.Serve(ctx)
//	return c.Run(ctx, client)
//
// # A trigger in workflow files
//
// A trigger that workflow files set up with a block at the top of the file is a Kind:
// Spec names the block (queue:), what feeds the workflow for its access rule, the block's
// JSON Schema and the type it decodes into; Decode decodes the block strictly
// (block.Settings.Decode: an unknown field stops the file at its line and column); the
// Config's Walk reports what is wrong with the settings at paths relative to the block,
// and the environment variables it names (EnvVar, Secret for a signing secret); Build
// makes the trigger, reading the environment, with an error for what the file cannot
// mend at run time. A Config whose name must be unique across the files (a webhook's
// path) implements Unique. A program registers its kinds in a Registry beside the
// standard ones and reads its files with both registries:
//
//	trigs, err := stdtriggers.New()
//	…
//	if err := trigs.Add(inbox.Kind()); err != nil { // one line per kind
//		return err
//	}
//	srv, err := server.New(ctx, server.Config{Store: st, Workflows: dirs, Triggers: trigs})
//
// The generated schema of the files (flowfile.Schema) and `onceflow schema` then list the
// block, and the reader refuses a file that misuses it with its line and column.
package triggers
