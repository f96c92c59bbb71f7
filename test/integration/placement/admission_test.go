package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// TestDecidedAtAdmission: pods whose placement the pod alone decides are
// admitted ungated and schedule at once; the ones that only look alike are
// gated.
func TestDecidedAtAdmission(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "admission", nil)
	archTerm := func(arch string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{archIn(arch)}}
	}
	requiredArch := h.create(makePod(h.ns, "required-arch").image(imgAll).requiredTerms(archTerm("s390x"), archTerm("ppc64le")).obj())
	controlPlane := makePod(h.ns, "control-plane").image(imgAll).nodeSelector("node-role.kubernetes.io/control-plane", "").obj()
	controlPlane.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	h.create(controlPlane)
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: types.UID("00000000-0000-0000-0000-000000000001")}
	daemon := makePod(h.ns, "daemon").image(imgAMD64Only).obj()
	controller := owner
	controller.Controller = ptr.To(true)
	daemon.OwnerReferences = []metav1.OwnerReference{controller}
	h.create(daemon)
	lister := makePod(h.ns, "lists-a-daemonset").image(imgAMD64Only).obj()
	lister.OwnerReferences = []metav1.OwnerReference{owner}
	h.create(lister)

	for _, p := range []*corev1.Pod{requiredArch, controlPlane, daemon} {
		if gated(p) {
			t.Errorf("pod %s was gated: the pod alone decides its placement", p.Name)
		}
	}
	if !gated(lister) {
		t.Error("a pod that merely lists a DaemonSet among its owners was not gated")
	}
	if arch := h.waitBound("required-arch"); arch != "s390x" && arch != "ppc64le" {
		t.Errorf("required-arch: bound to %s", arch)
	}
	if node, err := testBed.WaitPodBound(h.ctx, h.ns, "control-plane"); err != nil || node != "control-plane-1" {
		t.Errorf("control-plane: bound to %q (%v), want control-plane-1", node, err)
	}
	if arch := h.waitBound("daemon"); arch == "" {
		t.Error("daemon: bound to a node without an architecture")
	}
	h.waitReleased("lists-a-daemonset")

	// A configured preference would add something: gated.
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoringFor("ppc64le", 50)})
	scored := h.create(makePod(h.ns, "required-arch-scored").image(imgAll).requiredTerms(archTerm("s390x"), archTerm("ppc64le")).obj())
	if !gated(scored) {
		t.Fatal("a pod a configured preference applies to was not gated")
	}
	pod := h.waitReleased("required-arch-scored")
	if prefs := pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(prefs) != 1 || prefs[0].Weight != 50 {
		t.Errorf("preferred terms %+v, want ppc64le weight 50", prefs)
	}
	if arch := h.waitBound("required-arch-scored"); arch != "ppc64le" {
		t.Errorf("required-arch-scored: bound to %s, want the preferred ppc64le", arch)
	}
}
