package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// TestPlacesPodsByImageArchitectures: pods land only on nodes of the
// architectures all their images have, with nobody writing affinity.
func TestPlacesPodsByImageArchitectures(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "places", nil)
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantArchs []string
		labels    map[string]string
	}{
		{
			name: "amd64-only", pod: makePod(h.ns, "amd64-only").image(imgAMD64Only).obj(), wantArchs: []string{"amd64"},
			labels: map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("amd64"): "", placement.NodeAffinityLabel: "set"},
		},
		{
			name: "arm64-s390x", pod: makePod(h.ns, "arm64-s390x").image(imgARM64S390X).obj(), wantArchs: []string{"arm64", "s390x"},
			labels: map[string]string{placement.MultiArchLabel: "", placement.NodeAffinityLabel: "set"},
		},
		{
			name: "all four with an arm64+s390x sidecar", pod: makePod(h.ns, "sidecar").image(imgAll, imgARM64S390X).obj(), wantArchs: []string{"arm64", "s390x"},
			labels: map[string]string{placement.MultiArchLabel: ""},
		},
		{
			name: "windows amd64 entry does not count for a linux pod", pod: makePod(h.ns, "win").image(imgWinARM64).obj(), wantArchs: []string{"arm64"},
			labels: map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("arm64"): ""},
		},
		{
			name: "ppc64le single image", pod: makePod(h.ns, "ppc").image(imgPPC64LE).obj(), wantArchs: []string{"ppc64le"},
			labels: map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("ppc64le"): ""},
		},
		{
			// arm (arm/v7) is a kubernetes.io/arch value too; the bed has no
			// such node.
			name: "the bed's busybox base image (five platforms)", pod: makePod(h.ns, "busybox").image(testBed.BaseImage).obj(),
			wantArchs: []string{"amd64", "arm", "arm64", "ppc64le", "s390x"},
			labels:    map[string]string{placement.MultiArchLabel: ""},
		},
	}
	for _, tt := range tests {
		h.create(tt.pod)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{t: t, ctx: h.ctx, ns: h.ns}
			pod := h.waitReleased(tt.pod.Name)
			h.expectLabels(pod, tt.labels)
			terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || strings.Join(terms[0].MatchExpressions[0].Values, ",") != strings.Join(tt.wantArchs, ",") {
				t.Errorf("required terms %+v, want kubernetes.io/arch In %v", terms, tt.wantArchs)
			}
			arch := h.waitBound(tt.pod.Name)
			if !contains(tt.wantArchs, arch) {
				t.Errorf("bound to a %s node, want one of %v", arch, tt.wantArchs)
			}
			h.waitEvent(tt.pod.Name, placement.EventSchedGateAdded)
			note := h.waitEvent(tt.pod.Name, placement.EventPredicateSet)
			if !strings.Contains(note, strings.Join(tt.wantArchs, " ")) {
				t.Errorf("event note %q does not name %v", note, tt.wantArchs)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestNoCommonArchitecture: a pod whose app image is arm64+s390x and whose
// init container is amd64-only can run nowhere; it stays Pending with a
// reason a person can read.
func TestNoCommonArchitecture(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "nocommon", nil)
	h.create(makePod(h.ns, "nowhere").initImage(imgAMD64Only).image(imgARM64S390X).obj())
	pod := h.waitReleased("nowhere")
	h.expectLabels(pod, map[string]string{placement.NoSupportedArchLabel: "", placement.NodeAffinityLabel: "set"})
	h.expectNoLabels(pod, placement.SingleArchLabel, placement.MultiArchLabel)
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != placement.NoSupportedArchKey || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpExists {
		t.Errorf("required terms %+v, want %s Exists", terms, placement.NoSupportedArchKey)
	}
	msg := h.waitUnschedulable("nowhere")
	if !strings.Contains(msg, "affinity") {
		t.Errorf("scheduler message %q does not point at the node affinity", msg)
	}
	note := h.waitEvent("nowhere", placement.EventNoSupportedArchitectures)
	for _, want := range []string{imgAMD64Only + " [amd64]", imgARM64S390X + " [arm64 s390x]"} {
		if !strings.Contains(note, want) {
			t.Errorf("event note %q does not say %q", note, want)
		}
	}
	if got := h.events("nowhere"); strings.Join(got, ",") != placement.EventSchedGateAdded+","+placement.EventNoSupportedArchitectures {
		t.Errorf("events %v, want exactly one gate-added and one no-supported-arch", got)
	}
	if pod.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", pod.Status.Phase)
	}
}

