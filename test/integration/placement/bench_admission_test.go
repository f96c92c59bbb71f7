package placement

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// BenchmarkDecidedAtAdmission measures how long pods whose placement the
// pod alone decides (every required term pins kubernetes.io/arch; no
// configured preference) wait, from the start of their create: until they
// are seen without the gate, and until the scheduler binds them. 200 pods,
// 20 creators at once.
func BenchmarkDecidedAtAdmission(b *testing.B) {
	benchConfig(b)
	ctx := context.Background()
	for range b.N {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-admission-"}}
		if err := k8s.Create(ctx, ns); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { deletePods(context.Background(), ns.Name) })
		var mu sync.Mutex
		ungated, bound := map[string]time.Time{}, map[string]time.Time{}
		note := func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if _, seen := ungated[pod.Name]; !seen && !gated(pod) {
				ungated[pod.Name] = now
			}
			if _, seen := bound[pod.Name]; !seen && pod.Spec.NodeName != "" {
				bound[pod.Name] = now
			}
		}
		factory := informers.NewSharedInformerFactoryWithOptions(testBed.Clientset, 0, informers.WithNamespace(ns.Name))
		if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) },
		}); err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		factory.Start(stop)
		factory.WaitForCacheSync(stop)

		const n = 200
		var started sync.Map
		arches := []string{"amd64", "arm64", "ppc64le", "s390x"}
		err := createPods(ctx, n, 20, func(i int) *corev1.Pod {
			name := fmt.Sprintf("decided-%03d", i)
			started.Store(name, time.Now())
			return makePod(ns.Name, name).image(imgAll).requiredTerms(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{archIn(arches[i%4])}},
			).obj()
		})
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			mu.Lock()
			done := len(bound) == n
			mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d pods bound within 2m", len(bound), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(stop)
		factory.Shutdown()
		var toUngated, toBound []time.Duration
		started.Range(func(k, v any) bool {
			t0 := v.(time.Time)
			toUngated = append(toUngated, max(ungated[k.(string)].Sub(t0), 0))
			toBound = append(toBound, max(bound[k.(string)].Sub(t0), 0))
			return true
		})
		u50, u99 := percentiles(toUngated)
		b50, b99 := percentiles(toBound)
		fmt.Printf("decided at admission, %d pods: create to ungated p50 %.1f / p99 %.1f ms; create to bound p50 %.1f / p99 %.1f ms\n", n, u50, u99, b50, b99)
		b.ReportMetric(u50, "ungated-p50-ms")
		b.ReportMetric(u99, "ungated-p99-ms")
		b.ReportMetric(b50, "bound-p50-ms")
		b.ReportMetric(b99, "bound-p99-ms")
	}
}
