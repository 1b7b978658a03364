// Package postgres is onceflow's store for many workers on many machines sharing one
// PostgreSQL database, built on github.com/jackc/pgx/v5 and its pool.
//
// It implements the contract of package store exactly as store/sqlite does, and passes the
// same conformance suite (store/storetest). It also implements store.EntityStore,
// store.Notifier, with LISTEN/NOTIFY, store.TxRunInserter, which starts a run inside a
// pgx.Tx the caller owns, and store.ClockSource, the server's clock, which every engine
// on the database takes its time from. The pool takes its settings from the URL
// (pool_max_conns, …).
//
// # Time
//
// Every time a statement compares or writes is a parameter the engine passes (from the
// database's clock, through ClockSource), never the server's now(), so that a time one
// process wrote is compared with a time another passed on the same clock. The one
// exception keeps to its own clock: the per-destination limits (limits.go) write and
// compare their slots' holds and their buckets' times with now() alone.
//
// # Concurrency
//
// Transactions run at read committed and decide every race with row locks, unique
// constraints and compare-and-set updates: due steps are claimed with SELECT … FOR UPDATE
// SKIP LOCKED, oldest due first, so concurrent workers never wait on each other's claims;
// an effect key is taken with INSERT … ON CONFLICT DO NOTHING followed by SELECT … FOR
// UPDATE, so when two workers take the same key at once the second waits for the first to
// commit and then sees its row; a run's state is re-derived after its row is locked, so two
// steps of one run completing at once cannot leave a stale state.
//
// A transaction that fails with serialization_failure or deadlock_detected, or loses its
// connection before COMMIT was sent, or cannot get one (the server refuses connections, is
// starting up or shutting down), rolled back entirely; the store retries it with jittered
// exponential backoff for up to Options.RetryFor (5 s by default), which covers a fast
// restart of the server. A failure during COMMIT is returned (the outcome is unknown) and
// never retried blindly. A failure to reach the server, once the retries are spent, is
// returned as store.ErrUnavailable.
//
// # Batches
//
// RunInsertMany, StepClaim and StepRecord take a batch in a fixed number of round trips,
// whatever its size: each statement covers every item at once (multi-row INSERT … ON
// CONFLICT, UPDATE … FROM unnest(…) … RETURNING), the statements that do not depend on
// each other's results travel together in one pgx.Batch, BEGIN travels with the first
// statement, and a transaction's audit events are one INSERT sent with its last writes
// and COMMIT. Workers in other processes are notified after the commit (notifyLater). An
// item's compare-and-set outcome is read from RETURNING, so one item's conflict or lost
// lease never fails the others. A batch applies its items one after the other, as the same
// items one per call would: the steps of the runs it touches are read once, after the runs
// are locked, and kept in memory for the transaction; after each item its change and its
// propagation to dependent steps are applied to that copy, the run's state is re-derived
// and a run.state_changed event follows the item's events when it changed; the dependents
// and each run's final state are written once, before COMMIT. Rows are locked in a fixed
// order (steps, then runs by ID, then ledger rows by key) so that concurrent batches never
// wait for each other in a cycle.
//
// # Plans
//
// Statements are prepared once per connection (pgx's statement cache), and PostgreSQL
// keeps their plans (plan_cache_mode=auto, unless the URL sets it): planning the write
// path's statements costs more than running them. Every statement of the write path finds
// its rows by key — a primary key or a unique key, for a batch passed as arrays — and its
// transaction prices sequential scans out (enable_seqscan off, set for the transaction
// alone with BEGIN), so that a generic plan made while the tables were small, or never analyzed, uses
// their indexes as they grow. The claim's and the reaper's locking scans, whose best plan
// depends on their parameters (how many steps are due, and how many to take), are planned
// for them on every execution (SET LOCAL plan_cache_mode = force_custom_plan, sent with
// the scan and reset after it). TestWritePathPlans explains every statement of the write
// path, in a schema never analyzed and in one of 100,000 steps.
//
// # Audit trail order
//
// Event IDs come from a sequence when an event is inserted, so a transaction may commit an
// event with a smaller ID after another transaction's larger one. EventList hides that: it
// lists only events below every ID that a transaction still in progress might commit (each
// event-writing transaction marks, with a shared advisory lock, the sequence position it
// started from), so a reader paging with AfterID never skips an event. An event therefore
// becomes listable once every transaction that drew an event ID before it has ended. The
// store's own transactions append their events last, just before COMMIT, so this is
// short; a caller's transaction that used RunInsertTx holds later events back until it
// ends, and should be kept short.
//
// # Schemas
//
// Options.Schema puts every table in one schema, created if missing; every pooled
// connection's search_path is set to it. Several onceflow deployments (or tests) can share
// one database this way.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/store"
)

