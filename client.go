package onceflow

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/onceflow/onceflow/internal/groupcommit"
	"github.com/onceflow/onceflow/internal/jsondoc"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/internal/safetext"
	"github.com/onceflow/onceflow/store"
)

// State is the state of a run or a step.
type State = store.State

// States of runs and steps.
const (
	StatePending     = store.StatePending
	StateProcessing  = store.StateProcessing
	StateRetrying    = store.StateRetrying
	StateCompleted   = store.StateCompleted
	StateFailed      = store.StateFailed
	StateNeedsReview = store.StateNeedsReview
	StateSkipped     = store.StateSkipped
	StateCancelled   = store.StateCancelled
)

// commitRefill bounds how long a committer waits for its callers' next items
// (groupcommit.Config.Refill).
const commitRefill = 5 * time.Millisecond

// commitRefillGap ends the wait of SQLite's committer when no item came for that long
// (groupcommit.Config.RefillGap): the engine's own workers and callers in this process
// submit within it, callers over HTTP do not.
const commitRefillGap = 100 * time.Microsecond

// Config configures a Client. Only Store is required; every other zero value takes the
// default documented on its field.
type Config struct {
	// Store is where runs, steps, the effect ledger and the audit trail live.
	Store store.Store
	// Workers is the most steps executed at once (default 10).
	Workers int
	// WorkerID names this client in leases, attempts and events (default host-pid-random).
	WorkerID string
	// LeaseFor is how long a claimed step stays ours without a heartbeat (default 30 s).
	LeaseFor time.Duration
	// HeartbeatEvery is how often leases of running steps are extended (default LeaseFor/3).
	HeartbeatEvery time.Duration
	// PollInterval is how often Serve looks for due steps when nothing woke it (default 1 s).
	PollInterval time.Duration
	// ReapInterval is how often expired leases are looked for (default 5 s).
	ReapInterval time.Duration
	// PauseRefresh is how often Serve reads which workflows are paused, so that a pause
	// made by another process applies here (default 2 s). A pause made through this client
	// applies at once. Claims never query it.
	PauseRefresh time.Duration
	// EffectWait is how long a step waits before looking again at an effect key another
	// step holds in flight (default 1 s).
	EffectWait time.Duration
	// ShutdownGrace is how long Serve lets running steps finish after its context ends
	// before it interrupts them and releases them for a retry (default 30 s).
	ShutdownGrace time.Duration
	// Logger receives structured logs (default: none).
	Logger *slog.Logger
	// Clock returns this machine's time (default time.Now). Which clock the engine's
	// decisions use depends on the store and on ClockSync: on a database whose clock every
	// process shares (PostgreSQL, a store.ClockSource) the database's, and Clock only
	// measures how far off this machine is; on SQLite, Clock, watched for jumps. Tests that
	// drive a clock by hand set ClockSync negative, so that every decision reads Clock as
	// it is.
	Clock func() time.Time
	// ClockSync is how often Serve measures the database's clock, on a store that has one
	// (store.ClockSource: PostgreSQL), default DefaultClockSync (10 s). Every time the
	// engine writes or compares for other processes (leases and their expiry, the reaper,
	// leaderships, schedule ticks, delay and not_before due times, retries) is then the
	// database's clock: measured against Clock before the first write that needs it,
	// corrected by half the round trip, and extrapolated with the monotonic clock in
	// between, so that a jump of this machine's clock does not move it. A measurement that
	// fails keeps the last offset and is tried again within a second; the skew is exported
	// (MeasureClockSkew) and logged above ClockSkewWarning.
	//
	// On a store without a database clock (SQLite) the engine's time is Clock, compared
	// with the monotonic clock at every reading: when it jumps by more than a second,
	// forwards or backwards, Serve renews the leases of its running steps at once and its
	// lease reaper waits one LeaseFor of real time before it reaps again, so that no
	// process reaps a lease whose owner has not yet renewed it at the new time.
	//
	// Negative: Clock is used as it is for every decision, neither measured nor watched —
	// for tests that move a clock by hand, and for one process alone that trusts its clock.
	ClockSync time.Duration
	// Rand returns a uniform number in [0, 1) for backoff jitter (default math/rand/v2).
	Rand func() float64
	// Redact says which secrets and personal data never reach logs, audit details and
	// attempt records (default: the secret-looking fields only; see Redaction).
	Redact Redaction
	// MaxInputDepth caps how deeply a run's input may nest objects and lists, the
	// outermost counting 1 (default 64): Start refuses a deeper input with an InputError,
	// whoever starts it (an API request, a queue message, a fan-out item, a program).
	// Deep documents cost far more to handle than their size.
	MaxInputDepth int
	// Metrics receives measurements of runs started, steps claimed, effects reused and
	// attempts (default: none). Package metrics exports them to Prometheus.
	Metrics Metrics
	// Notify configures failure notifications: which review items alert which channels
	// (default: none; see NotifyConfig).
	Notify NotifyConfig
	// MaxBatch is the most starts, or step records, written in one transaction (default
	// 256). Concurrent Start calls and the results of concurrent steps are group-committed:
	// the ones that arrive while a transaction commits are written together in the next,
	// and each caller returns once the transaction holding its own item has committed. On
	// PostgreSQL, after a transaction of several items, the next one waits for as many
	// items as long as the last commit took, at most 5 ms: callers that start or record
	// one item after another then share each commit.
	MaxBatch int
	// ScheduleInterval is how often the scheduler leader looks for due ticks (default 1 s);
	// the leadership lasts three intervals without renewal.
	ScheduleInterval time.Duration
	// ScheduleClock, if set, is the clock schedules read to decide which ticks are due,
	// instead of the engine's time (runs are still started at the engine's time). A demo or a test brings
	// the next tick forward with it.
	ScheduleClock func() time.Time
	// ScheduleLate is how late a tick may be fired and still count as on time (default
	// 1 minute); a tick later than that was missed and its schedule's CatchUp decides.
	ScheduleLate time.Duration
	// RecentKeysTTL is how long after a run was created a repeated start of its key may be
	// answered in process, from what this client remembers of it (default
	// DefaultRecentKeysTTL, 1 h; see Start). A purge through the client's store makes it
	// forget what it remembers; a purge by another process of runs younger than that
	// (RetentionPurge with a RunsBefore less than RecentKeysTTL ago) could leave a repeated
	// key answered with a run that no longer exists, and onceflow purge refuses such a
	// cutoff.
	RecentKeysTTL time.Duration
	// MaxStartMany is the most items one StartMany call takes (default DefaultMaxStartMany,
	// 1,000); a longer list is an error and starts nothing.
	MaxStartMany int
	// CommitConcurrency is how many such transactions of each kind may commit at once
	// (default 1: SQLite has one writer, and on PostgreSQL with its default pool more
	// concurrent batches measured slower, as they contend for connections and locks).
	CommitConcurrency int
}

