package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/examples"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/natsstep"
	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/triggers/natsqueue"
	"github.com/onceflow/onceflow/triggers/queue"
)

// EnvQueuesTag passes the queue scenario's name suffix to its worker process.
const EnvQueuesTag = "ONCEFLOW_DEMO_QUEUES_TAG"

// QueuesConfig configures RunQueues: the queue scenario of examples/order-events.yaml, on a
// real NATS JetStream server and a real PostgreSQL database standing in for the shop's.
type QueuesConfig struct {
	// Store is the fresh onceflow database; Child starts `onceflow demo --queues-worker` on
	// it with the environment env added.
	Store store.Store
	Child func(env []string) *exec.Cmd
	// NATSURL names the NATS server (JetStream enabled); ShopURL a PostgreSQL database in
	// which the demo creates a schema of its own for the shop's orders table.
	NATSURL, ShopURL string
	// Orders is how many order events are published (default 100).
	Orders   int
	Progress io.Writer
	// Deadline bounds the scenario (default 60 s).
	Deadline time.Duration
}

// QueuesSummary is what the queue scenario did, counted at the broker and in the shop's
// database.
type QueuesSummary struct {
	Events      int `json:"events"`
	PublishedTw int `json:"published_twice"`
	Cancelled   int `json:"cancelled_orders"`
	// CrashKey is the effect key whose database transaction committed just before the
	// worker process was killed.
	CrashKey string `json:"crash_key"`
	Runs     int    `json:"runs"`
	// Deduplicated counts deliveries that found their run (repeats and redeliveries).
	Deduplicated int `json:"deduplicated_deliveries"`
	Paid         int `json:"orders_paid"`
	PaidTwice    int `json:"orders_changed_twice"`
	Applied      int `json:"onceflow_applied_rows"`
	// FromApplied counts sql steps completed from onceflow_applied after the crash.
	FromApplied  int      `json:"steps_completed_from_onceflow_applied"`
	Warehouse    uint64   `json:"warehouse_messages"`
	InvariantsOK bool     `json:"invariants_ok"`
	Broken       []string `json:"failures,omitempty"`
}

// WriteText prints the summary for people.
func (s *QueuesSummary) WriteText(w io.Writer) error {
	ok := "ok"
	if !s.InvariantsOK {
		ok = "FAILED: " + strings.Join(s.Broken, "; ")
	}
	_, err := fmt.Fprintf(w, `
order events published:            %d (%d of them twice), %d for orders the shop had cancelled
worker killed after the COMMIT of: %s (before onceflow recorded it)
runs:                              %d, one per event; %d deliveries found their run
shop database:                     %d orders paid, %d changed twice; onceflow_applied holds %d keys
completed from onceflow_applied:   %d steps (their statements had committed; not applied again)
warehouse stream:                  %d messages, one per paid order
invariants:                        %s
`, s.Events, s.PublishedTw, s.Cancelled, s.CrashKey, s.Runs, s.Deduplicated, s.Paid, s.PaidTwice, s.Applied, s.FromApplied, s.Warehouse, ok)
	return err
}

// queueNames are the scenario's stream, subjects and schema, made unique by tag.
type queueNames struct {
	tag, orders, warehouse, subject, schema string
}

func namesFor(tag string) queueNames {
	return queueNames{tag: tag, orders: "ORDERS_DEMO_" + strings.ToUpper(tag), warehouse: "WAREHOUSE_DEMO_" + strings.ToUpper(tag),
		subject: "demo" + tag, schema: "onceflow_demo_" + tag}
}

// shopDSN is the shop database's URL with the scenario's schema first on the search path,
// so that the example's statements find "orders" there.
func (n queueNames) shopDSN(base string) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + n.schema
}

// queueDefs loads examples/order-events.yaml with the scenario's stream and subjects.
func queueDefs(n queueNames, r *flowfile.Reader) ([]*flowfile.Definition, error) {
	src, err := examples.FS.ReadFile("order-events.yaml")
	if err != nil {
		return nil, err
	}
	d, ps := r.Parse("examples/order-events.yaml", src)
	if len(ps) > 0 {
		return nil, ps
	}
	ns := natsSettings(d)
	ns.Stream, ns.Consumer = n.orders, "onceflow-"+n.subject
	ns.Subject = n.subject + "." + ns.Subject
	for i := range d.Steps {
		if c, ok := d.Steps[i].Config.(*natsstep.Settings); ok {
			c.Subject = n.subject + "." + c.Subject
		}
	}
	return []*flowfile.Definition{d}, nil
}