var (
	_ store.Store         = (*Store)(nil)
	_ store.Notifier      = (*Store)(nil)
	_ store.TxRunInserter = (*Store)(nil)
)

// Options tune how the store connects. The zero value is the default.
type Options struct {
	// Schema is the schema that holds onceflow's tables. Empty means the connection's
	// default search_path (normally "public"), left as it is. When set, the schema is
	// created if missing and every connection's search_path is set to it alone.
	Schema string
	// RetryFor is how long a transaction or read that failed for a transient reason — a
	// connection refused or lost before COMMIT was sent, a server starting up or shutting
	// down, a serialization failure or a deadlock — is tried again, with jittered
	// exponential backoff, before its error is returned: long enough for a fast restart of
	// the server (default DefaultRetryFor). A COMMIT whose answer was lost is never tried
	// again. Negative: no retry.
	RetryFor time.Duration
}

// testTracer, set only by this package's tests (SetQueryTracer) while no other store is
// opened, traces the queries of the connections of the stores opened then.
var testTracer pgx.QueryTracer

// DefaultRetryFor is Options.RetryFor's default: a restart of PostgreSQL that takes a few
// seconds fails no start.
const DefaultRetryFor = 5 * time.Second

// Store is the PostgreSQL implementation of store.Store.
type Store struct {
	// purges counts the purges made through the store (store.PurgeCounter).
	purges store.Purges

	pool   *pgxpool.Pool
	config *pgxpool.Config
	// schema is the schema the tables live in (current_schema() of a pooled connection).
	schema string
	// eventMarkKey is the first key of the advisory locks that mark event-writing
	// transactions in this schema (see EventList).
	eventMarkKey int32
	// channel is the LISTEN/NOTIFY channel that says steps may be due in this schema.
	channel string
	// customPlans is set when every connection plans each execution for its parameters
	// (the URL sets plan_cache_mode=force_custom_plan): the locking scans need not set it.
	customPlans bool
	// destinations remembers the destinations whose slot and bucket rows exist (limits.go).
	destinations sync.Map
	// retryFor is Options.RetryFor with its default.
	retryFor time.Duration

	mu        sync.Mutex
	closed    bool
	listeners sync.WaitGroup     // the listeners and the notifier
	stop      context.CancelFunc // ends the listeners and the notifier
	stopCtx   context.Context
	// notifyWanted is set when a transaction that made steps due committed after the
	// notifier last sent a notification; notifying is set while the notifier runs
	// (notify.go). Both are guarded by mu.
	notifyWanted, notifying bool
}

// Open connects to the database at url (a postgres:// URL or a key=value connection
// string; pool settings such as pool_max_conns are accepted) and migrates it to the newest
// schema.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return openConfig(ctx, cfg, opts)
}

