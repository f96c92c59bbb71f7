package protection

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the webhook's, created per Setup and registered with the
// registerer the caller passes (build-controller passes controller-runtime's
// metrics.Registry, served on its metrics endpoint).
type metrics struct {
	decisions *prometheus.CounterVec
	latency   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_control_plane_protection_decisions_total",
			Help: "Requests the control-plane protection webhook decided, by group, mode and result (disabled, no-path, authorized, denied, warned).",
		}, []string{"group", "mode", "result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "archway_control_plane_protection_webhook_duration_seconds",
			Help:    "Time the control-plane protection webhook spent deciding on a request.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1},
		}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.latency} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
		}
	}
	return m, nil
}
