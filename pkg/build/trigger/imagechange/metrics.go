package imagechange

import "github.com/prometheus/client_golang/prometheus"

// The results of a poll, the values of the metric's result label.
const (
	// ResultTriggered: a new image started a build.
	ResultTriggered = "triggered"
	// ResultUnchanged: every image resolved, none new to build (a first
	// observation recorded without a build included).
	ResultUnchanged = "unchanged"
	// ResultError: an image could not be resolved or a build started.
	ResultError = "error"
	// ResultPaused: the BuildConfig is paused; nothing was resolved.
	ResultPaused = "paused"
	// ResultWaiting: the BuildConfig's ConfigChange build has not been
	// started yet; the poll comes again soon.
	ResultWaiting = "waiting"
)

// Metrics counts the polls.
type Metrics struct {
	polls *prometheus.CounterVec
}

// NewMetrics makes the counter.
func NewMetrics() *Metrics {
	return &Metrics{polls: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archway_imagechange_trigger_polls_total",
		Help: "Polls of BuildConfigs' ImageChange triggers, by result (triggered, unchanged, error, paused, waiting).",
	}, []string{"result"})}
}

func (m *Metrics) observe(result string) {
	if m != nil {
		m.polls.WithLabelValues(result).Inc()
	}
}
