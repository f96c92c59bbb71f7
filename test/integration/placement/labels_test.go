package placement

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// TestMTOLabels: the labels and annotations of the multiarch tuning
// operator, with its values, read from the stored pods: from admission
// (gated or not-set, node-affinity and preferred-node-affinity not-set) to
// release (removed, set, single-arch or multi-arch and one label per
// architecture, or the inspection error with its count and message).
// preferred-node-affinity is set whenever a configured preference was
// added, whatever the images' architectures, also on a pod pinned by its
// nodeSelector, which is gated and scored.
func TestMTOLabels(t *testing.T) {
	anyNode := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "archway.test/absent", Operator: corev1.NodeSelectorOpDoesNotExist}}}
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoringFor("ppc64le", 10)})
	h := newHarness(t, "labels", nil)

	multi := h.create(makePod(h.ns, "multi").image(imgARM64S390X).obj())
	h.expectLabels(multi, map[string]string{
		placement.SchedulingGateLabel: "gated", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "not-set",
	})
	h.create(makePod(h.ns, "single").image(imgPPC64LE).obj())
	// Pinned by its nodeSelector, the pod is still gated and scored, as
	// the multiarch tuning operator does: no required term is added.
	pinned := h.create(makePod(h.ns, "pinned").image(imgAll).nodeSelector("kubernetes.io/arch", "amd64").obj())
	if !gated(pinned) {
		t.Error("a pod pinning kubernetes.io/arch was not gated though the config scores it")
	}
	// An empty required term matches no node, and the apiserver refuses
	// additions to it on a gated pod: it is left alone, the pod's other
	// terms get the architectures.
	h.create(makePod(h.ns, "empty-term").image(imgARM64S390X).requiredTerms(corev1.NodeSelectorTerm{}).obj())
	h.create(makePod(h.ns, "empty-and-open").image(imgARM64S390X).requiredTerms(corev1.NodeSelectorTerm{}, anyNode).obj())
	h.create(makePod(h.ns, "broken").image(closedPortRegistry(t) + "/placement/gone:1").obj())

	pod := h.waitReleased("multi")
	h.expectLabels(pod, map[string]string{
		placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.PreferredNodeAffinityLabel: "set",
		placement.MultiArchLabel: "", placement.ArchLabelFor("arm64"): "", placement.ArchLabelFor("s390x"): "",
	})
	h.expectNoLabels(pod, placement.SingleArchLabel, placement.ArchLabelFor("amd64"), placement.ImageInspectionErrorLabel, placement.ImageInspectionErrorCountLabel)

	pod = h.waitReleased("single")
	h.expectLabels(pod, map[string]string{
		placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.PreferredNodeAffinityLabel: "set",
		placement.SingleArchLabel: "", placement.ArchLabelFor("ppc64le"): "",
	})
	h.expectNoLabels(pod, placement.MultiArchLabel)

	pod = h.waitReleased("pinned")
	h.expectLabels(pod, map[string]string{
		placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "set",
	})
	if a := pod.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil ||
		len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("pinned: affinity %+v, want the one configured preferred term and no required one", a)
	}
	if arch := h.waitBound("pinned"); arch != "amd64" {
		t.Errorf("pinned: bound to %s, want its nodeSelector's amd64", arch)
	}

	pod = h.waitReleased("empty-term")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "set"})
	if note := h.waitEvent("empty-term", placement.EventPredicatesConflict); !strings.Contains(note, "empty term matches no node") {
		t.Errorf("empty-term: event %q, want it to say the empty term matches no node", note)
	}
	if got := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(got) != 1 || len(got[0].MatchExpressions) != 0 {
		t.Errorf("empty-term: required terms %+v, want the pod's one empty term", got)
	}
	h.waitUnschedulable("empty-term")

	pod = h.waitReleased("empty-and-open")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: "set", placement.PreferredNodeAffinityLabel: "set"})
	want := []corev1.NodeSelectorTerm{{}, {MatchExpressions: append(slices.Clone(anyNode.MatchExpressions), archIn("arm64", "s390x"))}}
	if got := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("empty-and-open: required terms %+v, want %+v", got, want)
	}
	if arch := h.waitBound("empty-and-open"); arch != "arm64" && arch != "s390x" {
		t.Errorf("empty-and-open: bound to %s, want arm64 or s390x", arch)
	}

	pod = h.waitReleased("broken")
	h.expectLabels(pod, map[string]string{
		placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "set",
		placement.ImageInspectionErrorLabel: "", placement.ImageInspectionErrorCountLabel: "3",
	})
	msg := pod.Annotations[placement.ImageInspectionErrorAnnotation]
	if msg == "" || len(msg) > 256 || !strings.Contains(msg, "placement/gone:1") {
		t.Errorf("image-inspect-error annotation %q: want the last error, at most 256 characters", msg)
	}
	h.expectNoLabels(pod, placement.SingleArchLabel, placement.MultiArchLabel)
}
