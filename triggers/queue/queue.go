// Package queue is what every queue consumer shares: it turns a broker's messages into
// runs (Handler.Handle), keeps those that cannot start one for review, waits while too
// many steps are due, and reconnects with backoff. A broker is one package beside it that
// fetches messages and acknowledges them: package natsqueue (a NATS JetStream durable
// pull consumer) and package amqpqueue (a RabbitMQ queue consumed with manual
// acknowledgements and a prefetch limit). Each consumer is a triggers.Consumer.
//
// # Acknowledged only once stored
//
// Each message becomes one start (triggers.Starter.Start), through the engine's
// group-committed write path: the messages of one fetch are started
// concurrently, so they share transactions. A message is acknowledged only after the start
// returned, that is after the run is durably stored. A process that dies in between leaves
// the message unacknowledged; the broker redelivers it — to this process or another — the
// start finds the run by its key and the message is acknowledged without a second run. The
// run key is the message id (Nats-Msg-Id, AMQP message_id) or the queue's run_key
// template over {headers.NAME}, {message.id} and {input.…} (the JSON payload).
//
// # Rejected input
//
// A message that cannot start a run — not a JSON object, missing required fields, no key,
// a key already used with another payload — is kept for a person, then acknowledged: it is
// started as a run of the companion workflow NAME.rejected (Handler.Companion), whose input
// holds the raw message, its headers and the reason, and whose one step tries what the
// trigger tried and parks in needs_review with the reason as its review reason. It is thus
// in the review queue with everything needed to decide, is never redelivered in a loop and
// never dropped; a person corrects it and replays it, which starts the message's run. Its
// run key is the message's identity at the source, so a redelivery keeps one item; another
// message of the same identity with other content (two messages sharing a message id) is
// kept as a second item, under a key that adds its digest.
//
// # Message size
//
// A message is at most Config.MaxMessageBytes long, its payload and headers together
// (default DefaultMaxMessageBytes, 1 MiB: the API's body limit). A longer one starts no
// run and is not parsed: it is kept for review (reason message_too_large) with its size and
// the SHA-256 digest of its payload in place of its body, and acknowledged. What a consumer
// holds at once is bounded by the broker: a JetStream fetch asks for at most Batch ×
// MaxMessageBytes bytes (never less than one message of the server's max_payload, so that
// a message above the limit can still be taken and kept for review rather than block the
// consumer), and a RabbitMQ consumer holds at most Prefetch messages, each as large as the
// broker lets a publisher send (its max_message_size): RabbitMQ has no byte limit for a
// consumer, so set max_message_size near the limit to bound it.
//
// # Back-pressure and connections
//
// Before each fetch the consumer looks at the steps due and not yet claimed
// (triggers.Starter.Due, by the engine's clock); while there are more than MaxBacklog it
// pulls nothing. A connection that cannot be made or is lost is tried again with
// exponential backoff (Handler.Reconnect); Err says whether the consumer is connected and
// why not, for /readyz and the metrics.
//
// # Writing a broker
//
// A broker package builds a Handler with NewHandler and, in its consumer's Run, calls
// Handler.Reconnect with a session that connects, calls Handler.WaitBacklog before each
// fetch, hands each batch to Handler.HandleAll and acknowledges exactly the messages
// whose error is nil. Its consumer embeds the *Handler, which provides Workflow, Err and
// Companions.
package queue

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/jsondoc"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/triggers"
)

// Review reasons of rejected messages.
const (
	// ReasonInputNotJSON: the payload is not a JSON object (or not UTF-8).
	ReasonInputNotJSON onceflow.Reason = "input_not_json"
	// ReasonInputInvalid: the payload lacks what the workflow requires, nests too deeply or
	// names a member twice.
	ReasonInputInvalid onceflow.Reason = "input_invalid"
	// ReasonRunKeyMissing: no run key could be derived, or it breaks the key rules.
	ReasonRunKeyMissing onceflow.Reason = "run_key_missing"
	// ReasonRunKeyConflict: the run key is already used with another payload.
	ReasonRunKeyConflict onceflow.Reason = "run_key_conflict"
	// ReasonMessageTooLarge: the message is longer than Config.MaxMessageBytes; its body
	// was not kept.
	ReasonMessageTooLarge onceflow.Reason = "message_too_large"
)

