package scm

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts webhook requests.
type Metrics struct {
	requests *prometheus.CounterVec
}

// NewMetrics makes the counters; Register adds them to a registry.
func NewMetrics() *Metrics {
	return &Metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archway_buildconfig_webhook_requests_total",
		Help: "BuildConfig webhook deliveries by type (github, gitlab, bitbucket, generic, unknown) and result " +
			"(started, skipped, not_found, bad_signature, rate_limited, bad_request, too_large, unsupported_media_type, method_not_allowed, paused, invalid, error).",
	}, []string{"type", "result"})}
}

// Register adds the counters to r.
func (m *Metrics) Register(r prometheus.Registerer) error { return r.Register(m.requests) }

func (m *Metrics) request(typ, result string) {
	if m != nil {
		m.requests.WithLabelValues(typ, result).Inc()
	}
}
