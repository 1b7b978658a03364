// Package queuetrigger starts runs from the messages of a broker's queue: a NATS
// JetStream durable pull consumer (NATS) or a RabbitMQ queue consumed with manual
// acknowledgements and a prefetch limit (AMQP).
//
// # Acknowledged only once stored
//
// Each message becomes one Client.Start, through the engine's group-committed write path:
// the messages of one fetch are started concurrently, so they share transactions. A message
// is acknowledged only after Start returned, that is after the run is durably stored. A
// process that dies in between leaves the message unacknowledged; the broker redelivers
// it, Start finds the run by its key and the message is acknowledged without a second run.
// The run key is the message id (Nats-Msg-Id, AMQP message_id) or the queue's run_key
// template over {headers.NAME}, {message.id} and {input.…} (the JSON payload).
//
// # Rejected input
//
// A message that cannot start a run — not a JSON object, missing required fields, no key,
// a key already used with another payload — is kept for a person, then acknowledged: it is
// started as a run of the companion workflow NAME.rejected (RejectWorkflow), whose input
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
// Before each fetch the trigger looks at the steps due and not yet claimed; while there
// are more than MaxBacklog it pulls nothing. A connection that cannot be made or is lost is
// tried again with exponential backoff; Status says whether the consumer is connected and
// why not, for /readyz and the metrics.
package queuetrigger

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
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/jsondoc"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/store"
)

// Review reasons of rejected messages.
const (
	// ReasonInputNotJSON: the payload is not a JSON object (or not UTF-8).
	ReasonInputNotJSON = "input_not_json"
	// ReasonInputInvalid: the payload lacks what the workflow requires, nests too deeply or
	// names a member twice.
	ReasonInputInvalid = "input_invalid"
	// ReasonRunKeyMissing: no run key could be derived, or it breaks the key rules.
	ReasonRunKeyMissing = "run_key_missing"
	// ReasonRunKeyConflict: the run key is already used with another payload.
	ReasonRunKeyConflict = "run_key_conflict"
	// ReasonMessageTooLarge: the message is longer than Config.MaxMessageBytes; its body
	// was not kept.
	ReasonMessageTooLarge = "message_too_large"
)

// DefaultMaxMessageBytes is the default of Config.MaxMessageBytes: 1 MiB, the API's
// default body limit (onceflowhttp.Options.MaxBody), so that a queue takes what the API
// takes.
const DefaultMaxMessageBytes = 1 << 20

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

// Metrics receives what a trigger measures; labels are workflow names and outcomes only.
type Metrics interface {
	// QueueConnected says whether the workflow's consumer is connected.
	QueueConnected(workflow, broker string, up bool)
	// QueueMessage counts a handled message: outcome is started, duplicate or rejected.
	QueueMessage(workflow, outcome string)
}

// Config configures a Trigger.
type Config struct {
	// Workflow is the workflow the messages start.
	Workflow string
	// Source names the queue, e.g. "nats:ORDERS/onceflow-orders" or "amqp:orders".
	Source string
	// URLEnv names the environment variable the broker's URL came from, for the message
	// of a broker that cannot be reached ("" when it did not come from one).
	URLEnv string
	// RunKey derives the run key; nil means the message id.
	RunKey *keytmpl.Template
	Client *onceflow.Client
	// Stats counts the backlog of due steps.
	Stats store.StatsStore
	// MaxBacklog pauses pulling while more steps than this are due (default 10000).
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
	// Clock decides which steps are due for MaxBacklog (default: the client's,
	// onceflow.Client.Now).
	Clock func() time.Time
}

// Trigger turns messages into runs.
type Trigger struct {
	cfg    Config
	broker string
	status Status

	paused    atomic.Bool
	backlogMu sync.Mutex
	backlogAt time.Time
	backlogN  int64
}