// DefaultMaxMessageBytes is the default of Config.MaxMessageBytes: 1 MiB, the API's
// default body limit (onceflowhttp.Options.MaxBody), so that a queue takes what the API
// takes.
const DefaultMaxMessageBytes = 1 << 20

// DefaultMaxBacklog is the default of Config.MaxBacklog.
const DefaultMaxBacklog = 10000

// maxKeptHeaderBytes is how many bytes of headers the review item of a message too large
// keeps; longer headers are left out, with their size.
const maxKeptHeaderBytes = 16 << 10

// Message is one delivery, whatever the broker.
type Message struct {
	// ID is the broker's message id ("" when the publisher set none).
	ID      string
	Headers map[string]string
	Payload []byte
	// Identity identifies the message at its source when it has no ID (the stream
	// sequence; a digest of the message).
	Identity string
}

// Size is the message's length as the limit counts it: its payload and its headers'
// names and values, in bytes.
func (m Message) Size() int {
	return len(m.Payload) + headerBytes(m.Headers)
}

func headerBytes(h map[string]string) int {
	n := 0
	for k, v := range h {
		n += len(k) + len(v)
	}
	return n
}

// Metrics receives what a consumer measures (triggers.Metrics).
type Metrics = triggers.Metrics

// Hooks are called at points of a batch's life, for tests that kill the process there.
// They belong to one Handler.
type Hooks struct {
	// BeforeStore is called with each batch of messages received, before any of them is
	// handled.
	BeforeStore func(n int)
	// AfterStored is called once the batch was handled, before any of it is
	// acknowledged.
	AfterStored func(n int)
}

// Config configures a Handler: what a queue's messages start, and how much it takes.
type Config struct {
	// Workflow is the workflow the messages start.
	Workflow string
	// Source names the queue, such as "nats:ORDERS/onceflow-orders" or "amqp:orders": it
	// prefixes the run keys of rejected messages. The broker package sets it when it is
	// empty.
	Source string
	// URLEnv names the environment variable the broker's URL came from, for the message
	// of a broker that cannot be reached ("" when it did not come from one).
	URLEnv string
	// RunKey is a template deriving the run key from the message, over {headers.NAME},
	// {message.id} and {input.…} (the JSON payload), such as "{headers.Event-Id}"; ""
	// means the message id.
	RunKey string
	// MaxBacklog pauses pulling while more steps than this are due (default
	// DefaultMaxBacklog).
	MaxBacklog int
	// MaxDepth caps how deeply a message's JSON may nest (default jsondoc.DefaultMaxDepth);
	// a deeper message is kept for review, as is one that is not UTF-8 or names a member
	// twice (jsondoc.Check).
	MaxDepth int
	// MaxMessageBytes is the longest message, payload and headers, that may start a run
	// (default DefaultMaxMessageBytes). A longer one is kept for review with its size and
	// digest instead of its body (ReasonMessageTooLarge), and acknowledged.
	MaxMessageBytes int
	Logger          *slog.Logger
	Metrics         Metrics
	Hooks           Hooks
}

// Handler turns a queue's messages into runs; a broker's consumer embeds it.
type Handler struct {
	cfg    Config
	broker string
	runKey *keytmpl.Template
	status status

	paused    atomic.Bool
	backlogMu sync.Mutex
	backlogAt time.Time
	backlogN  int64
}

// NewHandler returns the handler of a queue of broker ("nats", "amqp": the label of its
// metrics) configured by cfg, with its defaults applied. cfg.Source must be set. The
// error says what is wrong with cfg.RunKey.
func NewHandler(cfg Config, broker string) (*Handler, error) {
	if cfg.Workflow == "" || cfg.Source == "" {
		return nil, errors.New("queue: Config.Workflow and Config.Source are required")
	}
	if cfg.MaxBacklog <= 0 {
		cfg.MaxBacklog = DefaultMaxBacklog
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, broker: broker}
	if cfg.RunKey != "" {
		t, err := ParseRunKey(cfg.RunKey)
		if err != nil {
			return nil, fmt.Errorf("%s: run_key: %w", cfg.Source, err)
		}
		h.runKey = t
	}
	h.status.err = fmt.Errorf("%s: not connected yet", cfg.Source)
	return h, nil
}