// Client registers workflows, starts runs and executes their steps.
type Client struct {
	cfg     Config
	store   store.Store
	log     *slog.Logger
	redact  *redact.Policy
	metrics Metrics
	clock   *engineClock // the engine's one clock (clock.go)

	mu        sync.RWMutex
	workflows map[string]*workflowDef
	names     []string
	schedules map[string]*scheduleDef

	wake chan struct{}

	// starts and records group-commit RunInsertMany and StepRecord calls.
	starts  *groupcommit.Committer[store.RunInsertParams, store.RunInsertResult]
	records *groupcommit.Committer[store.StepRecordParams, error]
	// writes, when the store is a store.BatchWriter, commits records and claims (and, on
	// a database with one writer, starts) together, instead of records and StepClaim.
	writes *groupcommit.Committer[writeItem, writeResult]
	// startsInWrites is set when starts go through writes too (store.BatchWriter.OneWriter).
	startsInWrites bool
	// recent are the run keys Start answers from an index lookup.
	recent *recentKeys

	serving  sync.Mutex // held while Serve runs
	inflight inflight

	pauseMu sync.Mutex
	paused  map[string]bool // workflows not to claim (control.go)

	// recordedRedaction is what recordRedaction last recorded (redaction_record.go).
	redactionMu       sync.Mutex
	recordedRedaction string
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Store == nil {
		return nil, errors.New("onceflow: Config.Store is required (open one with store/sqlite.Open)")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 10
	}
	if cfg.LeaseFor <= 0 {
		cfg.LeaseFor = 30 * time.Second
	}
	if cfg.HeartbeatEvery <= 0 {
		cfg.HeartbeatEvery = cfg.LeaseFor / 3
	}
	if cfg.HeartbeatEvery >= cfg.LeaseFor {
		return nil, fmt.Errorf("onceflow: HeartbeatEvery (%v) must be shorter than LeaseFor (%v)", cfg.HeartbeatEvery, cfg.LeaseFor)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = 5 * time.Second
	}
	if cfg.PauseRefresh <= 0 {
		cfg.PauseRefresh = 2 * time.Second
	}
	if cfg.MaxInputDepth <= 0 {
		cfg.MaxInputDepth = jsondoc.DefaultMaxDepth
	}
	if cfg.EffectWait <= 0 {
		cfg.EffectWait = time.Second
	}
	if cfg.ScheduleInterval <= 0 {
		cfg.ScheduleInterval = time.Second
	}
	if cfg.ScheduleLate <= 0 {
		cfg.ScheduleLate = time.Minute
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.ClockSync == 0 {
		cfg.ClockSync = DefaultClockSync
	}
	if cfg.Rand == nil {
		cfg.Rand = mrand.Float64
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = defaultWorkerID()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.RecentKeysTTL <= 0 {
		cfg.RecentKeysTTL = DefaultRecentKeysTTL
	}
	if cfg.MaxStartMany <= 0 {
		cfg.MaxStartMany = DefaultMaxStartMany
	}
	policy, err := newRedactPolicy(cfg.Redact)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:       cfg,
		store:     cfg.Store,
		log:       slog.New(durationHandler{next: redact.Handler(cfg.Logger.Handler(), policy.Secrets())}).With("worker", cfg.WorkerID),
		redact:    policy,
		metrics:   cfg.Metrics,
		workflows: map[string]*workflowDef{},
		wake:      make(chan struct{}, 1),
		inflight:  inflight{steps: map[int64]*execution{}},
		paused:    map[string]bool{},
		recent:    newRecentKeys(cfg.RecentKeysTTL, purgeCount(cfg.Store)),
	}
	c.clock = newEngineClock(cfg, c.log, cfg.Metrics)
	// A committer waits, after a batch of several items, for its callers' next items
	// (groupcommit.Config.Refill): callers that start or record one item after another then
	// share each commit instead of each waiting for two. On a database with many writers
	// the commit is the server's work and the wait lasts until the batch is as large again.
	// SQLite's one writer is this process's own CPU: there it waits only while items keep
	// coming (RefillGap), as a full wait measured slower for callers over HTTP.
	refill, gap := commitRefill, time.Duration(0)
	if bw, ok := cfg.Store.(store.BatchWriter); ok && bw.OneWriter() {
		gap = commitRefillGap
	}
	gc := func(kind string) groupcommit.Config {
		return groupcommit.Config{MaxBatch: cfg.MaxBatch, Concurrency: cfg.CommitConcurrency, Timeout: 30 * time.Second, Refill: refill, RefillGap: gap,
			Observe: func(items int, took time.Duration, err error) { c.observeCommit(kind, items, took, err) }}
	}
	c.starts = groupcommit.New(c.store.RunInsertMany, gc(CommitStarts))
	c.records = groupcommit.New(c.store.StepRecord, gc(CommitRecords))
	c.writes = c.newWrites(gc(""))
	if err := c.initNotify(); err != nil {
		return nil, err
	}
	return c, nil
}

// purgeCount is st's count of purges, or nil for a store that keeps none.
func purgeCount(st store.Store) func() uint64 {
	if pc, ok := st.(store.PurgeCounter); ok {
		return pc.Purges
	}
	return nil
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Store returns the client's store.
func (c *Client) Store() store.Store { return c.store }

// WorkerID returns the name this client uses in leases and attempts.
func (c *Client) WorkerID() string { return c.cfg.WorkerID }

// Register validates and adds a workflow. Registering a name twice is an error. The error
// joins a *DefinitionError for every problem found.
func (c *Client) Register(w Workflow) error {
	def, err := compile(w)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.workflows[w.Name]; dup {
		return &DefinitionError{Workflow: w.Name, Field: "name", Problem: "is already registered with this client"}
	}
	if err := c.redact.SetWorkflow(w.Name, w.Redact); err != nil {
		return &DefinitionError{Workflow: w.Name, Field: "redact", Problem: err.Error()}
	}
	c.workflows[w.Name] = def
	c.names = append(c.names, w.Name)
	sort.Strings(c.names)
	return nil
}

// Workflows returns the names of the registered workflows, sorted.
func (c *Client) Workflows() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]string(nil), c.names...)
}

