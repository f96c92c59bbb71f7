package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"

	"github.com/archway-build/archway/test/bed"
)

// TestEventsWrittenWhenStoppedAfterRelease stops build-controller (as
// deployed: --controllers=pod-placement,placement-webhook) with SIGTERM
// while it releases a backlog of gated pods, half of them released: alone,
// it finds no replica to hand them to and releases the rest before it
// exits, and once the process has exited every pod is released and has its
// event on the apiserver.
func TestEventsWrittenWhenStoppedAfterRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds build-controller")
	}
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "events-stop", nil)
	bin := buildPlacementBinary(h.ctx, t, t.TempDir())

	// The process's controller stands in for the suite's.
	suiteController.stop()
	t.Cleanup(func() {
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
		}
	})
	const backlog = 500
	err := createPods(h.ctx, backlog, 20, func(i int) *corev1.Pod {
		return makePod(h.ns, fmt.Sprintf("stop-%03d", i)).image(imgAll).nodeSelector(unschedulableKey, "true").withGate().obj()
	})
	if err != nil {
		t.Fatal(err)
	}
	proc := startPlacementProcess(h.ctx, t, bin, t.TempDir(), "events")
	// Stopped at once, in the middle of the backlog: the controller has
	// just released pods and releases the rest as it stops.
	if err := wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.CaseTimeout, true, func(ctx context.Context) (bool, error) {
		n, _, err := countGated(ctx, h.ns)
		return err == nil && n <= backlog/2, nil
	}); err != nil {
		t.Fatalf("the backlog was not released: %v; log:\n%s", err, proc.log(40))
	}
	if err := proc.stop(); err != nil {
		t.Errorf("build-controller exited with %v; log:\n%s", err, proc.log(40))
	}
	if n, _, err := countGated(h.ctx, h.ns); err != nil || n > 0 {
		t.Errorf("%d pods still gated after the controller stopped (%v)", n, err)
	}
	log := proc.log(1 << 20)
	for _, lost := range []string{"not every event reached the apiserver", "Unable to write event"} {
		if strings.Contains(log, lost) {
			t.Errorf("its log says %q:\n%s", lost, proc.log(40))
		}
	}

	// One event per released pod, each on the apiserver.
	events, err := testBed.Clientset.EventsV1().Events(h.ns).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perPod := map[string]int{}
	for _, e := range events.Items {
		if e.ReportingController == "pod-placement-controller" {
			perPod[e.Regarding.Name]++
		}
	}
	var missing []string
	for i := range backlog {
		if name := fmt.Sprintf("stop-%03d", i); perPod[name] == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d released pods have no event from the controller, e.g. %v; log:\n%s", len(missing), backlog, missing[:min(len(missing), 5)], proc.log(200))
	}
}
