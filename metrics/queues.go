package metrics

import "github.com/prometheus/client_golang/prometheus"

// queueSeries are the series of the queue consumers.
type queueSeries struct {
	connected *prometheus.GaugeVec
	messages  *prometheus.CounterVec
}

func newQueueSeries() queueSeries {
	return queueSeries{
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "onceflow_queue_connected",
			Help: "1 while a workflow's queue consumer is connected and consuming, 0 while it retries."}, []string{"workflow", "broker"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onceflow_queue_messages_total",
			Help: "Queue messages stored and acknowledged, by outcome: started, duplicate (the run existed) or rejected (kept for review)."},
			[]string{"workflow", "outcome"}),
	}
}

func (q queueSeries) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.connected, q.messages}
}

// QueueConnected records whether workflow's queue consumer is connected.
func (m *Metrics) QueueConnected(workflow, broker string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.queue.connected.WithLabelValues(workflow, broker).Set(v)
}

// QueueMessage counts a queue message handled for workflow.
func (m *Metrics) QueueMessage(workflow, outcome string) {
	m.queue.messages.WithLabelValues(workflow, outcome).Inc()
}
