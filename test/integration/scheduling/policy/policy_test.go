package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/test/bed"
)

var (
	tolDedicated = corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}
	tolSpot      = corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
)

// TestPolicyMergedIntoStoredPod: a namespaced policy's criteria end up in
// the pod the apiserver stores, by kupid's rules.
func TestPolicyMergedIntoStoredPod(t *testing.T) {
	ns := newNamespace(t, nil)
	createPolicy(t, nsPolicy(ns, "etcd", 0, matchLabels("app", "etcd"), kupidv1alpha1.SchedulingCriteria{
		NodeSelector:  map[string]string{"pool": "etcd", "disk": "ssd"},
		SchedulerName: "etcd-scheduler",
		Tolerations:   []corev1.Toleration{tolDedicated, tolSpot},
		Affinity: &corev1.Affinity{
			NodeAffinity: requiredAffinity(term(in("zone", "a")), term(in("zone", "b"))).NodeAffinity,
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: matchLabels("app", "etcd"), TopologyKey: corev1.LabelHostname,
			}}},
		},
	}))

	pod := makePod(ns, "etcd-0").label("app", "etcd").nodeSelector("disk", "hdd").
		requiredTerms(term(in("gen", "2")), term(in("gen", "3"))).obj()
	pod.Spec.Tolerations = []corev1.Toleration{tolSpot}
	got := createPod(t, pod)

	if diff := cmp.Diff(map[string]string{"pool": "etcd", "disk": "hdd"}, got.Spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector: the pod's key wins, the policy adds the rest (-want +got):\n%s", diff)
	}
	if got.Spec.SchedulerName != "etcd-scheduler" {
		t.Errorf("schedulerName = %q, want the policy's in place of the default", got.Spec.SchedulerName)
	}
	// The apiserver's DefaultTolerationSeconds plugin adds its own
	// tolerations too; the policy's are appended once each.
	for _, tol := range []corev1.Toleration{tolSpot, tolDedicated} {
		if n := countEqual(got.Spec.Tolerations, tol); n != 1 {
			t.Errorf("toleration %s appears %d times in %+v, want once", tol.Key, n, got.Spec.Tolerations)
		}
	}
	wantTerms := []corev1.NodeSelectorTerm{
		term(in("gen", "2"), in("zone", "a")), term(in("gen", "2"), in("zone", "b")),
		term(in("gen", "3"), in("zone", "a")), term(in("gen", "3"), in("zone", "b")),
	}
	if diff := cmp.Diff(wantTerms, got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms); diff != "" {
		t.Errorf("required terms: pod terms x policy terms (-want +got):\n%s", diff)
	}
	if aa := got.Spec.Affinity.PodAntiAffinity; aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("pod anti-affinity = %+v, want the policy's term", aa)
	}
	if a := got.Annotations[policy.AppliedPoliciesAnnotation]; a != "PodSchedulingPolicy/"+ns+"/etcd" {
		t.Errorf("annotation %s = %q", policy.AppliedPoliciesAnnotation, a)
	}

	// A pod the policy does not select is stored as it was sent.
	other := createPod(t, makePod(ns, "web-0").label("app", "web").obj())
	if other.Spec.NodeSelector != nil || other.Spec.Affinity != nil || other.Spec.SchedulerName != corev1.DefaultSchedulerName {
		t.Errorf("an unselected pod was changed: %+v", other.Spec)
	}
	if _, ok := other.Annotations[policy.AppliedPoliciesAnnotation]; ok {
		t.Errorf("an unselected pod got the annotation")
	}
}

