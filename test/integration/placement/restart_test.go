package placement

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// unschedulableKey is a node label no node has: pods that select it stay
// Pending cheaply, so large cases do not make the scheduler and kwok run
// hundreds of pods.
const unschedulableKey = "placement.archway.dev/no-such-node"

// createPods creates n pods from newPod(i) with workers creators at once.
func createPods(ctx context.Context, n, workers int, newPod func(i int) *corev1.Pod) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := k8s.Create(ctx, newPod(i)); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// countGated counts the namespace's pods that still carry the gate.
func countGated(ctx context.Context, ns string) (gatedPods, total int, err error) {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for i := range pods.Items {
		if gated(&pods.Items[i]) {
			gatedPods++
		}
	}
	return gatedPods, len(pods.Items), nil
}

// TestControllerRestartReleasesBacklog: a controller started on a backlog
// of 1,000 pods created with the gate while no controller ran (restored
// from a backup, say: the webhook itself gates only while a controller
// runs) places them all.
func TestControllerRestartReleasesBacklog(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "restart", nil)
	suiteController.stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			var err error
			if suiteController, err = startController(suiteOptions()); err != nil {
				t.Errorf("restarting the suite controller: %v", err)
			}
		}
	})
	const n = 1000
	images := []string{imgAll, imgARM64S390X, imgAMD64Only, testBed.BaseImage}
	start := time.Now()
	err := createPods(h.ctx, n, 32, func(i int) *corev1.Pod {
		return makePod(h.ns, fmt.Sprintf("backlog-%04d", i)).image(images[i%len(images)]).nodeSelector(unschedulableKey, "true").withGate().obj()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d pods in %v", n, time.Since(start))
	gatedPods, total, err := countGated(h.ctx, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	if gatedPods != n || total != n {
		t.Fatalf("%d of %d pods gated, want all %d", gatedPods, total, n)
	}

	start = time.Now()
	if suiteController, err = startController(suiteOptions()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	err = wait.PollUntilContextTimeout(h.ctx, 200*time.Millisecond, bed.CaseTimeout, true, func(ctx context.Context) (bool, error) {
		gatedPods, _, err = countGated(ctx, h.ns)
		return err == nil && gatedPods == 0, nil
	})
	if err != nil {
		t.Fatalf("%d pods still gated: %v", gatedPods, err)
	}
	elapsed := time.Since(start)
	t.Logf("a restarted controller released %d gated pods in %v (%.0f pods/s, including the leader election and the cache sync)",
		n, elapsed, float64(n)/elapsed.Seconds())
	var pods corev1.PodList
	if err := k8s.List(h.ctx, &pods, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelRemoved || p.Labels[placement.NodeAffinityLabel] != placement.LabelValueSet {
			t.Errorf("pod %s: labels %v", p.Name, p.Labels)
			break
		}
	}
}
