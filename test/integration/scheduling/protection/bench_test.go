package protection

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// BenchmarkAdmissionLatency prints the latency of pod creates under 100
// concurrent clients (p50, p99 as the clients see them) in mode Enable:
// pods sent to the webhook (they tolerate the control-plane taint, in an
// authorized namespace, so they are admitted after a full decision) and,
// for the floor, plain pods the webhook configuration's matchConditions do
// not send. The pods name a scheduler that does not exist, so no binding
// competes. It asserts nothing about time.
func BenchmarkAdmissionLatency(b *testing.B) {
	ctx := context.Background()
	ns, err := testBed.CreateNamespace(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	useConfig(b, schedulingv1alpha1.ModeEnable, ns+"/default")
	creator := as(b, serviceAccountUser(ns, "default"))
	rounds := map[string]func(i int) *corev1.Pod{
		"through the webhook": func(i int) *corev1.Pod {
			return makePod(ns, fmt.Sprintf("w-%d", i)).tolerateControlPlane().schedulerName("benchmark-none").obj()
		},
		"not sent (floor)": func(i int) *corev1.Pod {
			return makePod(ns, fmt.Sprintf("f-%d", i)).schedulerName("benchmark-none").obj()
		},
	}
	const clients = 100
	results := map[string][]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, name := range []string{"through the webhook", "not sent (floor)"} {
			durations := make([]time.Duration, clients)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range clients {
				wg.Go(func() {
					pod := rounds[name](i)
					<-start
					t0 := time.Now()
					if err := creator.Create(ctx, pod); err != nil {
						b.Errorf("creating %s: %v", pod.Name, err)
					}
					durations[i] = time.Since(t0)
				})
			}
			close(start)
			wg.Wait()
			results[name] = append(results[name], durations...)
			b.StopTimer()
			if err := k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
				b.Fatal(err)
			}
			if err := waitNoPods(ctx, ns); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	for _, name := range []string{"through the webhook", "not sent (floor)"} {
		d := results[name]
		slices.Sort(d)
		p50, p99 := d[len(d)*50/100], d[min(len(d)-1, len(d)*99/100)]
		fmt.Printf("pod creates, %d concurrent clients, %s: p50 %.1f ms, p99 %.1f ms (%d creates)\n",
			clients, name, ms(p50), ms(p99), len(d))
	}
	count, sum := handlerTime(b)
	if count > 0 {
		fmt.Printf("webhook handler: %d decisions, mean %.3f ms each\n", count, 1000*sum/float64(count))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// waitNoPods waits until the namespace's pods are gone.
func waitNoPods(ctx context.Context, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods left in %s: %w", len(pods.Items), ns, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// handlerTime reads the webhook's duration histogram: decisions and
// seconds spent.
func handlerTime(b *testing.B) (uint64, float64) {
	families, err := registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "archway_control_plane_protection_webhook_duration_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}
