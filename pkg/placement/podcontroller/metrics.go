package podcontroller

import (
	"context"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/image"
)

// Metrics are created per component and registered with the registerer
// the caller passes (in build-controller, controller-runtime's registry,
// served on its metrics endpoint), never from package state.

// ControllerMetrics are the pod placement controller's.
type ControllerMetrics struct {
	Pods         *prometheus.CounterVec
	Gated        prometheus.Histogram
	retries      prometheus.Counter
	registry     *prometheus.CounterVec
	registryTime *prometheus.HistogramVec
	cache        *prometheus.CounterVec
}

func newControllerMetrics(reg prometheus.Registerer) (*ControllerMetrics, error) {
	m := &ControllerMetrics{
		Pods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_pods_total",
			Help: "Gated pods released by the placement controller, by outcome (placed, no-supported-arch, fallback, inspection-error, predicates-conflict, ignored, released).",
		}, []string{"outcome"}),
		Gated: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "archway_placement_gated_duration_seconds",
			Help:    "Time from a pod's creation to the removal of its scheduling gate.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "archway_placement_inspection_retries_total",
			Help: "Image inspections of gated pods that failed and were scheduled for a retry.",
		}),
		registry: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_registry_requests_total",
			Help: "Calls to image registries, by operation (inspect, resolve) and result (ok, error).",
		}, []string{"operation", "result"}),
		registryTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "archway_placement_registry_request_duration_seconds",
			Help:    "Duration of calls to image registries, by operation (inspect, resolve).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"operation"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_image_cache_lookups_total",
			Help: "Image cache lookups, by cache (digest, tag) and result (hit, miss).",
		}, []string{"cache", "result"}),
	}
	// Every series from the start, at zero: an alert on increase() sees
	// the first pod of an outcome, which a series born at one would hide.
	for _, o := range []string{outcomePlaced, outcomeConflict, outcomeNoSupportedArch, outcomeFallback, outcomeInspectionError, outcomeIgnored, outcomeReleased} {
		m.Pods.WithLabelValues(o)
	}
	for _, op := range []string{"inspect", "resolve"} {
		for _, result := range []string{"ok", "error"} {
			m.registry.WithLabelValues(op, result)
		}
	}
	return m, placement.Register(reg, m.Pods, m.Gated, m.retries, m.registry, m.registryTime, m.cache)
}

func (m *ControllerMetrics) cacheLookup(cache string, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	m.cache.WithLabelValues(cache, result).Inc()
}

// instrumentedRegistry decorates a Registry with the registry request
// metrics: what the cache could not answer.
type instrumentedRegistry struct {
	inner   image.Registry
	metrics *ControllerMetrics
}

func (r instrumentedRegistry) Architectures(ctx context.Context, ref image.Reference, auth image.Auth) (image.Platforms, digest.Digest, error) {
	start := time.Now()
	ps, d, err := r.inner.Architectures(ctx, ref, auth)
	r.observe("inspect", start, err)
	return ps, d, err
}

func (r instrumentedRegistry) Digest(ctx context.Context, name string, auth image.Auth) (digest.Digest, error) {
	start := time.Now()
	d, err := r.inner.Digest(ctx, name, auth)
	r.observe("resolve", start, err)
	return d, err
}

func (r instrumentedRegistry) observe(op string, start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	r.metrics.registry.WithLabelValues(op, result).Inc()
	r.metrics.registryTime.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