// natsSettings is the nats: block of d's queue: block (order-events.yaml has one).
func natsSettings(d *flowfile.Definition) *natsqueue.Settings {
	cfg, _ := d.Trigger("queue")
	return cfg.(*queue.Settings).Brokers["nats"].(*natsqueue.Settings)
}

// queueStack builds the workflow as onceflow serve does and returns the client and the
// consumer.
func queueStack(st store.Store, n queueNames, natsURL, shopURL, worker string, hooks stdsteps.Hooks) (*onceflow.Client, *natsqueue.Consumer, *steps.Registry, error) {
	env := map[string]string{"SHOP_DB": n.shopDSN(shopURL), "ONCEFLOW_NATS_URL": natsURL}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	deps, err := stdsteps.New(stdsteps.Options{Store: st, Env: lookup, Hooks: hooks})
	if err != nil {
		return nil, nil, nil, err
	}
	defs, err := queueDefs(n, reader(deps))
	if err != nil {
		return nil, nil, deps, err
	}
	wfs, err := flowfile.NewBuilder(flowfile.BuildOptions{Store: st, Env: lookup}).Workflows(defs)
	if err != nil {
		return nil, nil, deps, err
	}
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: worker, Workers: 8, LeaseFor: 2 * time.Second, HeartbeatEvery: 500 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, ReapInterval: 200 * time.Millisecond, EffectWait: 50 * time.Millisecond, ShutdownGrace: 3 * time.Second})
	if err != nil {
		return nil, nil, deps, err
	}
	cfg, _ := defs[0].Trigger("queue")
	q, ns := cfg.(*queue.Settings), natsSettings(defs[0])
	trig, err := natsqueue.New(queue.Config{Workflow: defs[0].Name, RunKey: q.RunKey, MaxBacklog: q.MaxBacklog},
		natsqueue.Config{URL: natsURL, Stream: ns.Stream, Consumer: ns.Consumer, Subject: ns.Subject, AckWait: 5 * time.Second, Batch: 20})
	if err != nil {
		return nil, nil, deps, err
	}
	for _, w := range append(wfs, trig.Companions(c)...) {
		if err := c.Register(w); err != nil {
			return nil, nil, deps, err
		}
	}
	return c, trig, deps, nil
}

// QueuesWorker is the worker process of the queue scenario: it consumes and executes steps
// until, right after the database COMMIT of its crashAt-th sql step, it kills itself with
// SIGKILL — before onceflow records the step and before the message is acknowledged.
func QueuesWorker(ctx context.Context, st store.Store, natsURL, shopURL string, crashAt int32, out io.Writer) error {
	n := namesFor(os.Getenv(EnvQueuesTag))
	if n.tag == "" {
		return fmt.Errorf("demo: %s is not set; this process is started by onceflow demo --queues", EnvQueuesTag)
	}
	var commits atomic.Int32
	crash := sqlstep.Hooks{AfterCommit: func(key string) {
		if commits.Add(1) == crashAt {
			fmt.Fprintf(out, "crash-after-commit %s\n", key)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}}
	c, trig, deps, err := queueStack(st, n, natsURL, shopURL, "demo-worker-killed", stdsteps.Hooks{SQL: crash})
	defer deps.Close()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = trig.Run(ctx, c) }()
	return c.Serve(ctx)
}

