// Package demo is the scenario behind `onceflow demo`: the two example workflows of
// package examples — a website form to a CRM lead, e-mail, WhatsApp notice and sales task;
// a signed payment webhook to a paid order, stock reservation, invoice and receipt —
// served by onceflow exactly as `onceflow serve` serves them, driven through the HTTP API
// and the webhook endpoint like real clients drive them, against simulated services that
// misbehave on purpose.
//
// Run starts on 127.0.0.1 a CRM, WhatsApp, stock and invoicing service that honour
// Idempotency-Key, and an SMTP server that, like most, does not deduplicate. They inject
// faults chosen by a seed: 503 and 429 answers, answers that come only after the caller
// gave up although the work was done, connections dropped after the work was done, a 451
// from the mail server, and WhatsApp refusing some numbers for good. Run then serves the
// examples on a fresh SQLite database, posts every website form twice (a double click,
// some at the same instant), delivers every payment event two or three times, sends a
// second event about some payments already handled, and sends events for orders the shop
// had cancelled. Then the monthly-invoices schedule fires its next tick on a clock brought
// forward and fans out over a simulated billing system's customers; onceflow is restarted
// in the middle of the list, and the billing system counts invoices per customer and
// period. When every run is completed or waits for review it stops onceflow and
// checks, from the services' own counts, that no business action was carried out twice
// and none that onceflow recorded is missing.
//
// Retry delays and http timeouts are shortened (see Speedup) so that the scenario takes
// seconds; nothing else differs from the files.
//
// The package does not depend on the command line: internal/cli (the cli package) wires it to `onceflow
// demo`, and its test runs the same scenario.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/examples"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/store"
)

// Config configures Run. Only Store and DBURL are required.
type Config struct {
	// Store is the fresh, empty database the demo uses; DBURL names it for --db in the
	// commands the summary suggests (with any password masked).
	Store store.Store
	DBURL string
	// Forms is how many website forms to post (default 40).
	Forms int
	// Orders is how many paid orders the payment provider reports (default 20).
	Orders int
	// Workers is how many steps execute at once (default 8).
	Workers int
	// Seed chooses which requests fail (default 1). The same seed injects the same faults.
	Seed uint64
	// Progress receives progress lines (default: none).
	Progress io.Writer
	// ProgressEvery is the interval of progress lines while runs are under way (default
	// 1 s).
	ProgressEvery time.Duration
	// Deadline bounds the scenario (default 60 s); runs still in progress then are an
	// invariant failure.
	Deadline time.Duration
	// Logger receives the engine's and the API's logs (default: none).
	Logger *slog.Logger
	// Serve, when set, keeps the scenario's world running once it is played and checked:
	// onceflow is started again on the same database with the web console at /ui/ beside
	// the API, the simulated services stay up, and Serve is called with the finished
	// summary (its API, Console and AdminToken name the running server). Run returns when
	// ctx ends, after stopping them, with the summary and no error.
	Serve func(*Summary)
}

func (c *Config) defaults() error {
	if c.Store == nil || c.DBURL == "" {
		return errors.New("demo: Config.Store and Config.DBURL are required")
	}
	if c.Forms <= 0 {
		c.Forms = 40
	}
	if c.Orders <= 0 {
		c.Orders = 20
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = time.Second
	}
	if c.Deadline <= 0 {
		c.Deadline = 60 * time.Second
	}
	return nil
}

// senders is how many clients post forms, and how many deliver webhooks, at once.
const senders = 8

