// Package metrics exports onceflow's work to Prometheus. The engine depends on no metrics
// library: it reports measurements through the small onceflow.Metrics interface, which
// this package implements, and the store counts what it holds (store.StatsStore), which
// this package reads at each scrape. Only programs that import this package link the
// Prometheus client.
//
//	m := metrics.New(metrics.Config{Store: st})
//	client, err := onceflow.New(onceflow.Config{Store: st, Metrics: m})
//	…
//	http.Handle("GET /metrics", m.Handler())
//
// # Series
//
// Gauges, read from the store at each scrape (at most once per StatsMaxAge):
//
//	onceflow_runs{workflow,state}                       runs by state
//	onceflow_steps{workflow,step,state}                 steps by state
//	onceflow_review_queue{workflow,reason}              steps waiting in needs_review, by reason
//	onceflow_steps_due{workflow}                        steps due now that no worker has claimed (queue depth)
//
// Counters and histograms, from this process's own work:
//
//	onceflow_step_attempts_total{workflow,step,outcome}           attempts by outcome class
//	onceflow_step_attempt_duration_seconds{workflow,step,outcome} how long attempts ran
//	onceflow_step_claim_lag_seconds{workflow}                     how long after becoming due a step was claimed
//	onceflow_effect_reuses_total{workflow,step}                   steps completed from the effect ledger without acting
//	onceflow_run_starts_total{workflow,outcome}                   starts: created, deduplicated, conflict
//	onceflow_webhook_deliveries_total{workflow,outcome}           deliveries: accepted, duplicate, ignored, rejected
//	onceflow_http_requests_aborted_total{route}                   API and webhook requests whose body was cut short
//	onceflow_leases_reaped_total                                  steps taken back from workers that vanished
//	onceflow_commit_batch_size{kind}                              items per write-path transaction: starts, records, claims
//	onceflow_commit_duration_seconds{kind,outcome}                how long those transactions took (outcome ok or error)
//	onceflow_store_stats_errors_total                             scrapes that could not read the store
//
// A gauge from this process's last measurement of the database's clock (on PostgreSQL; see
// onceflow.Config.ClockSync):
//
//	onceflow_clock_skew_seconds                                   this machine's clock minus the database's
//
// The dedupe hits are onceflow_effect_reuses_total, onceflow_run_starts_total with
// outcome="deduplicated", and onceflow_webhook_deliveries_total with outcome="duplicate".
//
// Labels are workflow and step names, states, outcome classes and reason codes only —
// never run keys, effect keys, entities or ids — so the number of series is bounded by
// the workflow definitions.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// Config configures Metrics. Every field is optional.
type Config struct {
	// Store is counted at each scrape for the gauges; without it there are none.
	Store store.StatsStore
	// StatsMaxAge is how long counts read from the store are reused by later scrapes
	// (default 5 s), so that frequent scrapes do not each scan the tables.
	StatsMaxAge time.Duration
	// StatsTimeout bounds one read of the store (default 5 s).
	StatsTimeout time.Duration
	// Logger receives a warning when the store cannot be read (default: none).
	Logger *slog.Logger
	// Now is the clock that decides which steps are due (default time.Now).
	Now func() time.Time
}

// Metrics is a prometheus.Collector of onceflow's series. Pass it as
// onceflow.Config.Metrics so that the engine reports to it. It is safe for concurrent use.
type Metrics struct {
	cfg Config

	attempts   *prometheus.CounterVec
	durations  *prometheus.HistogramVec
	claimLag   *prometheus.HistogramVec
	reuses     *prometheus.CounterVec
	starts     *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	aborted    *prometheus.CounterVec
	reaped     prometheus.Counter
	statsErrs  prometheus.Counter
	batchSize  *prometheus.HistogramVec
	commitDur  *prometheus.HistogramVec
	clockSkew  prometheus.Gauge
	skewSeen   atomic.Bool // clockSkew is collected once a measurement set it
	queue      queueSeries

	runs, steps, review, due *prometheus.Desc

	mu      sync.Mutex // serialises reads of the store
	stats   *store.Stats
	statsAt time.Time

	handlerOnce sync.Once
	handler     http.Handler
}

