// Package steps is the contract between onceflow's workflow files and the step kinds that
// perform their effects — an HTTP request, an e-mail, a SQL transaction, a message on a
// broker, a Slack post, a Go function. A kind is one package and one registry line; this
// package says what the package provides. The standard kinds are in steps/stdsteps; their
// reference, generated from their Specs, is docs/steps.md.
//
// # Writing a step kind
//
// A kind is a value implementing Kind, holding what its steps share: an HTTP client, a
// connection pool, a server's address. Its Spec names it (`kind: crm-upsert`) and the step
// field that holds its settings (`crm:`), and documents it: a Summary, a Doc, an Example
// step, and the JSON Schema of its block (Schema, with helper definitions in Defs named
// after the kind), from which the workflow schema editors read is generated. Settings is
// the type Decode fills; the conformance suite checks that the schema lists exactly its
// fields. A kind whose steps send requests to hosts sets Limits to accept a step's own
// limits: block; ConnectionHint says where its connection settings come from, for the
// refusal of a url, dsn or password field in a file.
//
// Decode turns the block into the kind's Config, decoding strictly with
// block.Settings.Decode into a struct with yaml tags. A decoding error — an unknown field,
// a value of the wrong type — is returned as it is: it stops the file with one problem at
// its line and column.
//
// The Config is one step's settings bound to its kind. Walk checks them, with no I/O and
// without seeing the rest of the file, and reports to a block.Walker:
//
//   - every problem, at its path inside the block ("object", "statements[1].query"); the
//     reader adds the file, line and column and the step's name;
//   - every template the step will render, with how it is used (block.Use): the reader
//     checks what it reads — the outputs of steps it needs, {run.key}, the environment only
//     where the kind allows it — and records the environment variables a program must set
//     and mask;
//   - every environment variable the block names directly (block.EnvUse), such as a
//     database's DSN variable: a secret, required to serve the file.
//
// OnUnknown says what an attempt whose outcome is unknown does by default: "" retries it
// under the same effect key (right when the destination deduplicates by it),
// onceflow.ReviewUnknown parks the step for a person (right when it cannot). Build returns
// the step's onceflow.StepFunc, given the workflow's personal-data fields, the shared
// limiter, the environment and the step's retry policy; it opens no connection — the
// first attempt does — since files are built to be checked and again on every reload.
//
// # What a step function owes the promise
//
// A StepFunc performs the effect once per effect key. It passes sc.EffectKey to the
// destination as its idempotency key, the same on every attempt (a header, a message id,
// a row in the destination's own transaction), and classifies what happened: a nil error
// for success, a plain error for a failure to retry (nothing happened),
// onceflow.PermanentError when no attempt can succeed, onceflow.UnknownOutcomeError when
// the effect may have happened (the request was sent, the answer lost). Templates are rendered with
// ParseTemplate and Template.Render, whose missing field is an error, never an empty
// value; Strings lists the strings of a decoded body, for Walk. Before it sends, it
// records what it sends with sc.RecordRequest (method, where, headers, body: the http kind
// its request, email its envelope and subject, sql its statements and arguments, nats and
// amqp their subject or exchange, headers and body), masking the values of the
// environment it read; the engine masks credentials by name and personal data, bounds
// it, and keeps it with the attempt beside sc.RecordResponse's answer.
//
// Package steptest checks all of it against a destination the kind's test controls:
// every outcome class, and the same identity on every attempt. Pass it.
//
// # Connections and notifications
//
// A kind that holds connections implements io.Closer; Registry.Close closes them. A kind
// whose steps can carry failure notifications implements Alerter: a notify block's field
// of its AlertBlock configures a channel, a step of the kind whose templates read the
// onceflow.Alert. A kind whose destinations need onceflow's tables implements
// TargetMigrator.
//
// # Registering
//
// Register kinds explicitly in a Registry — stdsteps.New returns one holding the standard
// kinds — before reading workflow files with it (flowfile.Reader); nothing registers
// itself. The example registers kind crm-upsert from Go and uses it from a file.
package steps