// Run plays the scenario and returns its summary. An error means the scenario could not
// be played (a port or the database could not be opened, ctx ended); a broken invariant,
// the deadline included, is reported in the summary with InvariantsOK false.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "[%4.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
		}
	}

	secrets := map[string]string{
		"CRM_TOKEN": "crm_" + randomHex(12), "WHATSAPP_TOKEN": "wa_" + randomHex(12), "INVOICING_TOKEN": "inv_" + randomHex(12),
	}
	ds, err := startDestinations(faultPlan{seed: cfg.Seed}, 5*time.Second, secrets)
	if err != nil {
		return nil, err
	}
	defer ds.close()

	st := cfg.Store

	env := ds.env()
	env["PAYMENTS_WEBHOOK_SECRET"] = "whsec_" + base64.StdEncoding.EncodeToString([]byte(randomHex(16)))
	bill, err := startBilling("bill_" + randomHex(12))
	if err != nil {
		return nil, err
	}
	defer bill.close()
	env["BILLING_URL"], env["BILLING_TOKEN"] = bill.url, bill.token
	admin := onceflowhttp.Token{Name: "demo-admin", Secret: "adm_" + randomHex(16), Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}
	website := onceflowhttp.Token{Name: "website", Secret: "web_" + randomHex(16), Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeIngest}}
	own := newOwnListeners()
	kinds, err := demoKinds(st, env, own)
	if err != nil {
		return nil, err
	}
	defer kinds.Close()
	defs, err := loadWorkflows(examples.FS, "examples", reader(kinds))
	if err != nil {
		return nil, err
	}
	shorten(defs, Speedup)
	stackCfg := stackConfig{store: st, defs: defs, kinds: kinds, own: own, env: env, tokens: []onceflowhttp.Token{admin, website}, workers: cfg.Workers, log: cfg.Logger}
	stk, err := startStack(stackCfg)
	if err != nil {
		return nil, err
	}
	var stopOnce sync.Once
	var stopErr error
	stop := func() error {
		stopOnce.Do(func() { stopErr = stk.shutdown() })
		return stopErr
	}
	defer stop()

	sum := &Summary{DBURL: cfg.DBURL, API: stk.url, AdminToken: admin.Secret, Seed: cfg.Seed, Speedup: Speedup}
	for _, d := range defs {
		sum.Workflows = append(sum.Workflows, d.File())
	}
	var names []string
	for _, d := range ds.all() {
		s := d.Stats()
		names = append(names, s.Name+" "+s.Address)
	}
	progress("services up: %s", strings.Join(names, ", "))
	progress("onceflow serving %s (%s) at %s", strings.Join(sum.Workflows, " and "), strings.Join(stk.client.Workflows(), ", "), stk.url)

	sctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	interrupted := func() error {
		if ctx.Err() != nil {
			return fmt.Errorf("demo: %w", ctx.Err())
		}
		return nil
	}

	ords := orders(cfg.Orders)
	if err := cancelOrders(sctx, st, ords); err != nil && sctx.Err() == nil {
		return nil, err
	}
	var cancelled []string
	for _, o := range ords {
		if o.Cancelled {
			cancelled = append(cancelled, o.ID)
		}
	}
	if len(cancelled) > 0 {
		progress("the shop cancelled order(s) %s before their payments arrived", strings.Join(cancelled, ", "))
	}

	runs := newRunIDs()
	c := newCaller(stk.url)
	defer c.close()
	site := &formPoster{c: c, token: website.Secret, runs: runs}
	gateway := &provider{c: c, secret: env["PAYMENTS_WEBHOOK_SECRET"], runs: runs}
	fms := forms(cfg.Forms)
	var traffic sync.WaitGroup
	traffic.Go(func() { site.postAll(sctx, fms, senders) })
	traffic.Go(func() { gateway.deliverAll(sctx, ords, senders) })
	traffic.Wait()
	if err := interrupted(); err != nil {
		return nil, err
	}
	f := site.Stats()
	progress("website: %d forms, %d posts → %d runs created, %d double clicks answered with the run already created, %d answered 409 (in progress) and retried after Retry-After, %d key reused with an edited body refused 422",
		f.Forms, f.Posts, f.Created, f.Replayed, f.InProgress, f.KeyReused)
	p := gateway.Stats()
	progress("payments: %d events delivered %d times → %d runs started, %d repeated deliveries recognised by event id",
		p.Events, p.Deliveries, p.Started, p.Repeated)

	if err := waitPaid(sctx, st, ords); err == nil {
		gateway.deliverSecond(sctx, ords)
		if p2 := gateway.Stats(); p2.SecondEvents > 0 {
			progress("payments: %d more event(s) with a new event id about payments already handled → %d run(s) started",
				p2.SecondEvents, p2.Started-p.Started)
		}
	}
	if err := interrupted(); err != nil {
		return nil, err
	}

	settled, err := waitSettled(sctx, st, runs.all(), cfg.ProgressEvery, progress, ds)
	if err := interrupted(); err != nil {
		return nil, err
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	if settled {
		// A restart in the middle of the monthly fan-out: stop onceflow as a deploy would,
		// and start it again on the same database.
		restart := func() error {
			if err := stk.shutdown(); err != nil {
				return fmt.Errorf("demo: stop onceflow: %w", err)
			}
			next, err := startStack(stackCfg)
			if err != nil {
				return err
			}
			stk, sum.API = next, next.url
			return nil
		}
		sched, err := newScheduler(st, defs, stk.build)
		if err != nil {
			return nil, err
		}
		inv, err := playInvoices(sctx, st, bill, sched, restart, progress)
		switch {
		case err == nil:
			sum.Invoices = &inv
		case interrupted() != nil:
			return nil, interrupted()
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
	}
	if err := stop(); err != nil {
		return nil, fmt.Errorf("demo: stop onceflow: %w", err)
	}
	if settled {
		progress("all %d form and payment runs completed or waiting for review; onceflow stopped", len(runs.all()))
	} else {
		progress("the deadline of %v passed with runs still in progress; onceflow stopped", cfg.Deadline)
	}
	sum.Elapsed = time.Since(began).Round(time.Millisecond)
	sum.Forms, sum.Payments = site.Stats(), gateway.Stats()

	// ctx may have reached its deadline: read with a fresh one.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rcancel()
	sc := &scenario{sum: sum, store: st, ds: ds, kinds: stepKinds(defs), orders: ords, runs: runs, settled: settled}
	if err := sc.collect(rctx); err != nil {
		return nil, err
	}
	sc.check()
	checkInvoices(sum)
	if cfg.Serve == nil {
		return sum, nil
	}
	stackCfg.console = true
	live, err := startStack(stackCfg)
	if err != nil {
		return nil, err
	}
	sum.API, sum.Console, sum.Serving = live.url, live.url+"/ui/", true
	cfg.Serve(sum)
	<-ctx.Done()
	if err := live.shutdown(); err != nil {
		return nil, fmt.Errorf("demo: stop onceflow: %w", err)
	}
	return sum, nil
}

// waitSettled waits until every run in ids has settled (see runSettled) or ctx ends,
// printing progress every every.
func waitSettled(ctx context.Context, st store.Store, ids map[int64]string, every time.Duration, progress func(string, ...any), ds *destinations) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()
	lastProgress := time.Now()
	open := make(map[int64]bool, len(ids))
	for id := range ids {
		open[id] = true
	}
	states := map[int64]store.State{}
	for {
		for id := range open {
			r, err := st.RunGetByID(ctx, id)
			if err != nil {
				return false, err
			}
			states[id] = r.State
			ok, err := runSettled(ctx, st, r)
			if err != nil {
				return false, err
			}
			if ok {
				delete(open, id)
			}
		}
		if len(open) == 0 {
			return true, nil
		}
		if time.Since(lastProgress) >= every {
			lastProgress = time.Now()
			by := map[store.State]int{}
			for _, s := range states {
				by[s]++
			}
			var req, faults int
			for _, d := range ds.all() {
				s := d.Stats()
				req, faults = req+s.Requests, faults+s.FaultsInjected
			}
			done, review := by[store.StateCompleted], by[store.StateNeedsReview]
			progress("runs: %d completed, %d needs_review, %d in progress · services: %d requests, %d faults injected",
				done, review, len(ids)-done-review, req, faults)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-poll.C:
		}
	}
}

// runSettled reports whether a run can no longer move without a person: it is completed,
// or it waits for review and none of its steps is running, retrying or ready to run.
func runSettled(ctx context.Context, st store.Store, r *store.Run) (bool, error) {
	switch r.State {
	case store.StateCompleted:
		return true, nil
	case store.StateNeedsReview:
	default:
		return false, nil
	}
	steps, err := st.StepListByRun(ctx, r.ID)
	if err != nil {
		return false, err
	}
	for _, s := range steps {
		switch {
		case s.State == store.StateProcessing, s.State == store.StateRetrying:
			return false, nil
		case s.State == store.StatePending && s.Waiting == 0:
			return false, nil
		}
	}
	return true, nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
