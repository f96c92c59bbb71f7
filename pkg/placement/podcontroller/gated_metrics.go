package podcontroller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/pkg/placement"
)

// gatedCollector reports, at each scrape, the pods still held by archway's
// scheduling gate: how many, and when the oldest was created. The counters
// and the gate-to-ungate histogram are observed when a pod is released, so
// they say nothing of a pod that stays gated; these gauges do. It reads the
// controller's cache of gated pods, which runs on the elected leader only:
// the other replicas report nothing.
type gatedCollector struct {
	pods   client.Reader
	count  *prometheus.Desc
	oldest *prometheus.Desc
}

func newGatedCollector(pods client.Reader) *gatedCollector {
	return &gatedCollector{
		pods: pods,
		count: prometheus.NewDesc("archway_placement_gated_pods",
			"Unbound pods held by archway's scheduling gate (reported by the elected placement controller).", nil, nil),
		oldest: prometheus.NewDesc("archway_placement_oldest_gated_pod_timestamp_seconds",
			"Creation time, in seconds since the epoch, of the oldest pod held by archway's scheduling gate; absent when none is.", nil, nil),
	}
}

func (c *gatedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.oldest
}

// gatedListTimeout bounds the cache read of one scrape.
const gatedListTimeout = 5 * time.Second

func (c *gatedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), gatedListTimeout)
	defer cancel()
	var pods corev1.PodList
	// Not the leader (the cache is not started) or no answer: no sample,
	// rather than a count of zero that would hide the leader's.
	// Read only: the cache's own objects, not copies of them.
	if err := c.pods.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	n := 0
	var oldest time.Time
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != "" || !placement.HasGate(p) {
			continue
		}
		n++
		if created := p.CreationTimestamp.Time; oldest.IsZero() || created.Before(oldest) {
			oldest = created
		}
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
	if n > 0 {
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, float64(oldest.UnixNano())/1e9)
	}
}
