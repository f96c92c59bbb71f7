package placement

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// podWrapper builds test pods: makePod("p").image(x).obj().
type podWrapper struct{ pod *corev1.Pod }

func makePod(ns, name string) *podWrapper {
	return &podWrapper{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0)},
	}}
}

func (w *podWrapper) image(images ...string) *podWrapper {
	for _, img := range images {
		w.pod.Spec.Containers = append(w.pod.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", len(w.pod.Spec.Containers)), Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
		})
	}
	return w
}

func (w *podWrapper) initImage(img string) *podWrapper {
	w.pod.Spec.InitContainers = append(w.pod.Spec.InitContainers, corev1.Container{
		Name: fmt.Sprintf("init%d", len(w.pod.Spec.InitContainers)), Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
	})
	return w
}

func (w *podWrapper) pullAlways() *podWrapper {
	for i := range w.pod.Spec.Containers {
		w.pod.Spec.Containers[i].ImagePullPolicy = corev1.PullAlways
	}
	return w
}

func (w *podWrapper) nodeSelector(key, value string) *podWrapper {
	if w.pod.Spec.NodeSelector == nil {
		w.pod.Spec.NodeSelector = map[string]string{}
	}
	w.pod.Spec.NodeSelector[key] = value
	return w
}

func (w *podWrapper) requiredTerms(terms ...corev1.NodeSelectorTerm) *podWrapper {
	w.pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
	return w
}

func (w *podWrapper) pullSecret(name string) *podWrapper {
	w.pod.Spec.ImagePullSecrets = append(w.pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	return w
}

func (w *podWrapper) serviceAccount(name string) *podWrapper {
	w.pod.Spec.ServiceAccountName = name
	return w
}

func (w *podWrapper) obj() *corev1.Pod { return w.pod }

func hostnameIn(hosts ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: hosts}
}

func archIn(arches ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: arches}
}

// harness is one case: a namespace and helpers failing the case.
type harness struct {
	t   *testing.T
	ctx context.Context
	ns  string
}

func newHarness(t *testing.T, prefix string, labels map[string]string) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, ns: ns.Name}
	t.Cleanup(func() { deletePods(context.Background(), h.ns) })
	return h
}

// deletePods removes a namespace's pods (envtest runs no namespace
// controller), so kwok and the scheduler forget them.
func deletePods(ctx context.Context, ns string) {
	_ = k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
}

func (h *harness) create(pod *corev1.Pod) *corev1.Pod {
	h.t.Helper()
	if pod.Namespace == "" {
		pod.Namespace = h.ns
	}
	if err := k8s.Create(h.ctx, pod); err != nil {
		h.t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return pod
}

func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate })
}