// ParseRunKey parses a queue's run_key template, refusing one that reads anything but
// {headers.NAME}, {message.id} and {input.…}.
func ParseRunKey(src string) (*keytmpl.Template, error) {
	t, err := keytmpl.Parse(src)
	if err != nil {
		return nil, err
	}
	for _, f := range t.Fields() {
		if !runKeyFieldOK(f) {
			return nil, fmt.Errorf("{%s}: a queue's run_key reads {headers.NAME}, {message.id} and {input.…} (the JSON payload)", f)
		}
	}
	return t, nil
}

// runKeyFieldRE is what a queue's run_key template may read.
var runKeyFieldRE = regexp.MustCompile(`^(input\..+|headers\.[^.]+|message\.id)$`)

func runKeyFieldOK(f string) bool { return runKeyFieldRE.MatchString(f) }

// Config returns the handler's configuration, its defaults applied.
func (h *Handler) Config() Config { return h.cfg }

// Workflow names the workflow the messages start.
func (h *Handler) Workflow() string { return h.cfg.Workflow }

// status is whether a consumer is connected.
type status struct {
	mu  sync.Mutex
	err error
}

// Err is nil while the consumer is connected and consuming, else why not.
func (h *Handler) Err() error {
	h.status.mu.Lock()
	defer h.status.mu.Unlock()
	return h.status.err
}

// SetStatus records whether the consumer is connected (err nil) or why not, for Err and
// the metrics, and logs the moment it connects.
func (h *Handler) SetStatus(err error) {
	h.status.mu.Lock()
	changed := (h.status.err == nil) != (err == nil)
	h.status.err = err
	h.status.mu.Unlock()
	if h.cfg.Metrics != nil {
		h.cfg.Metrics.QueueConnected(h.cfg.Workflow, h.broker, err == nil)
	}
	if changed && err == nil {
		h.cfg.Logger.Info("queue consumer connected", "workflow", h.cfg.Workflow, "source", h.cfg.Source)
	}
}

// Unreachable is the error of a broker that cannot be reached (what names it, such as
// "NATS server"): what to check.
func (h *Handler) Unreachable(what string, err error) error {
	if h.cfg.URLEnv == "" {
		return fmt.Errorf("%s: cannot reach the %s: %w; check its URL and that it is running", h.cfg.Source, what, err)
	}
	return fmt.Errorf("%s: cannot reach the %s: %w; check %s and that the server is running", h.cfg.Source, what, err, h.cfg.URLEnv)
}

// Outcomes of Handle.
const (
	Started   = "started"
	Duplicate = "duplicate"
	Rejected  = "rejected"
)

// Handle starts the message's run through s, or keeps it as rejected input, and returns
// once that is durably stored: the message may then be acknowledged. An error means
// nothing durable happened (the store is unreachable): the message must not be
// acknowledged.
func (h *Handler) Handle(ctx context.Context, s triggers.Starter, m Message) (string, error) {
	out, err := h.handle(ctx, s, m)
	if err == nil && h.cfg.Metrics != nil {
		h.cfg.Metrics.QueueMessage(h.cfg.Workflow, out)
	}
	return out, err
}

func (h *Handler) handle(ctx context.Context, s triggers.Starter, m Message) (string, error) {
	if size := m.Size(); size > h.cfg.MaxMessageBytes {
		return h.rejectTooLarge(ctx, s, m, size)
	}
	if reason, err := checkPayload(m.Payload, h.cfg.MaxDepth); err != nil {
		return h.reject(ctx, s, m, reason, err.Error())
	}
	tree, err := keytmpl.Decode(m.Payload)
	if _, isObject := tree.(map[string]any); err != nil || !isObject {
		return h.reject(ctx, s, m, ReasonInputNotJSON, "the message is not a JSON object")
	}
	key, err := messageKey(h.runKey, tree, m.Headers, m.ID)
	if err != nil {
		return h.reject(ctx, s, m, ReasonRunKeyMissing, err.Error())
	}
	run, err := s.StartFrom(ctx, h.caller(), h.cfg.Workflow, key, json.RawMessage(m.Payload))
	if reason := startRefused(err); reason != "" {
		return h.reject(ctx, s, m, reason, err.Error())
	}
	switch {
	case err != nil:
		return "", err
	case run.Duplicate:
		return Duplicate, nil
	}
	return Started, nil
}