// Workflow returns the registered workflow called name as it was registered, and whether
// there is one. Internal workflows are returned too.
func (c *Client) Workflow(name string) (Workflow, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	def, ok := c.workflows[name]
	if !ok {
		return Workflow{}, false
	}
	return def.Workflow, true
}

// ErrNoRunKey: DeriveRunKey was asked for the run key of a workflow without a
// Workflow.RunKey template; the caller must name the run's key itself.
var ErrNoRunKey = errors.New("the workflow has no run_key template; send an Idempotency-Key header")

// DeriveRunKey derives the run key of a start of workflow whose caller named none, from
// the JSON input with the workflow's RunKey template: an API request without an
// Idempotency-Key. The error is a *WorkflowNotFoundError, ErrNoRunKey, or says which
// field of the input is missing or why the input is not JSON.
func (c *Client) DeriveRunKey(workflow string, input []byte) (string, error) {
	def, err := c.workflow(workflow)
	if err != nil {
		return "", err
	}
	if def.runKey == nil {
		return "", ErrNoRunKey
	}
	tree, err := keytmpl.Decode(input)
	if err != nil {
		return "", fmt.Errorf("the body is not valid JSON: %w", err)
	}
	return def.runKey.Render(map[string]any{"input": tree})
}

// Due counts the steps due now, by the engine's clock, and not yet claimed by any worker,
// across every workflow: a trigger that feeds runs stops taking new items while the count
// is above what the workers can catch up with (back-pressure). It reads the store.
func (c *Client) Due(ctx context.Context) (int64, error) {
	st, err := c.store.StatsGet(ctx, store.StatsGetParams{Now: c.now(ctx)})
	if err != nil {
		return 0, fmt.Errorf("onceflow: count due steps: %w", err)
	}
	var n int64
	for _, d := range st.Due {
		n += d.Count
	}
	return n, nil
}

