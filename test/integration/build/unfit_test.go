package build

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/test/bed"
)

// unfitLabel marks the nodes the cases' configuration calls unfit for
// builds.
const unfitLabel = "archway.test/unfit-for-builds"

// markUnfit labels an untainted amd64 node unfit for builds until the
// test ends, and returns its name.
func markUnfit(t *testing.T, ctx context.Context) string {
	t.Helper()
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes, client.MatchingLabels{corev1.LabelArchStable: "amd64"}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if len(n.Spec.Taints) > 0 || n.Spec.Unschedulable {
			continue
		}
		patch := client.MergeFrom(n.DeepCopy())
		n.Labels[unfitLabel] = "true"
		if err := k8s.Patch(ctx, n, patch); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			patch := client.MergeFrom(n.DeepCopy())
			delete(n.Labels, unfitLabel)
			if err := k8s.Patch(context.Background(), n, patch); err != nil {
				t.Errorf("removing %s from node %s: %v", unfitLabel, n.Name, err)
			}
		})
		return n.Name
	}
	t.Fatal("no untainted amd64 node")
	return ""
}

// unfitConfig is the cases' configuration: nodes labelled unfitLabel are
// unfit for builds.
func unfitConfig() *configv1alpha1.BuildControllerConfig {
	return testConfig(func(c *configv1alpha1.BuildControllerConfig) {
		c.UnfitNodes = &configv1alpha1.UnfitNodesConfig{LabelKey: unfitLabel}
	})
}

// TestUnfitNodesKeepBuildsOff: with build.unfitNodes set, a tenant whose
// Build selects a node labelled unfit (by its hostname) gets a pod the
// scheduler cannot place: it requires that the node not have the label,
// and stays unscheduled.
// Not in parallel: it labels a node unfit for every case's builds.
func TestUnfitNodesKeepBuildsOff(t *testing.T) {
	h := newHarness(t, "unfit")
	node := markUnfit(t, h.ctx)
	h.cfg = unfitConfig()
	h.ctrl = startController(t, h.ns, h.cfg)
	b := h.buildObj("steer", amd64)
	b.Spec.NodeSelector = buildv1.OptionalNodeSelector{corev1.LabelHostname: node}
	h.create(b)
	name := buildv1.PlatformPodName("steer", amd64)
	h.waitPodNames(name)
	// The scheduler's verdict, either way, is the positive signal.
	var scheduled *corev1.PodCondition
	if err := wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		p := h.pod(name)
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodScheduled {
				scheduled = &p.Status.Conditions[i]
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the scheduler never decided on pod %s", name)
	}
	p := h.pod(name)
	if scheduled.Status != corev1.ConditionFalse || p.Spec.NodeName != "" {
		t.Fatalf("pod %s was scheduled onto %q (PodScheduled %s %s), a node labelled %s", name, p.Spec.NodeName,
			scheduled.Status, scheduled.Message, unfitLabel)
	}
	t.Logf("pod %s: %s: %s", name, scheduled.Reason, scheduled.Message)
}

// TestUnfitNodesAdmissionCannotLift: a pod that admission left without the
// requirement (here the controller's own client drops the pod's affinity
// on its way to the apiserver, as a mutating webhook or a scheduling
// policy replacing it would) is deleted, and its platform fails
// CannotCreateBuildPod saying why.
// Not in parallel: it labels a node unfit for every case's builds.
func TestUnfitNodesAdmissionCannotLift(t *testing.T) {
	h := newHarness(t, "unfit-lifted")
	markUnfit(t, h.ctx)
	h.cfg = unfitConfig()
	h.ctrl = startControllerWith(t, h.ns, h.cfg, &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if p, ok := obj.(*corev1.Pod); ok {
				p.Spec.Affinity = nil
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	h.create(h.buildObj("lifted", amd64))
	var entry buildv1.BuildStatusPlatform
	if err := wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		b := h.get()
		for _, e := range b.Status.Platforms {
			if e.Platform == amd64 && e.Phase.IsTerminal() {
				entry = e
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the platform never ended")
	}
	if entry.Reason != buildv1.StatusReasonCannotCreateBuildPod || !strings.Contains(entry.Message, "build.unfitNodes") {
		t.Fatalf("platform %s: %s %s, want CannotCreateBuildPod naming build.unfitNodes", amd64, entry.Reason, entry.Message)
	}
	// Deleted, not necessarily gone: a pod the scheduler bound first ends
	// its graceful deletion only when its node's kubelet confirms.
	for name, p := range h.pods() {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s left on node %q, not deleted", name, p.Spec.NodeName)
		}
	}
	t.Logf("%s: %s", entry.Reason, entry.Message)
}
