// Package onceflow runs business automations — a form that creates a CRM lead and sends a
// welcome e-mail, a payment webhook that marks an order paid and issues an invoice — so
// that every side effect happens once and none is lost, although steps are retried, runs
// are started twice, workers crash and two workers race.
//
// # Workflows, runs and steps
//
// A Workflow is a DAG of Steps. Each Step performs one side effect under an effect key,
// a template such as "lead-create:{input.submission_id}" rendered from the run's input and
// the outputs of earlier steps. A run is one execution of a workflow for one business
// event; Client.Start creates it at most once per (workflow, run key):
//
//	st, _ := sqlite.Open(ctx, "onceflow.db", sqlite.Options{})
//	client, _ := onceflow.New(onceflow.Config{Store: st})
//	client.Register(onceflow.Workflow{
//		Name:   "website-lead",
//		Entity: "lead:{input.submission_id}",
//		Steps: []onceflow.Step{
//			{ID: "crm", EffectKey: "lead-create:{input.submission_id}", Do: createLead},
//			{ID: "welcome", Needs: []string{"crm"}, EffectKey: "welcome-email:{input.submission_id}", Do: sendWelcome},
//		},
//	})
//	client.Start(ctx, "website-lead", "form-8812", map[string]any{"submission_id": 8812})
//	client.Serve(ctx) // until ctx ends
//
// Run keys, effect keys and entities follow one rule (ValidateKey, ValidateEntity): at
// most 255 bytes of UTF-8, no control characters, no invisible formatting characters
// (zero-width, bidi), no surrounding white space. They are compared byte for byte. Start
// refuses a run key or an entity that breaks the rule before anything is written; a step
// whose effect key breaks it waits for review with reason invalid_key.
//
// # The effect ledger
//
// Every effect key has at most one row in a ledger shared by all runs and workflows. A
// step whose key another step already completed is completed with the stored result
// without acting again, and the audit trail names the run that did it. A step whose key is
// being worked on elsewhere waits. A key completed with a different request (see
// Step.Fingerprint) is not reused: the step goes to review with reason key_conflict.
//
// # Retries and review
//
// A step function returns an error to fail an attempt. A plain error is retryable: the step
// is tried again, with the same effect key, after an exponential backoff with full jitter
// (RetryPolicy), or after the destination's Retry-After (RetryAfterError). A permanent
// error (PermanentError), or retries running out, parks the step in needs_review with a
// reason code, or fails it where Step.OnFailure says so. Steps that need a parked step
// wait; other branches go on.
// Config.Notify tells people about parked steps, once per incident with a digest of the
// repeats, through runs of notification workflows (see NotifyConfig).
//
// # Crashes
//
// A claimed step is leased to its worker, which renews the lease while the step runs. If
// the worker dies, the lease expires and the step's outcome is unknown: it is tried again
// with the same effect key (the attempt sees PreviousOutcome == Unknown), or parked for a
// person where Step.OnUnknown says the destination cannot deduplicate.
//
// # One clock
//
// Every time the engine writes for other processes to compare, or compares with what they
// wrote — a lease and its expiry, the reaper's cutoff, a leadership, a schedule's cursor, a
// delay's due time, a retry's — comes from one clock, Client.Now. On PostgreSQL (a
// store.ClockSource) that is the database's clock, measured against Config.Clock and
// extrapolated with the monotonic clock, so processes whose own clocks disagree still agree
// on every decision; Client.ClockStatus and the MeasureClockSkew measurement tell how far
// this machine is off. On SQLite it is Config.Clock, and a jump of it holds the reaper off
// until every live lease was renewed at the new time (see Config.ClockSync).
//
// # The audit trail
//
// Every state change and decision — a run created or deduplicated, a step claimed,
// retried with the backoff chosen, completed from the ledger, parked, a lease expired —
// is an event appended in the same transaction as the change, carrying the run, step,
// workflow, entity, effect key, attempt, actor and reason. Client.Audit and Client.Key
// answer by entity, run, key and time, each event explained (Explain). The one event
// written after its answer is a repeated Start's run.deduplicated, which changes nothing:
// it goes with the next group commit (Client.Flush waits for it), and is dropped if a
// purge deleted the run in between, never starting it again.
//
// # Group commit
//
// Concurrent Start calls and the results of concurrent steps are written one transaction
// per batch: whatever arrives while a transaction commits goes into the next one, so a busy
// client writes in batches and an idle one adds no delay. Each caller returns once the
// transaction holding its own item has committed, with its own result; a batch is never a
// reason for one item to fail another. Due steps are claimed in batches too, and a step
// released by a result recorded in this process is claimed at once. A run key this client
// remembers, started again with the same input, is answered in process, without a round
// trip to the database. Client.StartMany starts a batch of runs — an import — each item
// with its own key and result (created, duplicate, conflict or invalid), in one
// transaction on PostgreSQL.
//
// # Schedules and delays
//
// Client.RegisterSchedule starts a workflow on the clock: a cron expression in an IANA time
// zone, one run per tick with a run key rendered from the tick's nominal time, so that no
// number of processes, restarts or clock corrections starts a tick twice. One process at a
// time fires ticks (the scheduler leadership); ticks missed while none ran are started or
// skipped as Schedule.CatchUp says, each decision in the audit trail. A FanOut starts one
// run per item of a list fetched when the tick fires. Step.Delay and Step.NotBefore make a
// step wait, durably, before it runs.
//
// # Who may start a workflow from outside
//
// Start is the program's own call. Entry points open to the outside — an HTTP API, a
// webhook — start runs with StartFrom on behalf of a Caller (a token, a webhook), and one
// rule decides, for all of them, whether it may (Workflow.Access, Client.MayStart): the
// engine's own workflows (fan-out walkers, rejected-message companions, notification
// channels) do not exist for any caller, a workflow a schedule, a queue or a webhook feeds is
// closed to tokens unless its Access opens it, and a token's list and a workflow's tokens
// restrict. The audit trail names the caller as the run's starter.
//
// # Working the review queue
//
// Client.ReviewList lists the parked steps with their reasons. A person retries one with
// a fresh attempt budget (ReviewRetry), corrects the run's input and replays it
// (ReviewReplay, previewed by ReviewPreview: completed effects are never repeated),
// resolves it by hand (ReviewResolve: the key is recorded completed and dependents
// continue) or abandons it (ReviewAbandon); ReviewBulk does any of them by filter, or to
// exactly the items of a preview (BulkRequest.Items, each with the version its preview
// reported: an item that changed since is refused with ErrItemChanged). A replay that
// names the digest of its preview's plan (ReplayRequest.PlanDigest) is refused with
// ErrPlanChanged when the plan it would carry out is another. A step whose outcome is
// unknown takes only an explicit decision: ItHappened or SendAgain.
//
// # Metrics, logs and redaction
//
// Config.Metrics receives a Measurement for every run started, step claimed (with its
// lag), effect reused and attempt (with its outcome and duration); package metrics turns
// them, and the store's counts, into Prometheus series. Config.Logger receives structured
// logs; every line about a step names its run, workflow, entity, step, effect key and
// attempt. Config.Redact and Workflow.Redact name secrets and personal-data fields, which
// the engine masks in attempt records, audit details and logs before they are written
// (see Redaction).
//
// # Reading what happened
//
// The client is a Reader: RunList, RunGet (a run with its steps, attempts — those in
// flight too — and input revisions), ReviewList, ReviewGet, ReviewDetail, Audit and Key
// answer what a front-end shows, masked by the client's policy: its secrets wherever they
// appear, and the values each run holds at its personal-data fields, in inputs, outputs,
// errors, responses, sentences and details. Replay previews and plans, and the errors of
// review actions, are masked the same way. Unmasked(actor) reads as stored, each read
// first recorded in the audit trail as a data.unmasked event by actor. Stats, Ping,
// RecordOperatorEvent (sign-ins and sign-outs), MaskSecrets and LogHandler are what a
// front-end needs besides; packages onceflowhttp and onceflowui use nothing else.
package onceflow