// checkPayload applies the checks an API body gets (jsondoc.Check) to a message's payload
// and returns the review reason of a refusal. maxDepth <= 0 is the default limit.
func checkPayload(payload []byte, maxDepth int) (onceflow.Reason, error) {
	err := jsondoc.Check(payload, maxDepth, "the message")
	if err == nil {
		return "", nil
	}
	var de *jsondoc.Error
	if errors.As(err, &de) && (de.Kind == jsondoc.DuplicateMember || de.Kind == jsondoc.TooDeep) {
		return ReasonInputInvalid, err // JSON, but not an input onceflow takes
	}
	return ReasonInputNotJSON, err
}

// messageKey derives a message's run key: the template over its payload, headers and
// message id, or without a template the message id.
func messageKey(tmpl *keytmpl.Template, payload any, headers map[string]string, id string) (string, error) {
	if tmpl == nil {
		if id == "" {
			return "", errors.New("the message has no message id (Nats-Msg-Id or AMQP message_id) and the queue has no run_key template")
		}
		return id, nil
	}
	h := map[string]any{}
	for k, v := range headers {
		h[k] = v
	}
	key, err := tmpl.Render(map[string]any{"input": payload, "headers": h, "message": map[string]any{"id": id}})
	if err != nil {
		return "", fmt.Errorf("run_key: %w", err)
	}
	return key, nil
}

// startRefused is the review reason of a start that refused a message's run, or "" when
// err is nil or not a refusal (the store failed: nothing was decided).
func startRefused(err error) onceflow.Reason {
	switch {
	case errors.Is(err, onceflow.ErrInvalidInput):
		return ReasonInputInvalid
	case errors.Is(err, onceflow.ErrInvalidKey):
		return ReasonRunKeyMissing
	case errors.Is(err, onceflow.ErrRunConflict):
		return ReasonRunKeyConflict
	}
	return ""
}

// RejectSuffix ends the name of the workflow that keeps a workflow's rejected messages.
const RejectSuffix = onceflow.RejectedSuffix

