package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// TestNamespaceSelector: only pods of selected namespaces are gated; the
// selector is synced into the webhook configuration so the apiserver does
// not even call the webhook for the others.
func TestNamespaceSelector(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"placement.archway.dev/test": "on"}},
	})
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: placement.WebhookConfigurationName}, mwc); err != nil {
		t.Fatal(err)
	}
	sel := mwc.Webhooks[0].NamespaceSelector
	if sel == nil || sel.MatchLabels["placement.archway.dev/test"] != "on" || len(sel.MatchExpressions) != 1 ||
		fmt.Sprint(sel.MatchExpressions[0].Values) != "[archway-system kube-node-lease kube-public kube-system]" {
		t.Errorf("webhook namespaceSelector %+v: want the config's selector and the reserved namespaces excluded", sel)
	}

	on := newHarness(t, "selected", map[string]string{"placement.archway.dev/test": "on"})
	off := newHarness(t, "unselected", nil)
	placed := on.create(makePod(on.ns, "placed").image(imgAMD64Only).obj())
	if !gated(placed) {
		t.Error("a pod in a selected namespace was not gated")
	}
	ignored := off.create(makePod(off.ns, "ignored").image(imgAMD64Only).obj())
	if gated(ignored) || ignored.Labels[placement.SchedulingGateLabel] != "" {
		t.Errorf("a pod in an unselected namespace was gated: %v %v", ignored.Spec.SchedulingGates, ignored.Labels)
	}
	if arch := on.waitBound("placed"); arch != "amd64" {
		t.Errorf("placed: bound to %s, want amd64", arch)
	}
	off.waitBound("ignored")
}

// TestNodeAffinityScoring: preferred weights for the architectures a pod
// can run on steer the scheduler among them.
func TestNodeAffinityScoring(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: &multiarchv1beta1.Plugins{
		NodeAffinityScoring: &multiarchv1beta1.NodeAffinityScoring{Enabled: true, Platforms: []multiarchv1beta1.NodeAffinityScoringPlatformTerm{
			{Architecture: "s390x", Weight: 100}, {Architecture: "amd64", Weight: 1}, {Architecture: "ppc64le", Weight: 50},
		}},
	}})
	h := newHarness(t, "scoring", nil)
	h.create(makePod(h.ns, "prefers-s390x").image(imgAll).obj())
	h.create(makePod(h.ns, "prefers-ppc64le").image(imgAll).requiredTerms(
		corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{hostnameIn("node-amd64-1", "node-ppc64le-1", "node-arm64-1")}},
	).obj())
	pod := h.waitReleased("prefers-s390x")
	h.expectLabels(pod, map[string]string{placement.PreferredNodeAffinityLabel: "set"})
	prefs := pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(prefs) != 3 || prefs[0].Weight != 100 || prefs[0].Preference.MatchExpressions[0].Values[0] != "s390x" {
		t.Errorf("preferred terms %+v", prefs)
	}
	if arch := h.waitBound("prefers-s390x"); arch != "s390x" {
		t.Errorf("bound to %s, want the preferred s390x", arch)
	}
	if arch := h.waitBound("prefers-ppc64le"); arch != "ppc64le" {
		t.Errorf("bound to %s, want ppc64le (s390x is ruled out by the user's hostnames)", arch)
	}
}

// TestConfigDeletionReleasesGatedPods: deleting the config releases every
// gated pod before the config goes, and the webhook stops gating.
func TestConfigDeletionReleasesGatedPods(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "deletion", nil)
	// Inspections of this registry hang: the pods stay gated.
	image := blackholeRegistry(t) + "/placement/hangs:1"
	const n = 20
	misses := map[string]string{"cache": "tag", "result": "miss"}
	before, err := gatherCounter("archway_placement_image_cache_lookups_total", misses)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		h.create(makePod(h.ns, fmt.Sprintf("held-%d", i)).image(image).obj())
	}
	// Each pod's reconcile looks its image's tag up in the cache (a miss,
	// as the one inspection hangs) and waits: once there are n more
	// misses, the controller has handled every pod and held it.
	err = wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(context.Context) (bool, error) {
		now, err := gatherCounter("archway_placement_image_cache_lookups_total", misses)
		return now-before >= n, err
	})
	if err != nil {
		t.Fatalf("the controller did not look up the images of the %d pods: %v", n, err)
	}
	var pods corev1.PodList
	if err := k8s.List(h.ctx, &pods, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !gated(&p) {
			t.Fatalf("pod %s is not gated before the deletion", p.Name)
		}
	}
	start := time.Now()
	if err := deleteConfig(h.ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("config deleted and %d gated pods released in %v", n, time.Since(start))
	if err := k8s.List(h.ctx, &pods, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if gated(&p) || p.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelRemoved {
			t.Errorf("pod %s still gated after the config is gone: %v %v", p.Name, p.Spec.SchedulingGates, p.Labels)
		}
	}
	note := h.waitEvent("held-0", placement.EventSchedGateRemovalSuccess)
	if !strings.Contains(note, "deleted") {
		t.Errorf("event note %q does not say why", note)
	}
	for i := range n {
		h.waitBound(fmt.Sprintf("held-%d", i))
	}
	// No config: new pods are not gated.
	after := h.create(makePod(h.ns, "after").image(imgAMD64Only).obj())
	if gated(after) {
		t.Error("a pod was gated after the config was deleted")
	}
}