// TestSchedulerPlacesPodWherePolicySays: a cluster policy pins a
// namespace's pods to the tainted control-plane node by node affinity and a
// toleration; the real scheduler binds the pod there, which it would never
// do for the pod as it was sent.
func TestSchedulerPlacesPodWherePolicySays(t *testing.T) {
	ns := newNamespace(t, nil)
	createPolicy(t, clusterPolicy("to-control-plane-"+ns, 0, inNamespace(ns), &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{
		Affinity:    requiredAffinity(term(in(corev1.LabelHostname, "control-plane-1"))),
		Tolerations: []corev1.Toleration{{Key: bed.ControlPlaneLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}))
	createPod(t, makePod(ns, "p").obj())
	node, err := testBed.WaitPodBound(context.Background(), ns, "p")
	if err != nil {
		t.Fatal(err)
	}
	if node != "control-plane-1" {
		t.Fatalf("pod bound to %s, want control-plane-1 (the policy's node)", node)
	}

	// The same with a nodeSelector on the architecture: bound to the
	// only s390x node.
	ns2 := newNamespace(t, nil)
	createPolicy(t, nsPolicy(ns2, "s390x", 0, &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{corev1.LabelArchStable: "s390x"},
	}))
	createPod(t, makePod(ns2, "p").obj())
	if node, err = testBed.WaitPodBound(context.Background(), ns2, "p"); err != nil {
		t.Fatal(err)
	}
	if node != "node-s390x-1" {
		t.Fatalf("pod bound to %s, want node-s390x-1", node)
	}
}

// TestMergeOrder: priority first, then namespaced before cluster, then
// name; the first applied wins single values; the pod wins over all.
func TestMergeOrder(t *testing.T) {
	ns := newNamespace(t, nil)
	everything := &metav1.LabelSelector{}
	createPolicy(t, nsPolicy(ns, "low", 1, everything, kupidv1alpha1.SchedulingCriteria{
		SchedulerName: "from-low", NodeSelector: map[string]string{"pool": "low", "low": "yes"},
	}))
	createPolicy(t, nsPolicy(ns, "high", 50, everything, kupidv1alpha1.SchedulingCriteria{
		SchedulerName: "from-high", NodeSelector: map[string]string{"pool": "high"},
	}))
	createPolicy(t, clusterPolicy("b-equal-"+ns, 50, inNamespace(ns), everything, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"tier": "cluster"},
	}))
	createPolicy(t, nsPolicy(ns, "a-equal", 50, everything, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"tier": "namespaced"},
	}))

	got := createPod(t, makePod(ns, "p").obj())
	if got.Spec.SchedulerName != "from-high" {
		t.Errorf("schedulerName = %q, want from-high (higher priority applied first)", got.Spec.SchedulerName)
	}
	want := map[string]string{"pool": "high", "low": "yes", "tier": "namespaced"}
	if diff := cmp.Diff(want, got.Spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	wantOrder := strings.Join([]string{
		"PodSchedulingPolicy/" + ns + "/a-equal", "PodSchedulingPolicy/" + ns + "/high",
		"ClusterPodSchedulingPolicy/b-equal-" + ns, "PodSchedulingPolicy/" + ns + "/low",
	}, ",")
	if a := got.Annotations[policy.AppliedPoliciesAnnotation]; a != wantOrder {
		t.Errorf("merge order = %q, want %q", a, wantOrder)
	}

	// The pod's own values win over every policy.
	own := makePod(ns, "own").nodeSelector("pool", "mine").obj()
	own.Spec.SchedulerName = "my-scheduler"
	got = createPod(t, own)
	if got.Spec.SchedulerName != "my-scheduler" || got.Spec.NodeSelector["pool"] != "mine" {
		t.Errorf("the pod's values were overridden: schedulerName %q, nodeSelector %v", got.Spec.SchedulerName, got.Spec.NodeSelector)
	}
}

// TestSelectors: a nil selector selects nothing, an empty one everything.
func TestSelectors(t *testing.T) {
	ns := newNamespace(t, map[string]string{"team": "a"})
	createPolicy(t, clusterPolicy("nil-pods-"+ns, 0, inNamespace(ns), nil, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"nil-pods": "applied"},
	}))
	createPolicy(t, clusterPolicy("nil-namespaces-"+ns, 0, nil, &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"nil-namespaces": "applied"},
	}))
	createPolicy(t, nsPolicy(ns, "nil", 0, nil, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"nil": "applied"},
	}))
	createPolicy(t, nsPolicy(ns, "empty", 0, &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"empty": "applied"},
	}))
	createPolicy(t, clusterPolicy("team-a-"+ns, 0, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}},
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{ns}},
	}}, &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"team-a": "applied"},
	}))
	// The webhook's answer is part of the create: the stored pod is final.
	got := createPod(t, makePod(ns, "p").obj())
	want := map[string]string{"empty": "applied", "team-a": "applied"}
	if diff := cmp.Diff(want, got.Spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
}

func countEqual(tols []corev1.Toleration, want corev1.Toleration) int {
	n := 0
	for _, t := range tols {
		if t.MatchToleration(&want) && t.Value == want.Value && t.TolerationSeconds == nil {
			n++
		}
	}
	return n
}