// identity is what identifies m at its source: its message id, else its Identity, else a
// digest of its payload and headers.
func identity(m Message) string {
	switch {
	case m.ID != "":
		return m.ID
	case m.Identity != "":
		return m.Identity
	}
	h := sha256.New()
	h.Write(m.Payload)
	fmt.Fprint(h, m.Headers)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// reject keeps m as a run of the companion workflow, which parks for review.
func (h *Handler) reject(ctx context.Context, s triggers.Starter, m Message, reason onceflow.Reason, why string) (string, error) {
	in := map[string]any{"source": h.cfg.Source, "message_id": m.ID, "identity": identity(m), "reason": reason, "error": why, "headers": m.Headers}
	if utf8.Valid(m.Payload) {
		in["payload"] = string(m.Payload)
	} else {
		in["payload_base64"] = base64.StdEncoding.EncodeToString(m.Payload)
	}
	return h.keep(ctx, s, in, reason)
}

// rejectTooLarge keeps a message longer than the limit for review by its size and the
// digest of its payload, never its body: the payload is read once, by the digest, and
// neither copied nor decoded. Headers are kept when they are short.
func (h *Handler) rejectTooLarge(ctx context.Context, s triggers.Starter, m Message, size int) (string, error) {
	sum := sha256.Sum256(m.Payload)
	in := map[string]any{"source": h.cfg.Source, "identity": identity(m), "reason": ReasonMessageTooLarge,
		"error": fmt.Sprintf("the message is %d bytes long, payload and headers; the queue's limit is %d (max_message_bytes); its body was not kept", size, h.cfg.MaxMessageBytes),
		"size":  size, "payload_bytes": len(m.Payload), "payload_sha256": hex.EncodeToString(sum[:])}
	if hb := headerBytes(m.Headers); hb <= maxKeptHeaderBytes {
		in["headers"], in["message_id"] = m.Headers, m.ID
	} else {
		in["header_bytes"] = hb
	}
	return h.keep(ctx, s, in, ReasonMessageTooLarge)
}

// keep keeps a rejected message, in, for review (triggers.Starter.Reject).
func (h *Handler) keep(ctx context.Context, s triggers.Starter, in map[string]any, reason onceflow.Reason) (string, error) {
	id, _ := in["identity"].(string)
	if _, err := s.Reject(ctx, onceflow.Rejection{Workflow: h.cfg.Workflow, Source: h.cfg.Source, Identity: id, Input: in, By: h.caller()}); err != nil {
		return "", fmt.Errorf("keep rejected message: %w", err)
	}
	h.cfg.Logger.Warn("queue message rejected", "workflow", h.cfg.Workflow, "source", h.cfg.Source, "reason", reason)
	return Rejected, nil
}

// Companion is the companion workflow that keeps the rejected messages of the handler's
// workflow, registered wherever that workflow's steps are executed. Its one step,
// "input", starts through s the run the message would have started — the payload as the
// workflow's input, under the key the run_key template derives from it, its headers and
// its message id, or under the input's "run_key" when set — and completes with that run's
// ID; while that cannot be done, it parks in needs_review with the reason. It is internal
// (onceflow.Access): no request starts it, whatever its token. A person corrects the item
// with a replay whose merge patch sets "payload" (a JSON object, or the raw text) or
// "run_key"; the replay then starts the run once, or the item stays in review with the
// new reason. The workflow's run key decides duplicates as for any start: a key already
// started with the same payload is that run.
func (h *Handler) Companion(s triggers.Starter) onceflow.Workflow {
	return onceflow.Workflow{Name: h.cfg.Workflow + RejectSuffix, Access: onceflow.Access{Internal: true}, Steps: []onceflow.Step{{
		ID: "input", EffectKey: "{workflow}:{run.key}", OnFailure: onceflow.Review,
		Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			return h.startRejected(ctx, s, sc.Input)
		},
	}}}
}

// Companions returns the handler's companion workflow (triggers.Companions).
func (h *Handler) Companions(s triggers.Starter) []onceflow.Workflow {
	return []onceflow.Workflow{h.Companion(s)}
}

// rejectedInput is the input of a rejected message's run, as reject writes it and a
// person corrects it.
type rejectedInput struct {
	MessageID string            `json:"message_id"`
	Headers   map[string]string `json:"headers"`
	Payload   json.RawMessage   `json:"payload"`
	RunKey    string            `json:"run_key"`
	Reason    onceflow.Reason   `json:"reason"`
	Error     string            `json:"error"`
}

// startRejected starts the run of a rejected message from its (corrected) input, as
// handle would have.
func (h *Handler) startRejected(ctx context.Context, s triggers.Starter, raw json.RawMessage) (any, error) {
	park := func(reason onceflow.Reason, err error) (any, error) {
		return nil, &onceflow.StepError{Class: onceflow.Permanent, Reason: reason,
			Err: fmt.Errorf("rejected message: %w; correct it with a replay whose merge patch sets \"payload\" (a JSON object) or \"run_key\", or abandon this item", err)}
	}
	var in rejectedInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return park(ReasonInputNotJSON, fmt.Errorf("the item's input: %w", err))
	}
	payload := in.Payload
	if len(payload) == 0 && in.Reason == ReasonMessageTooLarge {
		return park(ReasonMessageTooLarge, errors.New(in.Error))
	}
	var text string
	if json.Unmarshal(payload, &text) == nil {
		payload = json.RawMessage(text) // the raw message, kept as text
	}
	if reason, err := checkPayload(payload, math.MaxInt); err != nil {
		return park(reason, err)
	}
	// The handler's depth limit, as when the message arrived, in the words of Start's
	// InputError, which checks the client's MaxInputDepth on top.
	limit := h.cfg.MaxDepth
	if limit <= 0 {
		limit = jsondoc.DefaultMaxDepth
	}
	if d := jsondoc.Depth(payload); d > limit {
		return park(ReasonInputInvalid, &onceflow.InputError{Workflow: h.cfg.Workflow, Problem: jsondoc.DepthProblem(d, limit)})
	}
	tree, err := keytmpl.Decode(payload)
	if _, isObject := tree.(map[string]any); err != nil || !isObject {
		return park(ReasonInputNotJSON, errors.New("the message is not a JSON object"))
	}
	key := in.RunKey
	if key == "" {
		if key, err = messageKey(h.runKey, tree, in.Headers, in.MessageID); err != nil {
			return park(ReasonRunKeyMissing, err)
		}
	}
	run, err := s.StartFrom(ctx, h.caller(), h.cfg.Workflow, key, payload)
	if reason := startRefused(err); reason != "" {
		return park(reason, err)
	} else if err != nil {
		return nil, err // the store: retried as any step's error
	}
	return map[string]any{"workflow": h.cfg.Workflow, "run_key": key, "run_id": run.ID, "duplicate": run.Duplicate}, nil
}