// openConfig is Open with the URL parsed.
func openConfig(ctx context.Context, cfg *pgxpool.Config, opts Options) (*Store, error) {
	if opts.Schema != "" {
		if strings.ContainsRune(opts.Schema, 0) || len(opts.Schema) > 63 {
			return nil, fmt.Errorf("postgres: open: schema %q is not a valid PostgreSQL name (at most 63 bytes, no NUL)", opts.Schema)
		}
		// Sent in the startup message: every connection, including reconnections, uses it.
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		// Keep the plans of prepared statements: after five executions PostgreSQL keeps a
		// generic plan when it costs no more than planning each execution, which for the
		// write path's statements costs more than running them. Those statements find their
		// rows by key under keyedSettings, so that a plan kept from when the tables were
		// small stays right as they grow (with plain settings it read a table whole: a
		// 3-step chain fell from about 1,000 to 250 steps/s by 20,000 runs). The locking
		// scans, whose best plan depends on their parameters, are planned for them on
		// every execution (lockingScan).
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "auto"
	}
	if testTracer != nil {
		cfg.ConnConfig.Tracer = testTracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	stopCtx, stop := context.WithCancel(context.Background())
	s := &Store{pool: pool, config: cfg, stop: stop, stopCtx: stopCtx,
		customPlans: cfg.ConnConfig.RuntimeParams["plan_cache_mode"] == "force_custom_plan", retryFor: opts.RetryFor}
	switch {
	case s.retryFor == 0:
		s.retryFor = DefaultRetryFor
	case s.retryFor < 0:
		s.retryFor = 0
	}
	if err := s.init(ctx, opts); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// init creates the schema if asked to and learns which schema the tables go in.
func (s *Store) init(ctx context.Context, opts Options) error {
	if opts.Schema != "" {
		err := s.tx(ctx, "create schema", func(t *txn) error {
			// CREATE SCHEMA IF NOT EXISTS races with itself across sessions: serialize it.
			if _, err := t.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('onceflow.create_schema'))`); err != nil {
				return err
			}
			_, err := t.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{opts.Schema}.Sanitize())
			return err
		})
		if err != nil {
			return err
		}
	}
	var schema *string
	err := s.read(ctx, "open", func(q querier) error {
		return q.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
	})
	if err != nil {
		return err
	}
	if schema == nil {
		return errors.New("postgres: open: no schema of the search_path exists; create one or set Options.Schema")
	}
	s.schema = *schema
	h := fnv.New32a()
	h.Write([]byte("onceflow.events:" + s.schema))
	s.eventMarkKey = int32(h.Sum32())
	s.channel = "onceflow_due:" + s.schema
	if len(s.channel) > 63 {
		sum := sha256.Sum256([]byte(s.schema))
		s.channel = "onceflow_due:" + hex.EncodeToString(sum[:12])
	}
	return nil
}

// Schema returns the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// Pool returns the store's connection pool, for callers that want to begin the
// transactions they pass to RunInsertTx on the same database and schema.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close stops the notification listeners and closes the pool. It is safe to call twice.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.listeners.Wait()
	s.pool.Close()
	return nil
}

// querier is what both a pooled connection and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// txn is one transaction of the store: the pgx transaction plus the statements and audit
// events it will send in one round trip just before it commits, and whether workers are
// to be notified once it committed.
type txn struct {
	conn
	s      *Store
	queued *pgx.Batch
	// log holds the transaction's audit events in the order appended, log[:drawn] with
	// their IDs; marked is set once the horizon mark is held; idMin and idMax are the IDs
	// drawn so far (auditseq.go). attempts are the attempt rows the flush inserts.
	log          []*txEvent
	drawn        int
	marked       bool
	idMin, idMax int64
	attempts     []*attemptRow
	notify       bool
	// origin, when set, is stamped on every event stored (store.Origin).
	origin *store.Origin
	// notifyInTx sends the notification inside the transaction, delivered when it commits:
	// for a caller's transaction (RunInsertTx), whose commit the store does not see.
	notifyInTx bool
}

// queue adds a write whose result nothing in the transaction reads to the round trip of
// flush, ahead of the events.
func (t *txn) queue(sql string, args ...any) {
	if t.queued == nil {
		t.queued = &pgx.Batch{}
	}
	t.queued.Queue(sql, args...)
}

// sendQueued sends the queued writes at once.
func (t *txn) sendQueued(ctx context.Context) error {
	if t.queued == nil {
		return nil
	}
	b := t.queued
	t.queued = nil
	return t.SendBatch(ctx, b).Close()
}

// flush sends the queued writes, then the buffered events, after marking the transaction
// as an event writer (see EventList), and with notifyInTx the notification, in one round
// trip.
func (t *txn) flush(ctx context.Context) error {
	b := t.flushBatch()
	if b == nil {
		return nil
	}
	if err := t.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// flushCommit is flush followed by COMMIT in the same round trip, for a transaction of
// the store's own; it reports whether it committed. When there is nothing to flush, it
// sends nothing: the caller commits. A failure of a statement before COMMIT means the
// server skipped COMMIT and rolled back: it is returned as it is. Any other failure once
// the batch was sent leaves the outcome unknown: a *commitError.
func (t *txn) flushCommit(ctx context.Context, x *pooledTx) (bool, error) {
	b := t.flushBatch()
	if b == nil {
		return false, nil
	}
	n := b.Len()
	b.Queue(`COMMIT`)
	br := t.SendBatch(ctx, b)
	var err error
	for i := 0; i < n && err == nil; i++ {
		_, err = br.Exec()
	}
	if err != nil {
		_ = br.Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) || pgconn.SafeToRetry(err) || !x.begun && x.tx == nil {
			return false, fmt.Errorf("write: %w", err)
		}
		return false, &commitError{err}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return false, &commitError{err}
	case tag.String() == "ROLLBACK":
		return false, fmt.Errorf("write: %w", pgx.ErrTxCommitRollback)
	}
	return true, nil
}

// flushBatch returns the batch flush sends, or nil when there is nothing to send: the
// queued writes, then one statement that draws the IDs of the events that have none yet,
// inserts the stored events and the attempt rows and records the transaction's audit
// span. Events are made storable here, whoever built them: text without NUL bytes or
// invalid UTF-8 and details without the escape \u0000, which jsonb refuses.
func (t *txn) flushBatch() *pgx.Batch {
	if t.queued == nil && len(t.log) == 0 && len(t.attempts) == 0 && !(t.notify && t.notifyInTx) {
		return nil
	}
	b := t.queued
	if b == nil {
		b = &pgx.Batch{}
	}
	t.queued = nil
	if len(t.log) > 0 || len(t.attempts) > 0 {
		if t.undrawn() > 0 {
			t.queueMark(b)
		}
		t.queueEvents(b)
		t.log, t.drawn, t.attempts = nil, 0, nil
	}
	if t.notify && t.notifyInTx {
		b.Queue(`SELECT pg_notify($1, '')`, t.s.channel)
		t.notify = false
	}
	return b
}

// queueEvents adds to b the statement that draws the missing IDs and writes the events and
// the attempt rows.
func (t *txn) queueEvents(b *pgx.Batch) {
	var ids []*int64
	var ords []*int32
	var ats []time.Time
	var typs, workflows, entities, stepNames, keys, actors, reasons, details []string
	var runIDs, stepIDs []int64
	var attempts []int32
	for _, ev := range t.log {
		if ev.e == nil {
			continue // a slot a failed item left empty: no event
		}
		if ev.derived {
			continue
		}
		e := ev.e
		id, ord := t.idOrOrdinal(ev)
		ids, ords = append(ids, id), append(ords, ord)
		ats, typs, runIDs, stepIDs, attempts = append(ats, e.At), append(typs, string(clean(e.Type))), append(runIDs, e.RunID), append(stepIDs, e.StepID), append(attempts, int32(e.Attempt))
		workflows, entities, stepNames, keys = append(workflows, clean(e.Workflow)), append(entities, clean(e.Entity)), append(stepNames, clean(e.StepName)), append(keys, clean(e.EffectKey))
		actors, reasons = append(actors, clean(e.Actor)), append(reasons, string(clean(e.Reason)))
		d := e.Detail
		if len(d) == 0 {
			d = json.RawMessage(`{}`)
		}
		details = append(details, string(jsonbSafe(d)))
	}
	var a attemptColumns
	for _, row := range t.attempts {
		a.add(t, row)
	}
	lo, hi := t.eventTimes()
	var known [2]*int64
	if t.idMin > 0 {
		known = [2]*int64{&t.idMin, &t.idMax}
	}
	b.Queue(`WITH `+fmt.Sprintf(drawSQL, "$1")+`,
		ev AS (
			INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail)
			SELECT coalesce(u.id, i.id), u.at, u.type, u.run_id, u.step_id, u.workflow, u.entity, u.step_name, u.effect_key, u.attempt, u.actor, u.reason,
				u.detail::jsonb
			FROM unnest($2::bigint[], $3::int4[], $4::timestamptz[], $5::text[], $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::text[],
				$11::text[], $12::int4[], $13::text[], $14::text[], $15::text[])
				AS u(id, ord, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail)
			LEFT JOIN ids i ON i.ord = u.ord),
		att AS (
			INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status,
				response_excerpt, claim_event_id, lease_until, prev_outcome, claim_run_event_id, claim_run_change, end_derived, end_reason, end_actor,
				end_run_event_id, end_run_change)
			SELECT coalesce(a.id, i.id), a.run_id, a.step_id, a.step_name, a.number, a.effect_key, a.worker, a.started_at, a.ended_at, a.outcome, a.error,
				a.status, a.excerpt, a.claim_event_id, a.lease_until, a.prev_outcome, a.claim_run_event_id, a.claim_run_change, a.end_derived,
				a.end_reason, a.end_actor, coalesce(a.end_run_event_id, j.id), a.end_run_change
			FROM unnest($16::bigint[], $17::int4[], $18::bigint[], $19::bigint[], $20::text[], $21::int4[], $22::text[], $23::text[],
				$24::timestamptz[], $25::timestamptz[], $26::text[], $27::text[], $28::int4[], $29::text[], $30::bigint[], $31::timestamptz[],
				$32::text[], $33::bigint[], $34::text[], $35::bool[], $36::text[], $37::text[], $38::bigint[], $39::int4[], $40::text[])
				AS a(id, ord, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, status, excerpt,
					claim_event_id, lease_until, prev_outcome, claim_run_event_id, claim_run_change, end_derived, end_reason, end_actor,
					end_run_event_id, run_ord, end_run_change)
			LEFT JOIN ids i ON i.ord = a.ord LEFT JOIN ids j ON j.ord = a.run_ord)
		INSERT INTO audit_spans (first_id, last_id, min_at, max_at)
		SELECT least(min(id), $41::bigint), greatest(max(id), $42::bigint), $43, $44 FROM ids
		HAVING least(min(id), $41::bigint) IS NOT NULL`,
		t.undrawn(), ids, ords, ats, typs, runIDs, stepIDs, workflows, entities, stepNames, keys, attempts, actors, reasons, details,
		a.id, a.ord, a.runID, a.stepID, a.name, a.number, a.key, a.worker, a.started, a.ended, a.outcome, a.err, a.status, a.excerpt,
		a.claimID, a.leaseUntil, a.prev, a.claimRunID, a.claimRunChange, a.endDerived, a.endReason, a.endActor, a.endRunID, a.runOrd, a.endRunChange,
		known[0], known[1], lo, hi)
}

// idOrOrdinal is ev's ID when drawn, else its ordinal among the events the flush draws.
func (t *txn) idOrOrdinal(ev *txEvent) (*int64, *int32) {
	if ev.id != 0 {
		id := ev.id
		return &id, nil
	}
	ord := int32(t.ordinal(ev))
	return nil, &ord
}

// The backoff between retries of transactions that rolled back for a reason that may not
// happen again (see Options.RetryFor): full jitter below a ceiling that doubles from
// retryBaseDelay up to retryMaxDelay.
const (
	retryBaseDelay = 10 * time.Millisecond
	retryMaxDelay  = 500 * time.Millisecond
)

// commitError is a failure of COMMIT: the transaction may or may not have committed.
type commitError struct{ err error }

func (e *commitError) Error() string {
	return "commit (the transaction may or may not have committed): " + e.err.Error()
}
func (e *commitError) Unwrap() error { return e.err }

// tx runs fn in one read committed transaction and commits it, retrying the whole
// transaction when it rolled back for a transient reason. fn must start from scratch each
// time it is called.
func (s *Store) tx(ctx context.Context, op string, fn func(t *txn) error) error {
	return s.txWith(ctx, op, nil, fn)
}

// keyedTx is tx for a transaction of the write path, every statement of which finds its
// rows by key: it runs with keyedSettings.
func (s *Store) keyedTx(ctx context.Context, op string, fn func(t *txn) error) error {
	return s.txWith(ctx, op, keyedSettings, fn)
}

// keyedSettings are the planner settings of the write path's transactions (keyedTx),
// under which PostgreSQL plans their statements and makes the generic plans it keeps.
// Every statement there finds its rows through a unique index or the index of a foreign
// key, for a batch of keys passed as arrays; reading a table whole is never its best plan,
// yet it is the plan PostgreSQL makes for a table it believes tiny — one that was never
// analyzed is taken to be ten pages, whatever it holds — and a generic plan made then would
// be kept as the table grows, until autovacuum's next ANALYZE, which can be a minute and
// tens of thousands of rows later. With sequential scans priced out, an index is used at
// every size (TestWritePathPlans). The price (PostgreSQL adds 10^10 to the cost of a
// sequential scan) stays on the scans that have no alternative, such as reading the events
// sequence, and would make those statements pass the threshold of JIT compilation, which
// then costs hundreds of milliseconds each time: JIT is off as well, since no statement
// here runs long enough to gain from it.
var keyedSettings = []string{`SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)`}

func (s *Store) txWith(ctx context.Context, op string, settings []string, fn func(t *txn) error) error {
	r := s.retrier()
	for {
		err := s.tryTx(ctx, settings, fn)
		if err == nil {
			return nil
		}
		var ce *commitError
		if errors.As(err, &ce) || ctx.Err() != nil || !retryable(err) {
			return failed(op, err)
		}
		if !r.wait(ctx) {
			return failed(op, err)
		}
	}
}

// failed is the error of operation op that ended with err: store.ErrUnavailable as well
// when the server could not be reached.
func failed(op string, err error) error {
	err = fmt.Errorf("postgres: %s: %w", op, err)
	if unreachable(err) {
		return store.Unavailable(err)
	}
	return err
}

func (s *Store) tryTx(ctx context.Context, settings []string, fn func(t *txn) error) error {
	x := &pooledTx{pool: s.pool, settings: settings}
	t := &txn{conn: x, s: s}
	if o, ok := store.OriginFrom(ctx); ok {
		t.origin = &o
	}
	err := fn(t)
	committed := false
	if err == nil {
		committed, err = t.flushCommit(ctx, x)
	}
	var ce *commitError
	if errors.As(err, &ce) {
		x.release()
		return err
	}
	if err != nil {
		lost := x.connLost()
		// A rollback on a broken connection fails too; the server rolls back either way.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		x.rollback(rctx)
		cancel()
		if lost && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return &connLostError{err}
		}
		return err
	}
	if committed {
		x.release()
	} else if err := x.commit(ctx); err != nil {
		if pgconn.SafeToRetry(err) {
			return err // COMMIT was never sent: the transaction rolled back
		}
		return &commitError{err}
	}
	if t.notify {
		s.notifyLater()
	}
	return nil
}

// read runs fn on a pooled connection, retrying when the connection was lost. fn must
// only read.
func (s *Store) read(ctx context.Context, op string, fn func(q querier) error) error {
	r := s.retrier()
	for {
		err := fn(s.pool)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !retryable(err) || !r.wait(ctx) {
			return failed(op, err)
		}
	}
}

// connLostError is a failure after which the transaction's connection was closed: the
// server rolled the transaction back (COMMIT was not sent).
type connLostError struct{ err error }

func (e *connLostError) Error() string { return "connection lost: " + e.err.Error() }
func (e *connLostError) Unwrap() error { return e.err }

// retryable reports whether err means the transaction rolled back for a reason that may
// not happen again: a serialization failure, a deadlock, or a server that could not be
// reached (see unreachable).
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") { // serialization_failure, deadlock_detected
		return true
	}
	return errors.Is(err, errConflict) || unreachable(err)
}

// unreachable reports whether err means the server could not be reached or refused the
// connection: a connection that could not be made or was lost, a server starting up or
// shutting down (SQLSTATE class 08, 57P01–57P03). A context's end is not.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection_exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return false
	}
	var cl *connLostError
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &cl) || errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// retrier spaces the retries of one operation within the store's retry budget.
type retrier struct {
	deadline time.Time
	attempt  int
}

func (s *Store) retrier() *retrier {
	return &retrier{deadline: time.Now().Add(s.retryFor)}
}

// wait sleeps before the next retry — full jitter over an exponential ceiling, the last
// one at the end of the budget — and reports whether to make it: false once the budget is
// spent or ctx ended.
func (r *retrier) wait(ctx context.Context) bool {
	left := time.Until(r.deadline)
	if left <= 0 {
		return false
	}
	r.attempt++
	ceiling := min(retryBaseDelay<<min(r.attempt-1, 20), retryMaxDelay)
	d := min(time.Duration(rand.Int64N(int64(ceiling))+1), left)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fromTS converts a stored timestamp back, in UTC; NULL is the zero time.
func fromTS(v pgtype.Timestamptz) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return v.Time.UTC()
}

// clean makes free text (errors, response excerpts from destinations) storable in a text
// column, which accepts neither NUL bytes nor invalid UTF-8.
func clean[S ~string](s S) S {
	if utf8.ValidString(string(s)) && !strings.ContainsRune(string(s), 0) {
		return s
	}
	return S(strings.ReplaceAll(strings.ToValidUTF8(string(s), "\uFFFD"), "\x00", "\uFFFD"))
}