// TestUserAffinityKeptAndNarrowed: the user's terms stay; the architecture
// is ANDed into each term that does not constrain it, and a term that does
// is the user's choice.
func TestUserAffinityKeptAndNarrowed(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "narrow", nil)
	// The user allows the amd64 and arm64 nodes; the image has arm64 and
	// s390x: only node-arm64-1 fits both.
	h.create(makePod(h.ns, "narrowed").image(imgARM64S390X).
		requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{hostnameIn("node-amd64-1", "node-arm64-1")}}).obj())
	// Two alternatives: one the user pinned to ppc64le (kept as it is),
	// one by hostname that the image rules out (amd64): ppc64le it is.
	h.create(makePod(h.ns, "user-arch-term").image(imgARM64S390X).requiredTerms(
		corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{archIn("ppc64le")}},
		corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{hostnameIn("node-amd64-1")}},
	).obj())
	// matchFields term: the expression goes beside the field.
	h.create(makePod(h.ns, "fields").image(imgAll).requiredTerms(corev1.NodeSelectorTerm{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-s390x-1"}}},
	}).obj())
	// nodeSelector on another key stays and is ANDed by the scheduler.
	h.create(makePod(h.ns, "selector").image(imgAll).nodeSelector(corev1.LabelHostname, "node-ppc64le-1").obj())

	pod := h.waitReleased("narrowed")
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 2 || terms[0].MatchExpressions[0].Key != corev1.LabelHostname {
		t.Errorf("terms %+v: want the hostname expression kept and the arch expression appended", terms)
	}
	if arch := h.waitBound("narrowed"); arch != "arm64" {
		t.Errorf("narrowed: bound to %s, want arm64", arch)
	}

	pod = h.waitReleased("user-arch-term")
	terms = pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms[0].MatchExpressions) != 1 || len(terms[1].MatchExpressions) != 2 {
		t.Errorf("terms %+v: want the user's arch term unchanged and the hostname term narrowed", terms)
	}
	if arch := h.waitBound("user-arch-term"); arch != "ppc64le" {
		t.Errorf("user-arch-term: bound to %s, want ppc64le", arch)
	}

	pod = h.waitReleased("fields")
	terms = pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 || len(terms[0].MatchExpressions) != 1 {
		t.Errorf("terms %+v: want the field kept and an arch expression added", terms)
	}
	if arch := h.waitBound("fields"); arch != "s390x" {
		t.Errorf("fields: bound to %s, want s390x", arch)
	}

	pod = h.waitReleased("selector")
	if pod.Spec.NodeSelector[corev1.LabelHostname] != "node-ppc64le-1" {
		t.Errorf("nodeSelector changed: %v", pod.Spec.NodeSelector)
	}
	if arch := h.waitBound("selector"); arch != "ppc64le" {
		t.Errorf("selector: bound to %s, want ppc64le", arch)
	}
}

// TestPinnedPodsAndReservedNamespacesAreNotGated: pods that already pin
// kubernetes.io/arch, pods with nodeName, and pods in reserved namespaces
// are admitted untouched.
func TestPinnedPodsAndReservedNamespacesAreNotGated(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "pinned", nil)
	pinned := h.create(makePod(h.ns, "pinned").image(imgAMD64Only).nodeSelector(corev1.LabelArchStable, "s390x").obj())
	if gated(pinned) || pinned.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelNotSet {
		t.Errorf("a pod pinning kubernetes.io/arch was gated (or not labelled scheduling-gate=not-set): gates %v labels %v", pinned.Spec.SchedulingGates, pinned.Labels)
	}
	if arch := h.waitBound("pinned"); arch != "s390x" {
		t.Errorf("pinned: bound to %s, want s390x (what the user asked, even if the image disagrees)", arch)
	}
	named := makePod(h.ns, "named").image(imgAMD64Only).obj()
	named.Spec.NodeName = "node-arm64-1"
	if named = h.create(named); gated(named) {
		t.Error("a pod with nodeName was gated")
	}
	for _, ns := range []string{"kube-public", "openshift-placement-test", "hypershift-placement-test"} {
		if ns != "kube-public" {
			_ = k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1ObjectMeta(ns)})
		}
		p := makePod(ns, "reserved-"+h.ns).image(imgAMD64Only).obj()
		if err := k8s.Create(h.ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(h.ctx, p) })
		if gated(p) {
			t.Errorf("a pod in %s was gated", ns)
		}
	}
	// A plain pod in the same namespace is gated, so the webhook is live.
	plain := h.create(makePod(h.ns, "plain").image(imgAMD64Only).obj())
	if !gated(plain) || plain.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelGated {
		t.Errorf("a plain pod was not gated: %v %v", plain.Spec.SchedulingGates, plain.Labels)
	}
}

// TestPodsThatNeedNoPlacement: a pod gated by others whose every required
// term already constrains kubernetes.io/arch is released as it is (the
// webhook would not have gated it); a gated pod that comes to pin
// kubernetes.io/arch in its nodeSelector while gated is released as it is.
func TestPodsThatNeedNoPlacement(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "noplacement", nil)
	h.create(makePod(h.ns, "user-arch").image(imgAll).requiredTerms(
		corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{archIn("s390x")}},
	).withGate().obj())
	pod := h.waitReleased("user-arch")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: placement.LabelValueNotSet})
	h.waitEvent("user-arch", placement.EventPredicatesConflict)
	if arch := h.waitBound("user-arch"); arch != "s390x" {
		t.Errorf("user-arch: bound to %s, want s390x", arch)
	}

	// Inspections of this registry hang (5 s in this suite), so the pod
	// is still gated when the user pins it to arm64 (KEP-3838 allows adding
	// a nodeSelector key to a gated pod).
	h.create(makePod(h.ns, "pinned-later").image(blackholeRegistry(t) + "/placement/hangs:1").obj())
	pinned := &corev1.Pod{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "pinned-later"}, pinned); err != nil {
		t.Fatal(err)
	}
	pinned.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
	if err := k8s.Update(h.ctx, pinned); err != nil {
		t.Fatal(err)
	}
	pod = h.waitReleased("pinned-later")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: placement.LabelValueNotSet})
	h.waitEvent("pinned-later", placement.EventGatedPodIgnored)
	if arch := h.waitBound("pinned-later"); arch != "arm64" {
		t.Errorf("pinned-later: bound to %s, want arm64", arch)
	}
}