func (c *Client) workflow(name string) (*workflowDef, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	def, ok := c.workflows[name]
	if !ok {
		return nil, &WorkflowNotFoundError{Name: name}
	}
	return def, nil
}

func (c *Client) step(workflow, step string) (*workflowDef, *stepDef) {
	def, err := c.workflow(workflow)
	if err != nil {
		return nil, nil
	}
	return def, def.steps[step]
}

// Run is a run as seen by callers.
type Run struct {
	ID        int64
	Workflow  string
	RunKey    string
	Entity    string
	State     State
	Input     json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// Duplicate is true when Start found this run already started with the same key and
	// input, and created nothing.
	Duplicate bool
}

func runFrom(r *store.Run, dup bool) *Run {
	return &Run{ID: r.ID, Workflow: r.Workflow, RunKey: r.RunKey, Entity: r.Entity, State: r.State,
		Input: r.Input, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Duplicate: dup}
}

// Start starts a run of workflow for the business event named by runKey, or returns the
// run that key already started (Run.Duplicate). The same key with a different input is a
// *RunConflictError. input is a JSON object: a map, a struct, a json.RawMessage or []byte.
// The run is durably stored when Start returns.
//
// A key this client started or found started recently (the last 65,536 keys, whose runs
// are younger than Config.RecentKeysTTL) with the same input (by its SHA-256 digest) is
// answered in process, without a round trip to the database; the run.deduplicated audit
// event of that decision is appended by the next group commit. Such a duplicate carries
// the run's State and UpdatedAt as this client last saw them; GetRun reads them fresh.
// Another input under such a key is a *RunConflictError returned once the refusal's audit
// event is committed. Other keys, new ones above all, are written together with the
// starts that arrive concurrently, one transaction for all that arrive while the previous
// one commits (see Config.MaxBatch); a key another process started is
// found there by the unique constraint.
func (c *Client) Start(ctx context.Context, workflow, runKey string, input any) (*Run, error) {
	return c.startAs(ctx, nil, workflow, runKey, input, "api")
}

