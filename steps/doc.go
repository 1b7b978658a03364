// Package steps is the contract between onceflow's workflow files and the step kinds that
// perform their effects: an http request, an e-mail, a SQL transaction, a message on a
// broker, a Go function. A kind is one package and one registry line; this package says
// what the package provides.
//
// # Writing a step kind
//
// A kind is a value implementing Kind. Its Spec names it (`kind: crm-upsert`) and the step
// field that holds its settings (`crm:`), and documents it. Decode turns that field's
// block into the kind's Config, decoding strictly with block.Settings.Decode into a struct
// with yaml tags; a decoding error (an unknown field, a value of the wrong type) is
// returned as it is and stops the file at its line and column.
//
// The Config is the step's settings bound to its kind. Walk checks them — with no I/O and
// without seeing the rest of the file — and reports to a block.Walker every problem at its
// path inside the block, every template the step will render (with how it is used, so that
// the reader checks what it may read: the outputs of the steps it needs, {run.key},
// {env.NAME} where the environment may be read) and every environment variable it names
// directly. OnUnknown says what an unknown outcome does by default: a destination that
// cannot deduplicate sends it to review. Build returns the step's onceflow.StepFunc, given
// the workflow's personal-data fields, the shared limiter and the environment; it opens
// no connection (the first attempt does), since files are built to be checked and on every
// reload.
//
// A StepFunc performs the effect once per effect key: it passes sc.EffectKey to the
// destination as its idempotency key on every attempt, and classifies what happened —
// nil error for success, a plain error for a retryable failure, onceflow.PermanentError
// when no attempt can succeed, onceflow.UnknownOutcomeError when the effect may have
// happened. The conformance suite in package steptest checks those outcome classes
// against a destination the kind controls.
//
// A kind that holds connections implements io.Closer; Registry.Close closes them. A kind
// whose steps can carry failure notifications implements Alerter, and a notify block's
// field of its name configures a channel of it.
//
// Register kinds explicitly, in a Registry: stdsteps.New returns one holding the standard
// kinds, and a program adds its own with Add before it reads its workflow files.
package steps