// waitReleased waits until the controller has removed the gate.
func (h *harness) waitReleased(name string) *corev1.Pod {
	h.t.Helper()
	pod := &corev1.Pod{}
	err := bed.WaitFor(h.ctx, k8s, types.NamespacedName{Namespace: h.ns, Name: name}, pod, func(p *corev1.Pod) bool {
		return !gated(p) && p.Labels[placement.SchedulingGateLabel] == placement.SchedulingGateLabelRemoved
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return pod
}

// waitBound waits until the scheduler binds the pod and returns the node's
// architecture.
func (h *harness) waitBound(name string) string {
	h.t.Helper()
	node, err := testBed.WaitPodBound(h.ctx, h.ns, name)
	if err != nil {
		h.t.Fatal(err)
	}
	n := &corev1.Node{}
	if err := k8s.Get(h.ctx, types.NamespacedName{Name: node}, n); err != nil {
		h.t.Fatal(err)
	}
	return n.Labels[corev1.LabelArchStable]
}

// waitUnschedulable waits until the scheduler has tried the pod and found
// no node, and returns its message.
func (h *harness) waitUnschedulable(name string) string {
	h.t.Helper()
	pod := &corev1.Pod{}
	err := bed.WaitFor(h.ctx, k8s, types.NamespacedName{Namespace: h.ns, Name: name}, pod, func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		h.t.Fatalf("pod %s was bound to %s", name, pod.Spec.NodeName)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}

// waitEvent waits for an event about the pod with reason and returns its
// note.
func (h *harness) waitEvent(pod, reason string) string {
	h.t.Helper()
	note, err := framework.WaitEvent(h.ctx, k8s, h.ns, pod, reason)
	if err != nil {
		h.t.Fatalf("no %s event for pod %s: %v", reason, pod, err)
	}
	return note
}

// placementReasons are the event reasons of the placement components.
var placementReasons = []string{
	placement.EventSchedGateAdded, placement.EventPredicateSet, placement.EventPredicatesConflict,
	placement.EventInspectionError, placement.EventFallbackPredicateSet, placement.EventGatedPodIgnored,
	placement.EventSchedGateRemovalSuccess, placement.EventSchedGateRemovalFailed, placement.EventNoSupportedArchitectures,
}

// events returns the reasons of the placement events about the pod, one
// per occurrence, sorted.
func (h *harness) events(pod string) []string {
	h.t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(h.ctx, list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == pod && slices.Contains(placementReasons, e.Reason) {
			n := int32(1)
			if e.Series != nil {
				n = e.Series.Count
			}
			for range max(n, e.DeprecatedCount, 1) {
				reasons = append(reasons, e.Reason)
			}
		}
	}
	slices.Sort(reasons)
	return reasons
}

func (h *harness) expectLabels(pod *corev1.Pod, want map[string]string) {
	h.t.Helper()
	for k, v := range want {
		got, ok := pod.Labels[k]
		if !ok || got != v {
			h.t.Errorf("pod %s: label %s = %q (set: %v), want %q", pod.Name, k, got, ok, v)
		}
	}
}

func (h *harness) expectNoLabels(pod *corev1.Pod, keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		if v, ok := pod.Labels[k]; ok {
			h.t.Errorf("pod %s: unexpected label %s=%q", pod.Name, k, v)
		}
	}
}

// ensureConfig makes the ClusterPodPlacementConfig have spec, waits until
// the controller reports it Available and the webhook's cache has it, and
// restores the default config when the case ends.
func ensureConfig(t *testing.T, spec multiarchv1beta1.ClusterPodPlacementConfigSpec) {
	t.Helper()
	if err := applyConfig(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := applyConfig(context.Background(), multiarchv1beta1.ClusterPodPlacementConfigSpec{}); err != nil {
			t.Errorf("restoring the default config: %v", err)
		}
	})
}

func applyConfig(ctx context.Context, spec multiarchv1beta1.ClusterPodPlacementConfigSpec) error {
	ctx, cancel := context.WithTimeout(ctx, bed.LongTimeout)
	defer cancel()
	key := types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}
	// A config being deleted must be gone before one is created again.
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		c := &multiarchv1beta1.ClusterPodPlacementConfig{}
		err := k8s.Get(ctx, key, c)
		return apierrors.IsNotFound(err) || (err == nil && c.DeletionTimestamp == nil), nil
	}); err != nil {
		return fmt.Errorf("waiting for the config being deleted to go: %w", err)
	}
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	err := k8s.Get(ctx, key, cfg)
	switch {
	case apierrors.IsNotFound(err):
		cfg = &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: key.Name}, Spec: spec}
		if err := k8s.Create(ctx, cfg); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		cfg.Spec = spec
		if err := k8s.Update(ctx, cfg); err != nil {
			return err
		}
	}
	generation := cfg.Generation
	if err := bed.WaitFor(ctx, k8s, key, cfg, func(c *multiarchv1beta1.ClusterPodPlacementConfig) bool {
		return c.Status.ObservedGeneration >= generation && meta.IsStatusConditionTrue(c.Status.Conditions, multiarchv1beta1.ConditionAvailable)
	}); err != nil {
		return err
	}
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		seen := &multiarchv1beta1.ClusterPodPlacementConfig{}
		err := webhookMgr.GetCache().Get(ctx, key, seen)
		return err == nil && seen.Generation >= generation, nil
	}); err != nil {
		return err
	}
	if spec.NamespaceSelector != nil {
		return nil
	}
	return waitHeartbeatSeen(ctx)
}

// deleteConfig deletes the ClusterPodPlacementConfig and waits until it is
// gone (after the controller released the gated pods).
func deleteConfig(ctx context.Context) error {
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	if err := k8s.Delete(ctx, cfg); err != nil {
		return client.IgnoreNotFound(err)
	}
	return bed.WaitGone(ctx, k8s, client.ObjectKeyFromObject(cfg), cfg)
}

func metav1ObjectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// dryRunAll makes a create validated and admitted but not stored.
type dryRunAll struct{}

func (dryRunAll) ApplyToCreate(o *client.CreateOptions) { o.DryRun = []string{metav1.DryRunAll} }