// startAs is Start with the actor the audit events name, on behalf of by when it is not
// nil (see StartFrom).
func (c *Client) startAs(ctx context.Context, by *Caller, workflow, runKey string, input any, actor string) (*Run, error) {
	p, err := c.runInsertParams(ctx, by, workflow, runKey, input)
	if err != nil {
		return nil, err
	}
	p.Actor = actor
	switch known := c.recent.lookup(workflow, runKey, p.Now, p.Input); {
	case known == nil:
	case known.InputHash == p.InputHash:
		c.insertRunLater(p) // appends run.deduplicated; the answer does not wait for it
		return c.started(p, known, false)
	default:
		// Another input under a known key: the refusal's run.deduplicated event is
		// committed before the caller hears of it, so that what the caller does about it
		// (a queue keeps the message for review) follows it in the audit trail.
		rp := p
		rp.Repeat = true
		res, err := c.insertRun(ctx, rp)
		if err == nil {
			err = res.Err
		}
		switch {
		case err == nil:
			return c.started(p, res.Run, false)
		case !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("onceflow: start %s/%s: %w", workflow, runKey, err)
		}
		// A purge deleted the run since it was remembered: start it as a new key.
	}
	res, err := c.insertRun(ctx, p)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, fmt.Errorf("onceflow: start %s/%s: %w", workflow, runKey, err)
	}
	c.recent.add(res.Run)
	r, err := c.started(p, res.Run, res.Created)
	if err == nil && res.Created {
		c.poke()
	}
	return r, err
}

// Flush waits until the writes the client group-commits in the background (the audit
// events of repeated starts) are committed, or until ctx ends. Callers that read the audit
// trail right after a repeated Start, and programs about to exit, call it; Serve does
// before it returns.
func (c *Client) Flush(ctx context.Context) error {
	return errors.Join(c.starts.Flush(ctx), c.records.Flush(ctx), c.flushWrites(ctx))
}

// runInsertParams validates a start of workflow, on behalf of by when it is not nil (see
// MayStart), and builds the run to insert: Start, StartFrom and StartTx share it.
func (c *Client) runInsertParams(ctx context.Context, by *Caller, workflow, runKey string, input any) (store.RunInsertParams, error) {
	def, err := c.workflowFor(workflow, by)
	if err != nil {
		return store.RunInsertParams{}, err
	}
	return c.runInsertFor(def, workflow, runKey, input, c.now(ctx))
}

// runInsertFor validates a start of def, registered as workflow, at now, and builds the
// run to insert.
func (c *Client) runInsertFor(def *workflowDef, workflow, runKey string, input any, now time.Time) (store.RunInsertParams, error) {
	if err := ValidateKey("run key", runKey); err != nil {
		return store.RunInsertParams{}, err
	}
	raw, tree, err := normalizeInput(input, c.cfg.MaxInputDepth)
	if err != nil {
		return store.RunInsertParams{}, &InputError{Workflow: workflow, Problem: err.Error()}
	}
	data := map[string]any{"input": tree, "run": map[string]any{"key": runKey}}
	for i, f := range def.RequiredInput {
		if _, err := def.required[i].Render(data); err != nil {
			var fe *keytmpl.FieldError
			if errors.As(err, &fe) {
				return store.RunInsertParams{}, &InputError{Workflow: workflow, Problem: fmt.Sprintf("required field %s %s", f, fe.Problem)}
			}
			return store.RunInsertParams{}, &InputError{Workflow: workflow, Problem: err.Error()}
		}
	}
	var entity string
	if def.entity != nil {
		if entity, err = def.entity.Render(data); err != nil {
			return store.RunInsertParams{}, &InputError{Workflow: workflow, Problem: "entity: " + err.Error()}
		}
		if err := ValidateEntity(entity); err != nil {
			return store.RunInsertParams{}, entityError(workflow, entity, def.entity, data, err)
		}
	}
	sum := sha256.Sum256(raw)
	p := store.RunInsertParams{
		Workflow: workflow, RunKey: runKey, Entity: entity, Input: raw, InputHash: hex.EncodeToString(sum[:]),
		Actor: "api", Now: now,
	}
	for _, sd := range def.order {
		p.Steps = append(p.Steps, store.StepInsert{Name: sd.ID, Needs: sd.Needs})
	}
	return p, nil
}

