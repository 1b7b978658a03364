package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/store"
)

// The monthly-invoices part of the demo: the example's schedule fires its next tick, brought
// forward to now on a clock of its own, and fans out over the customers of a simulated
// billing system; onceflow is restarted while the customer list is being walked, and the
// billing system counts the invoices it issued per customer and period.

// Names in examples/monthly-invoices.yaml.
const (
	invoiceWorkflow = "monthly-invoices"
	invoiceSchedule = "monthly-invoices"
)

// Settings of the billing system.
const (
	billingCustomers = 60
	billingPageSize  = 10
	// billingHangPage is the page whose first request hangs until the caller gives up: the
	// moment the demo restarts onceflow.
	billingHangPage = 3
)

// InvoiceStats is what the monthly-invoices part did.
type InvoiceStats struct {
	// Tick is the nominal time of the tick fired, Period its billing period.
	Tick   string `json:"tick"`
	Period string `json:"period"`
	// Customers is how many active customers the billing system lists.
	Customers int `json:"customers"`
	// ListRequests counts the requests for pages of the list; Restarted says onceflow was
	// restarted while it walked the list.
	ListRequests int  `json:"list_requests"`
	Restarted    bool `json:"restarted"`
	// Runs counts the invoice runs started; Invoices the invoices the billing system
	// issued, InvoicesSent those it sent; Repeated the requests it answered from a key seen
	// before.
	Runs         int `json:"runs"`
	Invoices     int `json:"invoices"`
	InvoicesSent int `json:"invoices_sent"`
	Repeated     int `json:"repeated_keys"`
	// PerCustomerPeriod counts customers by how many invoices they got for the period
	// ("1" must be every customer).
	PerCustomerPeriod map[string]int `json:"per_customer_period"`
}

// billing is the simulated billing system: a paged list of active customers and an invoice
// API that honours Idempotency-Key and counts invoices by customer, period and type.
type billing struct {
	srv   *http.Server
	url   string
	token string

	mu         sync.Mutex
	hung       bool
	hanging    chan struct{} // closed when the list hangs
	listed     int
	byKey      map[string]string // Idempotency-Key → invoice id
	issued     map[string]int    // customer|period|type → invoices issued
	sent       map[string]int    // invoice id → sends
	repeated   int
	nextNumber int
}