func newTrigger(cfg Config, broker string) *Trigger {
	if cfg.MaxBacklog <= 0 {
		cfg.MaxBacklog = 10000
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
		if cfg.Client != nil {
			cfg.Clock = cfg.Client.Now
		}
	}
	t := &Trigger{cfg: cfg, broker: broker}
	t.status.err = fmt.Errorf("%s: not connected yet", cfg.Source)
	return t
}

// Status is whether a consumer is connected.
type Status struct {
	mu  sync.Mutex
	err error
}

// Err is nil while the consumer is connected and consuming, else why not.
func (t *Trigger) Err() error {
	t.status.mu.Lock()
	defer t.status.mu.Unlock()
	return t.status.err
}

func (t *Trigger) setStatus(err error) {
	t.status.mu.Lock()
	changed := (t.status.err == nil) != (err == nil)
	t.status.err = err
	t.status.mu.Unlock()
	if t.cfg.Metrics != nil {
		t.cfg.Metrics.QueueConnected(t.cfg.Workflow, t.broker, err == nil)
	}
	if changed && err == nil {
		t.cfg.Logger.Info("queue consumer connected", "workflow", t.cfg.Workflow, "source", t.cfg.Source)
	}
}

// unreachable is the error of a broker that cannot be reached: what to check.
func (t *Trigger) unreachable(what string, err error) error {
	if t.cfg.URLEnv == "" {
		return fmt.Errorf("%s: cannot reach the %s: %w; check its URL and that it is running", t.cfg.Source, what, err)
	}
	return fmt.Errorf("%s: cannot reach the %s: %w; check %s and that the server is running", t.cfg.Source, what, err, t.cfg.URLEnv)
}

// Workflow names the workflow the trigger starts.
func (t *Trigger) Workflow() string { return t.cfg.Workflow }

// Outcomes of Handle.
const (
	Started   = "started"
	Duplicate = "duplicate"
	Rejected  = "rejected"
)

// Handle starts the message's run, or keeps it as rejected input, and returns once that
// is durably stored: the message may then be acknowledged. An error means nothing
// durable happened (the store is unreachable): the message must not be acknowledged.
func (t *Trigger) Handle(ctx context.Context, m Message) (string, error) {
	out, err := t.handle(ctx, m)
	if err == nil && t.cfg.Metrics != nil {
		t.cfg.Metrics.QueueMessage(t.cfg.Workflow, out)
	}
	return out, err
}

