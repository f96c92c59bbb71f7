package policy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	placementconfig "github.com/archway-build/archway/pkg/placement/config"
	"github.com/archway-build/archway/pkg/placement/podcontroller"
	"github.com/archway-build/archway/test/bed"
)

// TestPolicyThenPlacement: a pod gets a policy's required terms at
// admission and is gated by placement (webhooks run in name order,
// archway-pod-placement before archway-scheduling-policy); the placement
// controller then appends its kubernetes.io/arch requirement to each of
// the policy's terms, and the scheduler binds the pod to a node both
// allow.
func TestPolicyThenPlacement(t *testing.T) {
	ctx := context.Background()
	ns := startPlacement(t, "scheduling-policy-suite/placement")
	terms := []corev1.NodeSelectorTerm{
		term(in(corev1.LabelHostname, "node-arm64-1", "node-ppc64le-1")),
		term(in(corev1.LabelHostname, "node-s390x-1")),
	}
	createPolicy(t, nsPolicy(ns, "hosts", 0, &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{
		Affinity: requiredAffinity(terms...),
	}))
	waitGating(t, ns)
	// A single-architecture image would make the placement controller
	// choose; the bed's base image runs everywhere, so every term gets the
	// same arch requirement and the policy's hosts decide.
	stored := createPod(t, makePod(ns, "p").image(testBed.BaseImage).obj())
	if !slices.ContainsFunc(stored.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate }) {
		t.Fatalf("the pod was not gated by placement: %+v", stored.Spec.SchedulingGates)
	}
	if diff := cmp.Diff(terms, stored.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms); diff != "" {
		t.Fatalf("terms at admission (-want +got):\n%s", diff)
	}

	released := &corev1.Pod{}
	if err := bed.WaitFor(ctx, k8s, client.ObjectKeyFromObject(stored), released, func(p *corev1.Pod) bool {
		return len(p.Spec.SchedulingGates) == 0
	}); err != nil {
		t.Fatal(err)
	}
	got := released.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(got) != len(terms) {
		t.Fatalf("terms after placement = %+v, want the policy's %d terms", got, len(terms))
	}
	for i, gt := range got {
		n := len(terms[i].MatchExpressions)
		if diff := cmp.Diff(terms[i].MatchExpressions, gt.MatchExpressions[:min(n, len(gt.MatchExpressions))]); diff != "" {
			t.Errorf("term %d does not start with the policy's expressions (-want +got):\n%s", i, diff)
		}
		if len(gt.MatchExpressions) != n+1 || gt.MatchExpressions[n].Key != corev1.LabelArchStable || gt.MatchExpressions[n].Operator != corev1.NodeSelectorOpIn {
			t.Errorf("term %d = %+v, want the policy's expressions and then one kubernetes.io/arch In requirement", i, gt.MatchExpressions)
		}
	}
	node, err := testBed.WaitPodBound(ctx, ns, "p")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains([]string{"node-arm64-1", "node-ppc64le-1", "node-s390x-1"}, node) {
		t.Fatalf("pod bound to %s, not one of the policy's hosts", node)
	}
}

// startPlacement runs placement for the test: its controllers, and a
// ClusterPodPlacementConfig that selects the namespaces labelled label,
// deleted at the end; it returns such a namespace.
func startPlacement(t *testing.T, label string) string {
	t.Helper()
	ctx := context.Background()
	startPlacementController(t)
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName},
		Spec:       multiarchv1beta1.ClusterPodPlacementConfigSpec{NamespaceSelector: matchLabels(label, "true")},
	}
	if err := k8s.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, cfg)
		_ = bed.WaitGone(ctx, k8s, client.ObjectKeyFromObject(cfg), &multiarchv1beta1.ClusterPodPlacementConfig{})
	})
	waitCached(t, cfg)
	return newNamespace(t, map[string]string{label: "true"})
}

// waitGating waits until the gate webhook gates pods of ns (a dry-run
// create comes back gated): it has seen the config and the placement
// controller's heartbeat, without which it gates nothing.
func waitGating(t *testing.T, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		p := makePod(ns, "probe").image(testBed.BaseImage).obj()
		if err := k8s.Create(ctx, p, client.DryRunAll); err != nil {
			return false, nil
		}
		return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate }), nil
	})
	if err != nil {
		t.Fatalf("the gate webhook never gated a pod of %s (it gates only while it sees a placement controller's heartbeat): %v", ns, err)
	}
}

// startPlacementController runs the placement controllers in a manager
// of their own until the test ends (after the test's other cleanups).

func startPlacementController(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(testBed.Config, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "scheduling-policy-suite-placement",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// No standby in this suite: a stop releases what is gated after a
	// short wait for one.
	opts := placementOptions()
	opts.HandoverTimeout = time.Second
	pods, err := podcontroller.Setup(mgr, opts, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	controller, err := placementconfig.Setup(mgr, opts, pods)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("placement manager: %v", err)
		}
		if err := controller.Finish(context.Background()); err != nil {
			t.Errorf("placement controller: %v", err)
		}
	})
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("the placement manager stopped: %v", err)
	case <-time.After(bed.DefaultTimeout):
		t.Fatal(fmt.Errorf("the placement manager was not elected in time"))
	}
}
