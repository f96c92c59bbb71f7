package policy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// BenchmarkAdmissionLatency prints the latency of pod creations through
// the apiserver when 100 clients create pods at once, each pod selected by
// three policies (two namespaced, one cluster), against the same burst in a
// namespace the webhook configuration excludes (no webhook called), and
// the webhook's own time per pod from its histogram. It asserts nothing
// about time. Run it alone:
//
//	go test -tags "..." -run '^$' -bench AdmissionLatency -benchtime 1x ./test/integration/scheduling/policy/
func BenchmarkAdmissionLatency(b *testing.B) {
	ctx := context.Background()
	ns := newNamespace(b, nil)
	everything := &metav1.LabelSelector{}
	createPolicy(b, nsPolicy(ns, "zone", 10, everything, kupidv1alpha1.SchedulingCriteria{
		Affinity: requiredAffinity(term(in("zone", "a")), term(in("zone", "b"))),
	}))
	createPolicy(b, nsPolicy(ns, "tolerate", 0, everything, kupidv1alpha1.SchedulingCriteria{
		Tolerations: []corev1.Toleration{tolSpot, tolDedicated},
	}))
	createPolicy(b, clusterPolicy("bench-"+ns, 0, inNamespace(ns), everything, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"pool": "bench"},
	}))
	excluded := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "archway-system"}}
	if err := k8s.Create(ctx, excluded); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	const clients = 100
	for round := range b.N {
		for _, target := range []struct{ label, ns string }{{"3 policies", ns}, {"no webhook", excluded.Name}} {
			durations := make([]time.Duration, clients)
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					pod := makePod(target.ns, fmt.Sprintf("bench-%d-%d", round, i)).obj()
					start := time.Now()
					if err := k8s.Create(ctx, pod); err != nil {
						b.Error(err)
					}
					durations[i] = time.Since(start)
				})
			}
			wg.Wait()
			slices.Sort(durations)
			b.Logf("%d concurrent pod creates, %s: p50 %v, p99 %v, max %v", clients, target.label,
				durations[clients/2].Round(100*time.Microsecond), durations[clients*99/100-1].Round(100*time.Microsecond),
				durations[clients-1].Round(100*time.Microsecond))
		}
	}
	mfs, err := metricsRegistry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "archway_scheduling_policy_admission_duration_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			b.Logf("webhook handler, every pod of the suite run: %d admissions, mean %v", h.GetSampleCount(),
				time.Duration(h.GetSampleSum()/float64(h.GetSampleCount())*float64(time.Second)).Round(time.Microsecond))
		}
	}
}