// Paused reports whether the consumer pulls nothing because the backlog of due steps is
// above MaxBacklog.
func (h *Handler) Paused() bool { return h.paused.Load() }

// WaitBacklog returns once the steps due are at most MaxBacklog (triggers.Starter.Due),
// or ctx ends; it returns ctx's error then.
func (h *Handler) WaitBacklog(ctx context.Context, s triggers.Starter) error {
	defer h.paused.Store(false)
	for {
		n, err := h.backlog(ctx, s)
		if err != nil || n <= int64(h.cfg.MaxBacklog) {
			return ctx.Err()
		}
		if !h.paused.Swap(true) {
			h.cfg.Logger.Info("queue consumption paused: too many steps due", "workflow", h.cfg.Workflow, "due", n, "max_backlog", h.cfg.MaxBacklog)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (h *Handler) backlog(ctx context.Context, s triggers.Starter) (int64, error) {
	h.backlogMu.Lock()
	defer h.backlogMu.Unlock()
	if time.Since(h.backlogAt) < 200*time.Millisecond {
		return h.backlogN, nil
	}
	n, err := s.Due(ctx)
	if err != nil {
		return 0, err
	}
	h.backlogAt, h.backlogN = time.Now(), n
	return n, nil
}

// HandleAll handles msgs concurrently (their starts share transactions) and returns, per
// message, whether it may be acknowledged: nil, or why not.
func (h *Handler) HandleAll(ctx context.Context, s triggers.Starter, msgs []Message) []error {
	if h.cfg.Hooks.BeforeStore != nil {
		h.cfg.Hooks.BeforeStore(len(msgs))
	}
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.Handle(ctx, s, m)
		}()
	}
	wg.Wait()
	h.backlogMu.Lock()
	h.backlogAt = time.Time{} // the batch added steps: count again
	h.backlogMu.Unlock()
	if h.cfg.Hooks.AfterStored != nil {
		h.cfg.Hooks.AfterStored(len(msgs))
	}
	return errs
}

// Reconnect runs session until ctx ends: after each session that ends with an error it
// records the error (Err), logs it, and waits with exponential backoff (from 100 ms to
// 15 s, starting over after a session that got as far as consuming) before the next. A
// session connects, consumes until something breaks, and says why; consumed reports
// whether it got as far as consuming. Reconnect returns nil when ctx ends.
func (h *Handler) Reconnect(ctx context.Context, session func(ctx context.Context) (consumed bool, err error)) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		consumed, err := session(ctx)
		if ctx.Err() != nil {
			break
		}
		if consumed {
			attempt = 0
		}
		h.SetStatus(err)
		h.cfg.Logger.Warn("queue consumer not consuming; retrying", "workflow", h.cfg.Workflow, "source", h.cfg.Source, "error", err, "in", backoff(attempt))
		_ = Sleep(ctx, backoff(attempt))
	}
	return nil
}

// backoff is the wait before the attempt-th reconnection.
func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 8)
	return min(d, 15*time.Second)
}

// Sleep waits d, or until ctx ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// caller is who the handler's starts are made for: its queue, which the audit trail names
// queue:SOURCE.
func (h *Handler) caller() onceflow.Caller { return onceflow.Caller{Queue: h.cfg.Source} }
