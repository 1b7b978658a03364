package onceflowhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/triggers"
)

// Options configures the handler NewHandler returns. The zero value serves the API with no
// tokens (every /v1 request answers 401), no webhooks and no metrics.
type Options struct {
	// Receivers are the webhook receivers served at /hooks/{name} (package
	// triggers/webhook builds them; package server those of the workflow files). Each
	// one's workflow must be registered on the client, and no two may share a name.
	// Server.SetReceivers replaces them.
	Receivers []triggers.Receiver
	// Tokens are the bearer tokens the API accepts (ParseTokens reads them from the form of
	// ONCEFLOW_API_TOKENS). Without any, every /v1 request answers 401; webhooks, which
	// are verified by their signatures, still work. Which workflows a token may start is
	// the client's rule (onceflow.Access), with the token's own list (Token.Workflows).
	// A request to start a run that sends no Idempotency-Key gets its key from the
	// workflow's RunKey template (onceflow.Client.DeriveRunKey).
	Tokens []Token
	// MaxBody caps request bodies, before anything is parsed or verified. Default: 1 MiB.
	MaxBody int64
	// MaxBodyMemory caps the request bodies held in memory at once, across requests: a
	// request takes its body's announced size (MaxBody when it announces none) before
	// reading it and gives it back when it is answered. One that finds no room within a
	// second is answered 503 server-busy with Retry-After, its body unread, so that
	// concurrent large bodies — webhooks are read before their signature is checked —
	// cannot exhaust memory; what a body costs while it is parsed and stored is a small
	// multiple of its size. Default: 8 × MaxBody (8 MiB), at least MaxBody.
	MaxBodyMemory int64
	// MaxDepth caps how deeply a request body's JSON may nest; a deeper body is a 400 that
	// names the limit. Default: DefaultMaxDepth. In a batch start it caps each item's input.
	MaxDepth int
	// MaxBatchItems caps the items of one POST /v1/workflows/{name}/runs:batch; more is a
	// 413 that starts nothing. Default: DefaultMaxBatchItems (1,000), which is also the
	// client's default onceflow.Config.MaxStartMany. Each item's input is bounded by MaxBody.
	MaxBatchItems int
	// MaxBatchBody caps the body of a batch start, before anything is parsed. Default:
	// DefaultMaxBatchBody (16 MiB); never more than MaxBodyMemory, which holds it.
	MaxBatchBody int64
	// Logger receives one line per request and the errors that are answered with a 500,
	// with the client's secrets masked. Default: nothing is logged.
	Logger *slog.Logger
	// Now is the clock against which webhook timestamps are checked (Delivery.Received).
	// Default: time.Now.
	Now func() time.Time
	// MetricsHandler, when set, is served at GET /metrics without a token (package
	// metrics provides one): what it serves carries no keys, entities, ids or personal
	// data. Default: no /metrics.
	MetricsHandler http.Handler
	// Metrics, when set, counts webhook deliveries (package metrics implements it).
	Metrics Metrics
	// Ready, when set, is asked by /readyz after the database: an error (such as a queue
	// consumer that cannot reach its broker) makes it answer 503 with the error's text, so
	// the text must carry no credentials. Default: the database alone decides.
	Ready func(ctx context.Context) error
	// Reload, when set, serves POST /v1/admin/reload (scope admin): it reloads the
	// workflow definitions and returns what changed, or the problems that kept the old
	// definitions in place (see Reloader and Server.SetReceivers). Default: the route
	// answers 501 reload-unavailable.
	Reload Reloader
}

// NewHandler returns the JSON API and the webhook endpoints of client as an http.Handler.
// It reads and acts through the client, whose read API masks what its
// onceflow.Config.Redact and each workflow's Redact declare. Mount it at the root of a
// server (its routes are /v1/…, /hooks/…, /healthz, /readyz and /metrics); serve it with
// HTTPServer for bounded timeouts. The client executes the steps: call client.Serve
// beside it.
//
// The error names a receiver of opts.Receivers whose workflow is not registered on the
// client, two receivers that share a name, or a token and a workflow that do not fit (a
// token whose list names a workflow that does not exist or that it may not start, a
// workflow that names a token opts.Tokens does not have; see
// onceflow.Client.CheckCallers).
func NewHandler(client *onceflow.Client, opts Options) (*Server, error) {
	if client == nil {
		return nil, errors.New("onceflowhttp: NewHandler needs a client (onceflow.New)")
	}
	if _, err := receiverMap(client, opts.Receivers); err != nil {
		return nil, err
	}
	// A token that may start nothing it lists, or a workflow that only a missing token may
	// start, is a mistake to fix before anything is served.
	callers := make([]onceflow.Caller, len(opts.Tokens))
	for i, t := range opts.Tokens {
		callers[i] = t.Caller()
	}
	if err := client.CheckCallers(callers); err != nil {
		return nil, fmt.Errorf("onceflowhttp: API tokens: %w", err)
	}
	return newServer(config{Options: opts, Client: client}), nil
}

// receiverMap returns the receivers by name, refusing one whose workflow the client does
// not have and two that share a name.
func receiverMap(client *onceflow.Client, rs []triggers.Receiver) (map[string]triggers.Receiver, error) {
	out := make(map[string]triggers.Receiver, len(rs))
	for _, r := range rs {
		if _, ok := client.Workflow(r.Workflow()); !ok {
			return nil, fmt.Errorf("onceflowhttp: webhook %q starts workflow %q, which is not registered on the client; register the workflow first", r.Name(), r.Workflow())
		}
		if other, ok := out[r.Name()]; ok {
			return nil, fmt.Errorf("onceflowhttp: workflows %q and %q both declare the webhook %q", other.Workflow(), r.Workflow(), r.Name())
		}
		out[r.Name()] = r
	}
	return out, nil
}
