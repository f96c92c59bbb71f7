package placement

import (
	"context"
	"strings"
	"testing"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// TestPermanentAnswersReleaseAtOnce: the bed's real registries answering
// for good (a tag that does not exist, the htpasswd registry asked without
// credentials, a reference that does not parse) release the pod after one
// inspection, labelled and with the error in an event; a closed port is
// transient and keeps the retries (3 tries in this suite).
func TestPermanentAnswersReleaseAtOnce(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "answers", nil)
	cases := []struct {
		pod, image, note, count string
	}{
		{pod: "missing-tag", image: testBed.Registry.Host + "/placement/all:no-such-tag", note: "manifest unknown", count: "1"},
		{pod: "no-credentials", image: imgPrivate, note: "authentication required", count: "1"},
		{pod: "closed-port", image: closedPortRegistry(t) + "/placement/gone:1", note: "connection refused", count: "3"},
	}
	for _, c := range cases {
		h.create(makePod(h.ns, c.pod).image(c.image).obj())
	}
	for _, c := range cases {
		pod := h.waitReleased(c.pod)
		h.expectLabels(pod, map[string]string{
			placement.ImageInspectionErrorLabel: "", placement.ImageInspectionErrorCountLabel: c.count, placement.NodeAffinityLabel: "not-set",
		})
		note := h.waitEvent(c.pod, placement.EventInspectionError)
		lower := strings.ToLower(note)
		if !strings.Contains(lower, c.note) && (c.pod != "no-credentials" || !strings.Contains(lower, "unauthorized")) {
			t.Errorf("%s: event note %q does not carry the registry's answer %q", c.pod, note, c.note)
		}
	}
}

// TestOperatorBundleDoesNotConstrain: an image whose config carries
// operators.operatorframework.io.* labels (an operator bundle, arm64 only
// here), or an index whose first image's does (arm64 and s390x), does not
// narrow a pod's architectures, as the multiarch tuning operator ignores
// bundles: beside an amd64 image the pod goes to amd64, and alone it is
// released with no required term.
func TestOperatorBundleDoesNotConstrain(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	bundles := newPusher(testBed.Registry)
	bundles.labels = map[string]string{"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1"}
	bundle, err := bundles.pushSingle(context.Background(), "placement/bundle", "1", platform{"linux", "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	bundleIndex, err := bundles.pushIndex(context.Background(), "placement/bundle-index", "1", linux("arm64", "s390x")...)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "bundle", nil)
	h.create(makePod(h.ns, "unpack").initImage(bundle).image(imgAMD64Only).obj())
	h.create(makePod(h.ns, "alone").image(bundle).obj())
	h.create(makePod(h.ns, "unpack-index").initImage(bundleIndex).image(imgAMD64Only).obj())
	pod := h.waitReleased("unpack-index")
	h.expectLabels(pod, map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("amd64"): "", placement.NodeAffinityLabel: "set"})
	if t.Failed() {
		t.FailNow() // placed nowhere: it would never be bound
	}
	if arch := h.waitBound("unpack-index"); arch != "amd64" {
		t.Errorf("unpack-index: bound to %s, want amd64 (the bundle index does not rule it out)", arch)
	}
	pod = h.waitReleased("unpack")
	h.expectLabels(pod, map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("amd64"): "", placement.NodeAffinityLabel: "set"})
	if arch := h.waitBound("unpack"); arch != "amd64" {
		t.Errorf("unpack: bound to %s, want amd64 (the bundle does not rule it out)", arch)
	}
	pod = h.waitReleased("alone")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: "not-set"})
	if pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil && pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		t.Errorf("alone: a required term for a bundle-only pod: %+v", pod.Spec.Affinity.NodeAffinity)
	}
}