func (t *Trigger) handle(ctx context.Context, m Message) (string, error) {
	if size := m.Size(); size > t.cfg.MaxMessageBytes {
		return t.rejectTooLarge(ctx, m, size)
	}
	if reason, err := checkPayload(m.Payload, t.cfg.MaxDepth); err != nil {
		return t.reject(ctx, m, reason, err.Error())
	}
	tree, err := keytmpl.Decode(m.Payload)
	if _, isObject := tree.(map[string]any); err != nil || !isObject {
		return t.reject(ctx, m, ReasonInputNotJSON, "the message is not a JSON object")
	}
	key, err := messageKey(t.cfg.RunKey, tree, m.Headers, m.ID)
	if err != nil {
		return t.reject(ctx, m, ReasonRunKeyMissing, err.Error())
	}
	run, err := t.cfg.Client.Start(ctx, t.cfg.Workflow, key, json.RawMessage(m.Payload))
	if reason := startRefused(err); reason != "" {
		return t.reject(ctx, m, reason, err.Error())
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
func checkPayload(payload []byte, maxDepth int) (string, error) {
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

// startRefused is the review reason of a Start that refused a message's run, or "" when
// err is nil or not a refusal (the store failed: nothing was decided).
func startRefused(err error) string {
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
const RejectSuffix = ".rejected"

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
func (t *Trigger) reject(ctx context.Context, m Message, reason, why string) (string, error) {
	in := map[string]any{"source": t.cfg.Source, "message_id": m.ID, "identity": identity(m), "reason": reason, "error": why, "headers": m.Headers}
	if utf8.Valid(m.Payload) {
		in["payload"] = string(m.Payload)
	} else {
		in["payload_base64"] = base64.StdEncoding.EncodeToString(m.Payload)
	}
	return t.keep(ctx, in, reason)
}

// rejectTooLarge keeps a message longer than the limit for review by its size and the
// digest of its payload, never its body: the payload is read once, by the digest, and
// neither copied nor decoded. Headers are kept when they are short.
func (t *Trigger) rejectTooLarge(ctx context.Context, m Message, size int) (string, error) {
	sum := sha256.Sum256(m.Payload)
	in := map[string]any{"source": t.cfg.Source, "identity": identity(m), "reason": ReasonMessageTooLarge,
		"error": fmt.Sprintf("the message is %d bytes long, payload and headers; the queue's limit is %d (max_message_bytes); its body was not kept", size, t.cfg.MaxMessageBytes),
		"size":  size, "payload_bytes": len(m.Payload), "payload_sha256": hex.EncodeToString(sum[:])}
	if hb := headerBytes(m.Headers); hb <= maxKeptHeaderBytes {
		in["headers"], in["message_id"] = m.Headers, m.ID
	} else {
		in["header_bytes"] = hb
	}
	return t.keep(ctx, in, ReasonMessageTooLarge)
}

// keep starts the companion workflow's run that keeps a rejected message, in, for review.
func (t *Trigger) keep(ctx context.Context, in map[string]any, reason string) (string, error) {
	id, _ := in["identity"].(string)
	_, err := t.cfg.Client.Start(ctx, t.cfg.Workflow+RejectSuffix, t.rejectKey(id), in)
	if errors.Is(err, onceflow.ErrRunConflict) {
		// Another message with this identity was kept first, with other content (two
		// messages sharing a message id, or a reason that changed with the workflow): keep
		// this one too, under a key that adds its digest, which a redelivery finds again.
		raw, merr := json.Marshal(in)
		if merr != nil {
			return "", fmt.Errorf("keep rejected message: %w", merr)
		}
		sum := sha256.Sum256(raw)
		_, err = t.cfg.Client.Start(ctx, t.cfg.Workflow+RejectSuffix, t.rejectKey(id+"|sha256:"+hex.EncodeToString(sum[:])), in)
	}
	if err != nil {
		return "", fmt.Errorf("keep rejected message: %w", err)
	}
	t.cfg.Logger.Warn("queue message rejected", "workflow", t.cfg.Workflow, "source", t.cfg.Source, "reason", reason)
	return Rejected, nil
}

// rejectKey is the run key of a rejected message identified by id at the trigger's source;
// one that would break the key rules is replaced by its digest.
func (t *Trigger) rejectKey(id string) string {
	key := t.cfg.Source + "|" + id
	if onceflow.ValidateKey("run key", key) != nil {
		sum := sha256.Sum256([]byte(key))
		key = t.cfg.Source + "|sha256:" + hex.EncodeToString(sum[:])
		if onceflow.ValidateKey("run key", key) != nil {
			key = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	return key
}

// RejectWorkflow is the companion workflow that keeps the rejected messages of workflow,
// registered on c wherever workflow's steps are executed; runKey is the queue's run_key
// template (nil: the message id). Its one step, "input", starts the run the message would
// have started — the payload as the workflow's input, under the key the template derives
// from it, its headers and its message id, or under the input's "run_key" when set — and
// completes with that run's ID; while that cannot be done, it parks in needs_review with
// the reason. It is internal (onceflow.Access): no request starts it, whatever its token.
// A person corrects the item with a replay whose merge patch sets "payload"
// (a JSON object, or the raw text) or "run_key"; the replay then starts the run once, or
// the item stays in review with the new reason. The workflow's run key decides duplicates
// as for any start: a key already started with the same payload is that run.
func RejectWorkflow(c *onceflow.Client, workflow string, runKey *keytmpl.Template) onceflow.Workflow {
	return onceflow.Workflow{Name: workflow + RejectSuffix, Access: onceflow.Access{Internal: true}, Steps: []onceflow.Step{{
		ID: "input", EffectKey: "{workflow}:{run.key}", OnFailure: onceflow.Review,
		Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			return startRejected(ctx, c, workflow, runKey, sc.Input)
		},
	}}}
}

// rejectedInput is the input of a rejected message's run, as reject writes it and a
// person corrects it.
type rejectedInput struct {
	MessageID string            `json:"message_id"`
	Headers   map[string]string `json:"headers"`
	Payload   json.RawMessage   `json:"payload"`
	RunKey    string            `json:"run_key"`
	Reason    string            `json:"reason"`
	Error     string            `json:"error"`
}

// startRejected starts the run of a rejected message from its (corrected) input, as
// handle would have.
func startRejected(ctx context.Context, c *onceflow.Client, workflow string, runKey *keytmpl.Template, raw json.RawMessage) (any, error) {
	park := func(reason string, err error) (any, error) {
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
	// The depth is Start's to check, under the client's MaxInputDepth.
	if reason, err := checkPayload(payload, math.MaxInt); err != nil {
		return park(reason, err)
	}
	tree, err := keytmpl.Decode(payload)
	if _, isObject := tree.(map[string]any); err != nil || !isObject {
		return park(ReasonInputNotJSON, errors.New("the message is not a JSON object"))
	}
	key := in.RunKey
	if key == "" {
		if key, err = messageKey(runKey, tree, in.Headers, in.MessageID); err != nil {
			return park(ReasonRunKeyMissing, err)
		}
	}
	run, err := c.Start(ctx, workflow, key, payload)
	if reason := startRefused(err); reason != "" {
		return park(reason, err)
	} else if err != nil {
		return nil, err // the store: retried as any step's error
	}
	return map[string]any{"workflow": workflow, "run_key": key, "run_id": run.ID, "duplicate": run.Duplicate}, nil
}

// Paused reports whether the trigger pulls nothing because the backlog of due steps is
// above MaxBacklog.
func (t *Trigger) Paused() bool { return t.paused.Load() }

// waitBacklog returns once the due steps are at most MaxBacklog, or ctx ends.
func (t *Trigger) waitBacklog(ctx context.Context) error {
	defer t.paused.Store(false)
	for {
		n, err := t.backlog(ctx)
		if err != nil || n <= int64(t.cfg.MaxBacklog) {
			return ctx.Err()
		}
		if !t.paused.Swap(true) {
			t.cfg.Logger.Info("queue consumption paused: too many steps due", "workflow", t.cfg.Workflow, "due", n, "max_backlog", t.cfg.MaxBacklog)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (t *Trigger) backlog(ctx context.Context) (int64, error) {
	if t.cfg.Stats == nil {
		return 0, nil
	}
	t.backlogMu.Lock()
	defer t.backlogMu.Unlock()
	if time.Since(t.backlogAt) < 200*time.Millisecond {
		return t.backlogN, nil
	}
	st, err := t.cfg.Stats.StatsGet(ctx, store.StatsGetParams{Now: t.cfg.Clock()})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, d := range st.Due {
		n += d.Count
	}
	t.backlogAt, t.backlogN = time.Now(), n
	return n, nil
}

// BeforeStore, when set, is called with each batch of messages received, before any of
// them is handled; AfterStored after the batch was handled and before any of it is
// acknowledged. They are hooks for tests that kill the process at those points.
var (
	BeforeStore func(n int)
	AfterStored func(n int)
)

// handleAll handles msgs concurrently (their starts share transactions) and returns, per
// message, whether it may be acknowledged.
func (t *Trigger) handleAll(ctx context.Context, msgs []Message) []error {
	if BeforeStore != nil {
		BeforeStore(len(msgs))
	}
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = t.Handle(ctx, m)
		}()
	}
	wg.Wait()
	t.backlogMu.Lock()
	t.backlogAt = time.Time{} // the batch added steps: count again
	t.backlogMu.Unlock()
	if AfterStored != nil {
		AfterStored(len(msgs))
	}
	return errs
}

// backoff is the wait before the attempt-th reconnection.
func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 8)
	return min(d, 15*time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