var _ onceflow.Metrics = (*Metrics)(nil)
var _ prometheus.Collector = (*Metrics)(nil)

// Buckets of the histograms, in seconds.
var (
	attemptBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	lagBuckets     = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	commitBuckets  = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}
	batchBuckets   = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
)

// New returns Metrics for cfg.
func New(cfg Config) *Metrics {
	if cfg.StatsMaxAge <= 0 {
		cfg.StatsMaxAge = 5 * time.Second
	}
	if cfg.StatsTimeout <= 0 {
		cfg.StatsTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Metrics{
		cfg:   cfg,
		queue: newQueueSeries(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onceflow_step_attempts_total",
			Help: "Attempts of steps, by outcome class (success, retryable, permanent, unknown)."}, []string{"workflow", "step", "outcome"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "onceflow_step_attempt_duration_seconds",
			Help: "How long attempts of steps ran, by outcome class.", Buckets: attemptBuckets}, []string{"workflow", "step", "outcome"}),
		claimLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "onceflow_step_claim_lag_seconds",
			Help: "How long after becoming due steps were claimed.", Buckets: lagBuckets}, []string{"workflow"}),
		reuses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onceflow_effect_reuses_total",
			Help: "Steps completed from the effect ledger without acting, their effect key being already completed."}, []string{"workflow", "step"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onceflow_run_starts_total",
			Help: "Starts of runs, by outcome: created, deduplicated (the run key was known) or conflict (known with another input)."}, []string{"workflow", "outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onceflow_webhook_deliveries_total",
			Help: "Webhook deliveries, by outcome: accepted, duplicate (the event was delivered before), ignored or rejected."}, []string{"workflow", "outcome"}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onceflow_http_requests_aborted_total",
			Help: "API and webhook requests whose body ended before its announced length or stopped arriving, by route pattern."}, []string{"route"}),
		reaped: prometheus.NewCounter(prometheus.CounterOpts{Name: "onceflow_leases_reaped_total",
			Help: "Steps taken back by the lease reaper from workers that stopped renewing their lease."}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "onceflow_commit_batch_size",
			Help:    "Items written per transaction of the write path, by kind (starts, records, claims): what group commit gathers.",
			Buckets: batchBuckets}, []string{"kind"}),
		commitDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "onceflow_commit_duration_seconds",
			Help: "How long transactions of the write path took, by kind and outcome (ok, error).", Buckets: commitBuckets}, []string{"kind", "outcome"}),
		clockSkew: prometheus.NewGauge(prometheus.GaugeOpts{Name: "onceflow_clock_skew_seconds",
			Help: "This machine's clock minus the database's, at this process's last measurement (positive: ahead). Every decision uses the database's clock."}),
		statsErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "onceflow_store_stats_errors_total",
			Help: "Scrapes that could not read the counts of runs and steps from the store."}),
		runs:  prometheus.NewDesc("onceflow_runs", "Runs in the store, by state.", []string{"workflow", "state"}, nil),
		steps: prometheus.NewDesc("onceflow_steps", "Steps in the store, by state.", []string{"workflow", "step", "state"}, nil),
		review: prometheus.NewDesc("onceflow_review_queue", "Steps waiting for a person in needs_review, by reason.",
			[]string{"workflow", "reason"}, nil),
		due: prometheus.NewDesc("onceflow_steps_due", "Steps due now that no worker has claimed yet (queue depth).", []string{"workflow"}, nil),
	}
}