// RunQueues plays the queue scenario: order events published to JetStream (some twice),
// a worker process killed between the shop database's COMMIT and onceflow's record, and
// a second worker that finishes; then it counts, in the shop's database and the
// warehouse's stream, what happened.
func RunQueues(ctx context.Context, cfg QueuesConfig) (*QueuesSummary, error) {
	if cfg.Orders <= 0 {
		cfg.Orders = 100
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 60 * time.Second
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if !strings.HasPrefix(cfg.ShopURL, "postgres://") && !strings.HasPrefix(cfg.ShopURL, "postgresql://") {
		return nil, errors.New("demo --queues: the shop database must be PostgreSQL (a postgres:// URL), as the example's statements are")
	}
	began := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, "[%4.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	n := namesFor(randomHex(4))

	// The shop: an orders table in a schema of its own, and onceflow_applied.
	conn, err := pgx.Connect(ctx, cfg.ShopURL)
	if err != nil {
		return nil, fmt.Errorf("demo: shop database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+n.schema+`;
		CREATE TABLE `+n.schema+`.orders (id bigint PRIMARY KEY, status text NOT NULL, paid_at timestamptz,
			customer_email text NOT NULL, total_cents bigint NOT NULL, paid_count int NOT NULL DEFAULT 0);
		CREATE FUNCTION `+n.schema+`.count_paid() RETURNS trigger LANGUAGE plpgsql AS
			'BEGIN IF NEW.status = ''paid'' THEN NEW.paid_count := OLD.paid_count + 1; END IF; RETURN NEW; END';
		CREATE TRIGGER count_paid BEFORE UPDATE ON `+n.schema+`.orders FOR EACH ROW EXECUTE FUNCTION `+n.schema+`.count_paid()`); err != nil {
		return nil, fmt.Errorf("demo: shop database: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `DROP SCHEMA `+n.schema+` CASCADE`) //nolint:errcheck
	sum := &QueuesSummary{Events: cfg.Orders}
	for i := 1; i <= cfg.Orders; i++ {
		status := "pending"
		if i%10 == 0 {
			status, sum.Cancelled = "cancelled", sum.Cancelled+1
		}
		if _, err := conn.Exec(ctx, `INSERT INTO `+n.schema+`.orders (id, status, customer_email, total_cents) VALUES ($1, $2, $3, $4)`,
			1000+i, status, fmt.Sprintf("customer%d@example.com", i), 1990+i); err != nil {
			return nil, err
		}
	}
	db, err := sqlstep.OpenDB("SHOP_DB", func(string) (string, bool) { return n.shopDSN(cfg.ShopURL), true })
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return nil, err
	}
	say("shop: %d orders in schema %s (%d of them cancelled); onceflow migrate --target SHOP_DB created %s", cfg.Orders, n.schema, sum.Cancelled, sqlstep.Table)

	// The broker: the order events, and the warehouse's stream.
	nc, err := nats.Connect(cfg.NATSURL)
	if err != nil {
		return nil, fmt.Errorf("demo: NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	for name, subject := range map[string]string{n.orders: n.subject + ".orders.>", n.warehouse: n.subject + ".warehouse.>"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Duplicates: 2 * time.Minute}); err != nil {
			return nil, fmt.Errorf("demo: create stream %s: %w", name, err)
		}
		defer js.DeleteStream(context.WithoutCancel(ctx), name) //nolint:errcheck
	}
	for i := 1; i <= cfg.Orders; i++ {
		body, _ := json.Marshal(map[string]any{"event_id": fmt.Sprintf("evt_%s_%d", n.tag, i), "order_id": 1000 + i})
		copies := 1
		if i%5 == 0 {
			copies, sum.PublishedTw = 2, sum.PublishedTw+1
		}
		for range copies {
			if _, err := js.Publish(ctx, n.subject+".orders.paid", body); err != nil {
				return nil, err
			}
		}
	}
	say("broker: %d order events published to stream %s, %d of them twice", cfg.Orders, n.orders, sum.PublishedTw)

	// A worker process that dies right after a COMMIT.
	child := cfg.Child([]string{EnvQueuesTag + "=" + n.tag, "ONCEFLOW_NATS_URL=" + cfg.NATSURL, "SHOP_DB=" + cfg.ShopURL})
	childOut, err := child.StdoutPipe()
	if err != nil {
		return nil, err
	}
	child.Stderr = io.Discard
	if err := child.Start(); err != nil {
		return nil, fmt.Errorf("demo: start the worker process: %w", err)
	}
	outBytes, _ := io.ReadAll(childOut)
	_ = child.Wait()
	for _, line := range strings.Split(string(outBytes), "\n") {
		if k, ok := strings.CutPrefix(line, "crash-after-commit "); ok {
			sum.CrashKey = k
		}
	}
	if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || sum.CrashKey == "" {
		return nil, fmt.Errorf("demo: the worker process did not die after a commit as planned (%v)", child.ProcessState)
	}
	say("worker process killed with SIGKILL right after the shop database committed %s", sum.CrashKey)

	// A second worker finishes; the first one's leases expire and its messages come back.
	c, trig, deps, err := queueStack(cfg.Store, n, cfg.NATSURL, cfg.ShopURL, "demo-worker", stdsteps.Hooks{})
	defer deps.Close()
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	served, consumed := make(chan error, 1), make(chan error, 1)
	go func() { served <- c.Serve(runCtx) }()
	go func() { consumed <- trig.Run(runCtx, c) }()
	defer func() { stop(); <-consumed }()
	say("second worker consuming")
	deadline := time.Now().Add(cfg.Deadline)
	for {
		done, err := queuesSettled(ctx, cfg.Store, js, n, cfg.Orders)
		if err != nil {
			stop()
			return nil, err
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			sum.Broken = append(sum.Broken, "deadline passed with runs or messages unfinished")
			break
		}
		select {
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	if err := <-served; err != nil {
		return nil, err
	}
	if err := c.Flush(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	if err := countQueues(ctx, cfg.Store, conn, js, n, sum); err != nil {
		return nil, err
	}
	sum.check(cfg.Orders)
	return sum, nil
}

// queuesSettled reports whether every event has a finished run and every message was
// acknowledged.
func queuesSettled(ctx context.Context, st store.Store, js jetstream.JetStream, n queueNames, orders int) (bool, error) {
	stats, err := st.StatsGet(ctx, store.StatsGetParams{Now: time.Now()})
	if err != nil {
		return false, err
	}
	var finished int64
	for _, r := range stats.Runs {
		if r.Workflow == "order-events" && (r.State == store.StateCompleted || r.State == store.StateNeedsReview) {
			finished += r.Count
		}
	}
	if finished != int64(orders) {
		return false, nil
	}
	cons, err := js.Consumer(ctx, n.orders, "onceflow-"+n.subject)
	if err != nil {
		return false, nil
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return false, err
	}
	return info.NumPending == 0 && info.NumAckPending == 0, nil
}

func countQueues(ctx context.Context, st store.Store, conn *pgx.Conn, js jetstream.JetStream, n queueNames, sum *QueuesSummary) error {
	runs, err := st.RunList(ctx, store.RunListParams{Workflow: "order-events", Limit: 100000})
	if err != nil {
		return err
	}
	sum.Runs = len(runs)
	for _, r := range runs {
		steps, err := st.StepListByRun(ctx, r.ID)
		if err != nil {
			return err
		}
		for _, s := range steps {
			var out sqlstep.Result
			if s.Name == "mark_paid" && s.State == store.StateCompleted && json.Unmarshal(s.Output, &out) == nil && out.Replayed {
				sum.FromApplied++
			}
		}
	}
	evs, err := st.EventList(ctx, store.EventListParams{Limit: 1000000})
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Type == store.EventRunDeduplicated && e.Workflow == "order-events" {
			sum.Deduplicated++
		}
	}
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'paid'), count(*) FILTER (WHERE paid_count > 1),
		(SELECT count(*) FROM `+n.schema+`.`+sqlstep.Table+`) FROM `+n.schema+`.orders`).Scan(&sum.Paid, &sum.PaidTwice, &sum.Applied)
	if err != nil {
		return err
	}
	s, err := js.Stream(ctx, n.warehouse)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	sum.Warehouse = info.State.Msgs
	return nil
}

func (s *QueuesSummary) check(orders int) {
	want := orders - s.Cancelled
	checks := []struct {
		ok   bool
		what string
	}{
		{s.Runs == orders, fmt.Sprintf("%d runs for %d events", s.Runs, orders)},
		{s.Deduplicated >= s.PublishedTw, fmt.Sprintf("%d deliveries found their run, fewer than the %d events published twice", s.Deduplicated, s.PublishedTw)},
		{s.Paid == want, fmt.Sprintf("%d orders paid, want %d", s.Paid, want)},
		{s.PaidTwice == 0, fmt.Sprintf("%d orders changed twice", s.PaidTwice)},
		{s.Applied == want, fmt.Sprintf("onceflow_applied holds %d keys, want %d", s.Applied, want)},
		{s.FromApplied >= 1, "no step completed from onceflow_applied after the crash"},
		{s.Warehouse == uint64(want), fmt.Sprintf("%d warehouse messages, want %d", s.Warehouse, want)},
	}
	for _, c := range checks {
		if !c.ok {
			s.Broken = append(s.Broken, c.what)
		}
	}
	s.InvariantsOK = len(s.Broken) == 0
}
