package webhook

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archway-build/archway/pkg/placement"
)

// webhookMetrics are the gate webhook's.
type webhookMetrics struct {
	pods    *prometheus.CounterVec
	latency prometheus.Histogram
}

func newWebhookMetrics(reg prometheus.Registerer) (*webhookMetrics, error) {
	m := &webhookMetrics{
		pods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_webhook_pods_total",
			Help: "Pods the gate webhook admitted, by result (gated, skipped) and the reason for skipping.",
		}, []string{"result", "reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "archway_placement_webhook_duration_seconds",
			Help:    "Time the gate webhook spent deciding on a pod.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1},
		}),
	}
	return m, placement.Register(reg, m.pods, m.latency)
}