// entityError is the InputError of an entity that breaks the identifier rules (err, a
// *KeyError), naming the input field at fault: the one whose value holds the character
// refused, or surrounding white space, else the longest.
func entityError(workflow, entity string, tmpl *keytmpl.Template, data map[string]any, err error) error {
	problem := err.Error()
	var ke *KeyError
	if errors.As(err, &ke) {
		problem = ke.Problem
	}
	field, longest := "", -1
	for _, f := range tmpl.Fields() {
		ft, perr := keytmpl.Parse("{" + f + "}")
		if perr != nil {
			continue
		}
		v, rerr := ft.Render(data)
		if rerr != nil {
			continue
		}
		if !utf8.ValidString(v) || strings.IndexFunc(v, safetext.Forbidden) >= 0 || strings.TrimSpace(v) != v {
			field = f
			break
		}
		if len(v) > longest {
			field, longest = f, len(v)
		}
	}
	from := ""
	if field != "" {
		from = " (from " + field + ")"
	}
	return &InputError{Workflow: workflow, Field: field, Problem: fmt.Sprintf("entity %s%s %s; an entity follows the rules of keys: at most %d bytes of UTF-8, no control or invisible formatting characters, no surrounding white space",
		safetext.Quote(entity, keyErrorExcerpt), from, problem, MaxKeyLength)}
}

// started turns what RunInsert returned into Start's result: the run, or a
// *RunConflictError for a known key with another input.
func (c *Client) started(p store.RunInsertParams, run *store.Run, created bool) (*Run, error) {
	c.observeStart(p, run, created)
	if !created && run.InputHash != p.InputHash {
		return nil, &RunConflictError{Workflow: p.Workflow, RunKey: p.RunKey, RunID: run.ID}
	}
	if created {
		c.log.Debug("run started", "run_id", run.ID, "workflow", p.Workflow, "run_key", p.RunKey, "entity", p.Entity)
	}
	return runFrom(run, !created), nil
}

// GetRun returns a run by ID as stored, its input unmasked: the program's own look at a run
// it started. What is shown to people is read with RunGet, which masks. errors.Is(err,
// ErrNotFound) for an unknown ID.
func (c *Client) GetRun(ctx context.Context, id int64) (*Run, error) {
	r, err := c.store.RunGetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return runFrom(r, false), nil
}

// normalizeInput turns input into canonical JSON (object keys sorted, numbers kept as
// written) and the tree templates read, refusing an input that nests deeper than maxDepth
// before it decodes it.
func normalizeInput(input any, maxDepth int) ([]byte, any, error) {
	var raw []byte
	switch v := input.(type) {
	case nil:
		raw = []byte("{}")
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case string:
		return nil, nil, errors.New("is a Go string; pass a map, a struct, a json.RawMessage or []byte")
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot be encoded as JSON: %v", err)
		}
		raw = b
	}
	if !json.Valid(raw) {
		return nil, nil, errors.New("is not valid JSON")
	}
	if d := jsondoc.Depth(raw); d > maxDepth {
		return nil, nil, errors.New(jsondoc.DepthProblem(d, maxDepth))
	}
	tree, err := keytmpl.Decode(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("is not valid JSON: %v", err)
	}
	if _, ok := tree.(map[string]any); !ok {
		return nil, nil, errors.New("must be a JSON object")
	}
	canon, err := json.Marshal(tree)
	if err != nil {
		return nil, nil, err
	}
	return canon, tree, nil
}

// poke wakes the claim loop without blocking.
func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