func startBilling(token string) (*billing, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: billing: %w", err)
	}
	b := &billing{url: "http://" + ln.Addr().String(), token: token, hanging: make(chan struct{}),
		byKey: map[string]string{}, issued: map[string]int{}, sent: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /customers", b.customers)
	mux.HandleFunc("POST /invoices", b.issue)
	mux.HandleFunc("POST /invoices/{id}/send", b.send)
	b.srv = &http.Server{Handler: b.auth(mux), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *billing) close() { _ = b.srv.Close() }

func (b *billing) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+b.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (b *billing) customers(w http.ResponseWriter, r *http.Request) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if page < 1 {
		page = 1
	}
	b.mu.Lock()
	b.listed++
	hang := page == billingHangPage && !b.hung
	if hang {
		b.hung = true
		close(b.hanging)
	}
	b.mu.Unlock()
	if hang {
		<-r.Context().Done() // the caller goes away: onceflow is restarted meanwhile
		return
	}
	body := map[string]any{"data": []any{}, "links": map[string]any{}}
	var data []any
	for i := (page - 1) * billingPageSize; i < page*billingPageSize && i < billingCustomers; i++ {
		data = append(data, map[string]any{"customer_id": fmt.Sprintf("cus_%03d", i+1), "plan": "pro"})
	}
	if data != nil {
		body["data"] = data
	}
	if page*billingPageSize < billingCustomers {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		body["links"] = map[string]any{"next": "?" + q.Encode()}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func (b *billing) issue(w http.ResponseWriter, r *http.Request) {
	var in struct {
		CustomerID string `json:"customer_id"`
		Period     string `json:"period"`
		Type       string `json:"type"`
	}
	key := r.Header.Get("Idempotency-Key")
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || key == "" || in.CustomerID == "" || in.Period == "" {
		http.Error(w, "customer_id, period and an Idempotency-Key are required", http.StatusUnprocessableEntity)
		return
	}
	b.mu.Lock()
	id, seen := b.byKey[key]
	if seen {
		b.repeated++
	} else {
		b.nextNumber++
		id = fmt.Sprintf("inv_%05d", b.nextNumber)
		b.byKey[key] = id
		b.issued[in.CustomerID+"|"+in.Period+"|"+in.Type]++
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

func (b *billing) send(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	b.mu.Lock()
	if _, seen := b.byKey[key]; seen {
		b.repeated++
	} else {
		b.byKey[key] = r.PathValue("id")
		b.sent[r.PathValue("id")]++
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"sent": true}`))
}

// stats counts what the billing system did for period.
func (b *billing) stats(period string) InvoiceStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := InvoiceStats{Customers: billingCustomers, ListRequests: b.listed, Repeated: b.repeated, PerCustomerPeriod: map[string]int{}}
	for i := range billingCustomers {
		n := b.issued[fmt.Sprintf("cus_%03d|%s|subscription", i+1, period)]
		s.PerCustomerPeriod[strconv.Itoa(n)]++
	}
	for _, n := range b.issued {
		s.Invoices += n
	}
	for _, n := range b.sent {
		s.InvoicesSent += n
	}
	return s
}

// scheduler is a client on the demo's database that only fires schedule ticks, on a clock
// of its own that the demo moves.
type scheduler struct {
	client *onceflow.Client
	mu     sync.Mutex
	now    time.Time
}

func (s *scheduler) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *scheduler) set(t time.Time) {
	s.mu.Lock()
	s.now = t
	s.mu.Unlock()
}

func newScheduler(st store.Store, defs []*flowfile.Definition, build *flowfile.Builder) (*scheduler, error) {
	s := &scheduler{now: time.Now()}
	c, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "demo-scheduler", ScheduleClock: s.clock})
	if err != nil {
		return nil, err
	}
	if err := registerAll(c, defs, build); err != nil {
		return nil, err
	}
	s.client = c
	return s, nil
}

// registerAll registers the workflows and schedules of defs, as onceflow serve does.
func registerAll(c *onceflow.Client, defs []*flowfile.Definition, build *flowfile.Builder) error {
	wfs, err := build.Workflows(defs)
	if err != nil {
		return err
	}
	for _, w := range wfs {
		if err := c.Register(w); err != nil {
			return err
		}
	}
	return flowfile.RegisterSchedules(c, defs, build)
}

// playInvoices fires the next monthly tick, restarts onceflow (restart) while the customer
// list is walked, waits until every invoice run settled and returns what the billing system
// counted.
func playInvoices(ctx context.Context, st store.Store, bill *billing, sched *scheduler, restart func() error, progress func(string, ...any)) (InvoiceStats, error) {
	infos, err := sched.client.Schedules(ctx, 1)
	if err != nil {
		return InvoiceStats{}, err
	}
	var tick time.Time
	for _, in := range infos {
		if in.Name == invoiceSchedule && len(in.Next) > 0 {
			tick = in.Next[0]
		}
	}
	if tick.IsZero() {
		return InvoiceStats{}, errors.New("demo: the monthly-invoices schedule has no next tick")
	}
	sched.set(tick.Add(-2 * time.Second))
	if err := sched.client.FireSchedules(ctx); err != nil {
		return InvoiceStats{}, err
	}
	sched.set(tick.Add(time.Second))
	if err := sched.client.FireSchedules(ctx); err != nil {
		return InvoiceStats{}, err
	}
	walkKey := invoiceSchedule + ":" + tick.Format(time.RFC3339)
	walk, err := st.RunGetByKey(ctx, invoiceSchedule+".for-each", walkKey)
	if err != nil {
		return InvoiceStats{}, fmt.Errorf("demo: the tick started no walk of the customer list: %w", err)
	}
	period := tick.Format("2006-01")
	progress("schedule %s: tick %s fired (the clock brought forward from %s) → run %d walks the customer list of period %s",
		invoiceSchedule, tick.Format(time.RFC3339), time.Now().Format("2006-01-02 15:04"), walk.ID, period)

	select {
	case <-bill.hanging:
	case <-ctx.Done():
		return InvoiceStats{}, ctx.Err()
	}
	n := countRuns(ctx, st, invoiceWorkflow)
	progress("onceflow restarted while fetching page %d of the customer list, after starting %d invoice runs", billingHangPage, n)
	if err := restart(); err != nil {
		return InvoiceStats{}, err
	}
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()
	for {
		w, err := st.RunGetByID(ctx, walk.ID)
		if err != nil {
			return InvoiceStats{}, err
		}
		if w.State == store.StateCompleted || w.State == store.StateNeedsReview {
			ok, err := invoicesSettled(ctx, st)
			if err != nil {
				return InvoiceStats{}, err
			}
			if ok {
				break
			}
		}
		select {
		case <-ctx.Done():
			return InvoiceStats{}, ctx.Err()
		case <-poll.C:
		}
	}
	s := bill.stats(period)
	s.Tick, s.Period, s.Restarted, s.Runs = tick.Format(time.RFC3339), period, true, countRuns(ctx, st, invoiceWorkflow)
	progress("monthly invoices: %d customers, %d invoice runs, %d invoices issued and %d sent; invoices per customer for %s: %s",
		s.Customers, s.Runs, s.Invoices, s.InvoicesSent, period, s.perCustomer())
	return s, nil
}

// perCustomer says how many customers got how many invoices for the period:
// "1 invoice(s): 60 customer(s)".
func (s InvoiceStats) perCustomer() string {
	var parts []string
	for _, n := range sortedKeys(s.PerCustomerPeriod) {
		parts = append(parts, fmt.Sprintf("%s invoice(s): %d customer(s)", n, s.PerCustomerPeriod[n]))
	}
	return strings.Join(parts, "; ")
}

func countRuns(ctx context.Context, st store.Store, workflow string) int {
	runs, err := st.RunList(ctx, store.RunListParams{Workflow: workflow, Limit: 100000})
	if err != nil {
		return 0
	}
	return len(runs)
}

// invoicesSettled reports whether every customer has an invoice run and none can move on
// without a person.
func invoicesSettled(ctx context.Context, st store.Store) (bool, error) {
	runs, err := st.RunList(ctx, store.RunListParams{Workflow: invoiceWorkflow, Limit: 100000})
	if err != nil {
		return false, err
	}
	if len(runs) < billingCustomers {
		return false, nil
	}
	for _, r := range runs {
		ok, err := runSettled(ctx, st, r)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// checkInvoices adds the invariant of the monthly-invoices part.
func checkInvoices(sum *Summary) {
	s := sum.Invoices
	var problems []string
	if s == nil {
		problems = append(problems, "the monthly-invoices part did not run to its end")
	} else {
		for n, customers := range s.PerCustomerPeriod {
			if n != "1" {
				problems = append(problems, fmt.Sprintf("%d customer(s) got %s invoices for %s", customers, n, s.Period))
			}
		}
		if s.Runs != s.Customers {
			problems = append(problems, fmt.Sprintf("%d invoice runs for %d customers", s.Runs, s.Customers))
		}
		if s.InvoicesSent != s.Invoices {
			problems = append(problems, fmt.Sprintf("%d invoices issued, %d sent", s.Invoices, s.InvoicesSent))
		}
	}
	inv := Invariant{Name: "the monthly tick invoiced every customer exactly once for its period, across a restart mid-list", OK: len(problems) == 0,
		Detail: strings.Join(problems, "; ")}
	sum.Invariants = append(sum.Invariants, inv)
	sum.InvariantsOK = sum.InvariantsOK && inv.OK
	if s != nil {
		db := " --db " + sum.DBURL
		sum.Next = append(sum.Next,
			Hint{Command: "onceflow runs list --workflow " + invoiceWorkflow + db, Why: "one invoice run per customer for " + s.Period},
			Hint{Command: "onceflow runs list --entity schedule:" + invoiceSchedule + db, Why: "the walk of the customer list, taken up again after the restart"})
	}
}
