package controller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// Metrics are the build controller's Prometheus metrics. NewMetrics makes
// them and Register adds them to a registry (controller-runtime's, whose
// endpoint the manager serves); nothing is registered at package level.
type Metrics struct {
	// platformDuration observes how long each platform of a finished build
	// ran, from its pod starting to its entry ending.
	platformDuration *prometheus.HistogramVec
	builds           *buildCollector
}

// NewMetrics makes the metrics; reader lists Builds when they are scraped
// (the manager's cache).
func NewMetrics(reader client.Reader) *Metrics {
	return &Metrics{
		platformDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "archway_build_platform_duration_seconds",
			Help:    "How long one platform of a multi-platform build ran, by platform and the phase it ended in; observed when the build ends.",
			Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"platform", "phase"}),
		builds: &buildCollector{
			reader: reader,
			total: prometheus.NewDesc("openshift_build_total",
				"Builds by phase, reason and strategy (OpenShift's metric of that name).",
				[]string{"phase", "reason", "strategy"}, nil),
			active: prometheus.NewDesc("openshift_build_active_time_seconds",
				"For each build that has not ended, when it became active (started running, or was created while New or Pending), in seconds since the epoch (OpenShift's metric of that name).",
				[]string{"namespace", "name", "phase", "strategy"}, nil),
		},
	}
}

// Register adds every metric to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.platformDuration, m.builds} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observeEnded records the platforms' durations of a build that just
// ended. It is called once per build: after the status write that made the
// build terminal succeeded, which happens once since a terminal phase never
// changes.
func (m *Metrics) observeEnded(st buildv1.BuildStatus) {
	if m == nil {
		return
	}
	for _, e := range st.Platforms {
		if e.StartTimestamp == nil || e.CompletionTimestamp == nil || !e.Phase.IsTerminal() {
			continue
		}
		m.platformDuration.WithLabelValues(e.Platform, string(e.Phase)).Observe(e.CompletionTimestamp.Sub(e.StartTimestamp.Time).Seconds())
	}
}

// buildCollector computes OpenShift's build gauges from the Builds in the
// cache each time the metrics are scraped, as OpenShift's controller does,
// so they are right after a restart and on every replica.
type buildCollector struct {
	reader        client.Reader
	total, active *prometheus.Desc
}

func (c *buildCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.active
}

func (c *buildCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list buildv1.BuildList
	if err := c.reader.List(ctx, &list); err != nil {
		return
	}
	type key struct{ phase, reason, strategy string }
	counts := map[key]int{}
	for i := range list.Items {
		b := &list.Items[i]
		phase := string(b.Status.Phase)
		if phase == "" {
			phase = string(buildv1.BuildPhaseNew)
		}
		strategy := string(b.Spec.Strategy.Type)
		counts[key{phase, string(b.Status.Reason), strategy}]++
		if b.Status.Phase.IsTerminal() {
			continue
		}
		since := b.CreationTimestamp.Time
		if b.Status.StartTimestamp != nil {
			since = b.Status.StartTimestamp.Time
		}
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(since.Unix()), b.Namespace, b.Name, phase, strategy)
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(n), k.phase, k.reason, k.strategy)
	}
}
