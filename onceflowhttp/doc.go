// Package onceflowhttp is onceflow's HTTP interface: the JSON API that starts, lists and
// shows runs and acts on the review queue, and the webhook endpoints that turn signed
// provider deliveries into runs. `onceflow serve` is this handler on a listener; a Go
// program that registers its own steps (kind: go) serves the same API and webhooks with
// NewHandler.
//
// # Serving a client
//
// NewHandler takes a configured *onceflow.Client and Options; every option has a
// documented default, so Options{Tokens: tokens} is a working API:
//
//	client, _ := onceflow.New(onceflow.Config{Store: st})
//	// register workflows, e.g. those a flowfile.Builder makes from files and your Go funcs
//	hook, _ := webhook.New("payment", webhook.Config{Name: "stripe", Scheme: "stripe",
//		SecretEnv: []string{"STRIPE_WEBHOOK_SECRET"}, EventID: "{input.id}"}, os.LookupEnv)
//	h, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Tokens: tokens,
//		Receivers: []triggers.Receiver{hook}})
//	srv := onceflowhttp.HTTPServer(h)
//	go client.Serve(ctx) // executes the steps
//	srv.Serve(onceflowhttp.LimitListener(srv, listener, 0))
//
// # Bounded resources
//
// A client cannot make the server hold without bound what it sends: request bodies are
// capped one by one (Options.MaxBody) and together (Options.MaxBodyMemory: a request that
// finds no room is answered 503 with Retry-After, its body unread), HTTPServer bounds the
// time a request may take and closes idle keep-alive connections after 30 s, and
// LimitListener caps the connections open at once below the process's open-file limit
// (DefaultMaxConns), closing idle ones to make room for new ones.
//
// Package server does all of this from workflow files, with the console, the metrics,
// the queue consumers and reloading; this package is the HTTP part alone.
//
// The handler's routes live at the root: /v1/… (the API), /hooks/{name} (webhooks),
// /healthz, /readyz and, with Options.MetricsHandler, /metrics. GET /v1/openapi.json
// serves the OpenAPI 3.1 document that describes every /v1 route.
//
// # Tokens and scopes
//
// API requests carry a bearer token (Options.Tokens, or ParseTokens over the
// ONCEFLOW_API_TOKENS form "name:scope[+scope]:secret"). A token of scope ingest starts
// runs and lists the workflows; admin reads runs, the review queue, the audit trail and
// the effect ledger and acts on review items. Webhooks need no token: each delivery is
// verified by its receiver (Options.Receivers, a triggers.Receiver such as package
// triggers/webhook builds: Stripe, Standard Webhooks, GitHub or HMAC signatures), which
// also ignores the event types its workflow does not handle and derives the run key from
// the provider's event id. The server bounds the body, asks the receiver to verify it,
// checks its JSON, asks the receiver to route it and starts the run.
//
// Which workflows a token may start is the client's rule (onceflow.Access,
// Client.MayStart), applied to every start and delivery: the engine's own workflows are
// answered as unknown (404), a workflow a schedule, a queue or a webhook feeds is
// refused (403 start-refused) unless its file says api: true, and a token limited to some workflows
// ("name:scope:workflows=a+b:secret", Token.Workflows) or a file naming its tokens
// (api: {tokens: [...]}) restricts further. NewHandler refuses tokens and files that do
// not fit each other. The audit trail names a start's token (token:NAME) or webhook
// (webhook:NAME).
//
// # Query parameters
//
// Each route declares the query parameters it takes; any other, one given twice, or a
// query that is not URL-encoded is a 400 before anything is done.
//
// # Acknowledgement and idempotency
//
// Nothing is acknowledged before it is durably stored: a 2xx answer to POST
// /v1/workflows/{name}/runs or /hooks/{name} is written only after the run's transaction
// committed. Starting a run is idempotent per Idempotency-Key (or the workflow's run_key
// template applied to the body): the same key and body answer the first response again
// with Idempotent-Replayed: true, the same key with another body is a 422, and the same
// key while the first request is still in progress is a 409. A webhook delivery is
// deduplicated on the provider's event id. POST /v1/workflows/{name}/runs:batch starts up
// to Options.MaxBatchItems runs at once, each item with its own idempotency_key and its
// own result in one 200 (created, duplicate, conflict or invalid), sent once every created
// item is stored; a malformed batch, or one over a limit, is refused whole.
//
// An Idempotency-Key follows the key rules of onceflow.ValidateKey (1–255 bytes of UTF-8,
// no control characters, no invisible zero-width or bidi formatting characters, no
// surrounding white space) and is compared byte for byte: nothing is normalized or folded,
// so two keys that differ in any byte are two business events, and the rules refuse the
// characters that would make two different keys look the same. A request with more than
// one Idempotency-Key header is refused (400), and a refusal quotes at most the first 64
// bytes of a key, escaped.
//
// # Errors and redaction
//
// Errors are RFC 9457 problem documents (application/problem+json) whose type names the
// problem, such as https://onceflow.dev/problems/workflow-not-found. A database that
// cannot be reached (onceflow.ErrUnavailable) is a 503 database-unavailable with
// Retry-After, logged at warn level; other unexpected errors are a 500 that reveals
// nothing, logged as errors. What the API answers about runs — runs, review items, replay
// plans, audit events, key reports — is read through the client's read API
// (onceflow.Reader), masked as the client's onceflow.Config.Redact and each workflow's
// Redact say, and problems are masked with its secrets; the stored data stays intact for
// replays.
package onceflowhttp
