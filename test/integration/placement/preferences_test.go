package placement

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// TestPreferenceSources: each preferred term says which config it came
// from; a pod's own architecture preference is never joined by configured
// ones; a pod whose images could not be inspected still gets the
// configured preferences.
func TestPreferenceSources(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoringFor("ppc64le", 30, "amd64", 20)})
	h := newHarness(t, "sources", nil)
	ppc := &multiarchv1beta1.PodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "tuning"},
		Spec: multiarchv1beta1.PodPlacementConfigSpec{
			Priority: 5, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Plugins: scoringFor("arm64", 40, "amd64", 25),
		},
	}
	if err := k8s.Create(h.ctx, ppc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ppc) })

	web := makePod(h.ns, "web").image(imgAll).obj()
	web.Labels = map[string]string{"app": "web"}
	h.create(web)
	own := makePod(h.ns, "own").image(imgAll).obj()
	own.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 20, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{archIn("amd64")}}},
	}}}
	h.create(own)
	h.create(makePod(h.ns, "unknown").image(closedPortRegistry(t) + "/placement/gone:1").obj())

	pod := h.waitReleased("web")
	if got, want := pod.Annotations[placement.PreferredAffinitySourcesAnnotation],
		"arm64:40:PodPlacementConfig-tuning,amd64:25:PodPlacementConfig-tuning,ppc64le:30:ClusterPodPlacementConfig:skipped,amd64:20:ClusterPodPlacementConfig:skipped"; got != want {
		t.Errorf("web: sources %q, want %q", got, want)
	}
	if prefs := pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(prefs) != 2 {
		t.Errorf("web: preferred terms %+v, want the namespace config's two", prefs)
	}
	h.waitEvent("web", placement.EventPreferenceSkipped)
	// Its status counts the one pod it added a preference to ("own" had
	// every one skipped, "unknown" is not selected).
	if err := bed.WaitFor(h.ctx, k8s, client.ObjectKeyFromObject(ppc), ppc, func(c *multiarchv1beta1.PodPlacementConfig) bool {
		return c.Status.AppliedPods >= 1 && c.Status.LastAppliedTime != nil
	}); err != nil {
		t.Errorf("tuning: status.appliedPods never counted web: %v", err)
	}
	if arch := h.waitBound("web"); arch != "arm64" {
		t.Errorf("web: bound to %s, want the namespace config's favourite arm64", arch)
	}

	pod = h.waitReleased("own")
	if prefs := pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(prefs) != 1 || prefs[0].Weight != 20 {
		t.Errorf("own: preferred terms %+v, want only the pod's own amd64 weight 20", prefs)
	}
	if got, want := pod.Annotations[placement.PreferredAffinitySourcesAnnotation],
		"ppc64le:30:ClusterPodPlacementConfig:skipped,amd64:20:ClusterPodPlacementConfig:skipped"; got != want {
		t.Errorf("own: sources %q, want %q", got, want)
	}
	h.expectLabels(pod, map[string]string{placement.PreferredNodeAffinityLabel: placement.LabelValueNotSet})
	if arch := h.waitBound("own"); arch != "amd64" {
		t.Errorf("own: bound to %s, want the pod's own preference amd64", arch)
	}

	pod = h.waitReleased("unknown")
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(ppc), ppc); err != nil || ppc.Status.AppliedPods != 1 {
		t.Errorf("tuning: status.appliedPods %d (%v), want 1", ppc.Status.AppliedPods, err)
	}
	h.expectLabels(pod, map[string]string{placement.ImageInspectionErrorLabel: "", placement.PreferredNodeAffinityLabel: placement.LabelValueSet})
	if prefs := pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(prefs) != 2 || prefs[0].Weight != 30 {
		t.Errorf("unknown: preferred terms %+v, want the configured ppc64le 30 and amd64 20", prefs)
	}
	if arch := h.waitBound("unknown"); arch != "ppc64le" {
		t.Errorf("unknown: bound to %s, want the preferred ppc64le", arch)
	}
}