// Observe implements onceflow.Metrics.
func (m *Metrics) Observe(o onceflow.Measurement) {
	switch o.Kind {
	case onceflow.MeasureAttempt:
		m.attempts.WithLabelValues(o.Workflow, o.Step, o.Outcome).Inc()
		m.durations.WithLabelValues(o.Workflow, o.Step, o.Outcome).Observe(o.Duration.Seconds())
	case onceflow.MeasureStepClaim:
		m.claimLag.WithLabelValues(o.Workflow).Observe(o.Duration.Seconds())
	case onceflow.MeasureEffectReuse:
		m.reuses.WithLabelValues(o.Workflow, o.Step).Inc()
	case onceflow.MeasureRunStart:
		m.starts.WithLabelValues(o.Workflow, o.Outcome).Inc()
	case onceflow.MeasureLeaseReap:
		m.reaped.Add(float64(o.Count))
	case onceflow.MeasureCommit:
		if o.Outcome == "ok" {
			m.batchSize.WithLabelValues(o.Step).Observe(float64(o.Count))
		}
		m.commitDur.WithLabelValues(o.Step, o.Outcome).Observe(o.Duration.Seconds())
	case onceflow.MeasureClockSkew:
		m.clockSkew.Set(o.Duration.Seconds())
		m.skewSeen.Store(true)
	}
}

// WebhookDelivery counts a webhook delivery to workflow; outcome is accepted, duplicate,
// ignored or rejected. It is what the onceflow server reports.
func (m *Metrics) WebhookDelivery(workflow, outcome string) {
	m.deliveries.WithLabelValues(workflow, outcome).Inc()
}

// RequestAborted counts a request on route (its pattern) whose body was cut short; it
// implements onceflowhttp.AbortMetrics.
func (m *Metrics) RequestAborted(route string) {
	m.aborted.WithLabelValues(route).Inc()
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	m.clockSkew.Describe(ch)
	ch <- m.runs
	ch <- m.steps
	ch <- m.review
	ch <- m.due
}

func (m *Metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.attempts, m.durations, m.claimLag, m.reuses, m.starts, m.deliveries, m.aborted, m.reaped, m.statsErrs, m.batchSize, m.commitDur},
		m.queue.collectors()...)
}

// Collect implements prometheus.Collector: the counters and histograms, and the gauges
// counted from the store.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.readStats()
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	if m.skewSeen.Load() { // no measurement, no series: SQLite has no clock to compare with
		m.clockSkew.Collect(ch)
	}
	if st == nil {
		return
	}
	// Every state of every workflow (and step) present is reported, 0 included, so that
	// a state that empties reads 0 instead of vanishing.
	runs := map[[2]string]int64{}
	for _, c := range st.Runs {
		for _, s := range store.States {
			runs[[2]string{c.Workflow, string(s)}] += 0
		}
		runs[[2]string{c.Workflow, string(c.State)}] += c.Count
	}
	for k, n := range runs {
		ch <- prometheus.MustNewConstMetric(m.runs, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	steps := map[[3]string]int64{}
	due := map[string]int64{}
	for _, c := range st.Steps {
		for _, s := range store.States {
			steps[[3]string{c.Workflow, c.Step, string(s)}] += 0
		}
		steps[[3]string{c.Workflow, c.Step, string(c.State)}] += c.Count
		due[c.Workflow] += 0
	}
	for k, n := range steps {
		ch <- prometheus.MustNewConstMetric(m.steps, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
	for _, c := range st.Review {
		ch <- prometheus.MustNewConstMetric(m.review, prometheus.GaugeValue, float64(c.Count), c.Workflow, string(c.Reason))
	}
	for _, c := range st.Due {
		due[c.Workflow] += c.Count
	}
	for w, n := range due {
		ch <- prometheus.MustNewConstMetric(m.due, prometheus.GaugeValue, float64(n), w)
	}
}

// readStats returns the store's counts, read at most once per StatsMaxAge; nil without a
// store or when it cannot be read.
func (m *Metrics) readStats() *store.Stats {
	if m.cfg.Store == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.stats != nil && now.Sub(m.statsAt) < m.cfg.StatsMaxAge {
		return m.stats
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StatsTimeout)
	defer cancel()
	st, err := m.cfg.Store.StatsGet(ctx, store.StatsGetParams{Now: m.cfg.Now()})
	if err != nil {
		m.statsErrs.Inc()
		m.cfg.Logger.Warn("metrics: cannot count runs and steps in the store", "error", err)
		m.stats = nil
		return nil
	}
	m.stats, m.statsAt = st, now
	return st
}

// Handler returns an HTTP handler that serves m, with the Go runtime's and the process's
// own series, in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	m.handlerOnce.Do(func() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	})
	return m.handler
}
