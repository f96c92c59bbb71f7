package placement

import (
	"strings"
	"testing"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// TestMTOLabels: the labels and annotations of the multiarch tuning
// operator, with its values, read from the stored pods: from admission
// (gated or not-set, node-affinity and preferred-node-affinity not-set) to
// release (removed, set, single-arch or multi-arch and one label per
// architecture, or the inspection error with its count and message).
func TestMTOLabels(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoringFor("ppc64le", 10)})
	h := newHarness(t, "labels", nil)

	multi := h.create(makePod(h.ns, "multi").image(imgARM64S390X).obj())
	h.expectLabels(multi, map[string]string{
		placement.SchedulingGateLabel: "gated", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "not-set",
	})
	h.create(makePod(h.ns, "single").image(imgPPC64LE).obj())
	pinned := h.create(makePod(h.ns, "pinned").image(imgAll).nodeSelector("kubernetes.io/arch", "amd64").obj())
	if gated(pinned) {
		t.Fatal("a pod pinning kubernetes.io/arch was gated")
	}
	h.expectLabels(pinned, map[string]string{
		placement.SchedulingGateLabel: "not-set", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "not-set",
	})
	h.create(makePod(h.ns, "broken").image(closedPortRegistry(t) + "/placement/gone:1").obj())

	pod := h.waitReleased("multi")
	h.expectLabels(pod, map[string]string{
		placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.PreferredNodeAffinityLabel: "not-set",
		placement.MultiArchLabel: "", placement.ArchLabelFor("arm64"): "", placement.ArchLabelFor("s390x"): "",
	})
	h.expectNoLabels(pod, placement.SingleArchLabel, placement.ArchLabelFor("amd64"), placement.ImageInspectionErrorLabel, placement.ImageInspectionErrorCountLabel)

	pod = h.waitReleased("single")
	h.expectLabels(pod, map[string]string{
		placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.PreferredNodeAffinityLabel: "set",
		placement.SingleArchLabel: "", placement.ArchLabelFor("ppc64le"): "",
	})
	h.expectNoLabels(pod, placement.MultiArchLabel)

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
