package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func fieldTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: reqs}
}

func nameIn(nodes ...string) corev1.NodeSelectorRequirement {
	return req(nodeNameField, corev1.NodeSelectorOpIn, nodes...)
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func podTerm(app, topology string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		TopologyKey:   topology,
	}
}

var (
	zoneA   = req("zone", corev1.NodeSelectorOpIn, "a")
	zoneB   = req("zone", corev1.NodeSelectorOpIn, "b")
	poolEtc = req("pool", corev1.NodeSelectorOpIn, "etcd")
	poolGen = req("pool", corev1.NodeSelectorOpIn, "general")
	ssd     = req("disk", corev1.NodeSelectorOpExists)
	tolEtcd = corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}
	tolSpot = corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}
	// As the DefaultTolerationSeconds admission plugin adds them.
	notReady    = corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	unreachable = corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
)

// pol makes a namespaced policy named name with priority prio.
func pol(name string, prio int32, c kupidv1alpha1.SchedulingCriteria) Policy {
	return Policy{Kind: KindPodSchedulingPolicy, Namespace: "ns", Name: name, Priority: prio, Criteria: c}
}

// cpol makes a cluster policy.
func cpol(name string, prio int32, c kupidv1alpha1.SchedulingCriteria) Policy {
	return Policy{Kind: KindClusterPodSchedulingPolicy, Name: name, Priority: prio, Criteria: c}
}

func TestMerge(t *testing.T) {
	cases := []struct {
		name     string
		pod      corev1.PodSpec
		policies []Policy
		want     corev1.PodSpec
		// changed and kept per policy, in merge order (names).
		order   []string
		changed []bool
		kept    [][]string
	}{
		{
			name:     "no policy leaves the pod alone",
			pod:      corev1.PodSpec{NodeSelector: map[string]string{"a": "1"}},
			policies: nil,
			want:     corev1.PodSpec{NodeSelector: map[string]string{"a": "1"}},
		},
		{
			name: "nodeSelector: policy adds missing keys, the pod's existing key wins",
			pod:  corev1.PodSpec{NodeSelector: map[string]string{"pool": "mine"}},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{
				NodeSelector: map[string]string{"pool": "etcd", "zone": "a"},
			})},
			want:    corev1.PodSpec{NodeSelector: map[string]string{"pool": "mine", "zone": "a"}},
			order:   []string{"p"},
			changed: []bool{true},
			kept:    [][]string{{"nodeSelector[pool]"}},
		},
		{
			name:     "nodeName: required as the node's name in a new term when the pod has none",
			pod:      corev1.PodSpec{},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want:     corev1.PodSpec{Affinity: required(fieldTerm(nameIn("node-1")))},
			order:    []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name:     "nodeName: added to every term the pod has",
			pod:      corev1.PodSpec{Affinity: required(term(zoneA), term(zoneB))},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want: corev1.PodSpec{Affinity: required(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneA}, MatchFields: []corev1.NodeSelectorRequirement{nameIn("node-1")}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneB}, MatchFields: []corev1.NodeSelectorRequirement{nameIn("node-1")}},
			)},
			order: []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name:     "nodeName: a gated pod is pinned the same way (the apiserver refuses spec.nodeName on it)",
			pod:      corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}}},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want:     corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}}, Affinity: required(fieldTerm(nameIn("node-1")))},
			order:    []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name:     "nodeName: the pod's own spec.nodeName wins",
			pod:      corev1.PodSpec{NodeName: "mine"},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want:     corev1.PodSpec{NodeName: "mine"},
			order:    []string{"p"}, changed: []bool{false}, kept: [][]string{{"nodeName"}},
		},
		{
			name:     "nodeName: the pod's own spec.nodeName, the same, needs nothing",
			pod:      corev1.PodSpec{NodeName: "node-1"},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want:     corev1.PodSpec{NodeName: "node-1"},
			order:    []string{"p"}, changed: []bool{false}, kept: [][]string{nil},
		},
		{
			name:     "nodeName: a DaemonSet pod's term for another node wins",
			pod:      corev1.PodSpec{Affinity: required(fieldTerm(nameIn("node-2")))},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want:     corev1.PodSpec{Affinity: required(fieldTerm(nameIn("node-2")))},
			order:    []string{"p"}, changed: []bool{false}, kept: [][]string{{"nodeName"}},
		},
		{
			name:     "nodeName: a term excluding the node wins",
			pod:      corev1.PodSpec{Affinity: required(term(zoneA), fieldTerm(req(nodeNameField, corev1.NodeSelectorOpNotIn, "node-1")))},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want:     corev1.PodSpec{Affinity: required(term(zoneA), fieldTerm(req(nodeNameField, corev1.NodeSelectorOpNotIn, "node-1")))},
			order:    []string{"p"}, changed: []bool{false}, kept: [][]string{{"nodeName"}},
		},
		{
			name:     "nodeName: a term naming the node and others is narrowed to it",
			pod:      corev1.PodSpec{Affinity: required(fieldTerm(nameIn("node-1", "node-2")))},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{NodeName: "node-1"})},
			want:     corev1.PodSpec{Affinity: required(fieldTerm(nameIn("node-1", "node-2"), nameIn("node-1")))},
			order:    []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name: "nodeName and required terms of one policy: every term names the node",
			pod:  corev1.PodSpec{},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{
				NodeName: "node-1", Affinity: required(term(zoneA), term(zoneB)),
			})},
			want: corev1.PodSpec{Affinity: required(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneA}, MatchFields: []corev1.NodeSelectorRequirement{nameIn("node-1")}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneB}, MatchFields: []corev1.NodeSelectorRequirement{nameIn("node-1")}},
			)},
			order: []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name:     "schedulerName: replaces the default the apiserver filled in",
			pod:      corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{SchedulerName: "bin-packer"})},
			want:     corev1.PodSpec{SchedulerName: "bin-packer"},
			order:    []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name:     "schedulerName: the pod's own scheduler wins",
			pod:      corev1.PodSpec{SchedulerName: "mine"},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{SchedulerName: "bin-packer"})},
			want:     corev1.PodSpec{SchedulerName: "mine"},
			order:    []string{"p"}, changed: []bool{false}, kept: [][]string{{"schedulerName"}},
		},
		{
			name: "tolerations: appended, exact duplicates skipped",
			pod:  corev1.PodSpec{Tolerations: []corev1.Toleration{tolEtcd}},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{
				Tolerations: []corev1.Toleration{tolEtcd, tolSpot, tolSpot},
			})},
			want:  corev1.PodSpec{Tolerations: []corev1.Toleration{tolEtcd, tolSpot}},
			order: []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name: "tolerations: before the apiserver's default ones, as in a pod of a merged template",
			pod:  corev1.PodSpec{Tolerations: []corev1.Toleration{tolEtcd, notReady, unreachable}},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{
				Tolerations: []corev1.Toleration{tolSpot, tolEtcd, unreachable},
			})},
			want:  corev1.PodSpec{Tolerations: []corev1.Toleration{tolEtcd, tolSpot, notReady, unreachable}},
			order: []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name:     "tolerations: nothing new, the default ones stay last",
			pod:      corev1.PodSpec{Tolerations: []corev1.Toleration{tolSpot, notReady, unreachable}},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{Tolerations: []corev1.Toleration{tolSpot}})},
			want:     corev1.PodSpec{Tolerations: []corev1.Toleration{tolSpot, notReady, unreachable}},
			order:    []string{"p"}, changed: []bool{false}, kept: [][]string{nil},
		},
		{
			name:     "required node affinity: a pod without terms takes the policy's",
			pod:      corev1.PodSpec{},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{Affinity: required(term(poolEtc), term(poolGen))})},
			want:     corev1.PodSpec{Affinity: required(term(poolEtc), term(poolGen))},
			order:    []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name:     "required node affinity: pod terms x policy terms, pod terms outermost",
			pod:      corev1.PodSpec{Affinity: required(term(zoneA), term(zoneB, ssd))},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{Affinity: required(term(poolEtc), term(poolGen))})},
			want: corev1.PodSpec{Affinity: required(
				term(zoneA, poolEtc), term(zoneA, poolGen),
				term(zoneB, ssd, poolEtc), term(zoneB, ssd, poolGen),
			)},
			order: []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name: "required node affinity: a requirement in both is not repeated, matchFields join too",
			pod:  corev1.PodSpec{Affinity: required(term(zoneA, poolEtc))},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{Affinity: required(corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{poolEtc},
				MatchFields:      []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n1")},
			})})},
			want: corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{zoneA, poolEtc},
				MatchFields:      []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n1")},
			})},
			order: []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name: "required node affinity: a product term covered by a weaker one is dropped",
			// zoneA AND (zoneA OR poolEtc) = zoneA
			pod:      corev1.PodSpec{Affinity: required(term(zoneA))},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{Affinity: required(term(zoneA), term(poolEtc))})},
			want:     corev1.PodSpec{Affinity: required(term(zoneA))},
			order:    []string{"p"}, changed: []bool{false}, kept: [][]string{nil},
		},
		{
			name: "preferred node affinity and pod (anti-)affinity terms appended without exact duplicates",
			pod: corev1.PodSpec{Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 10, Preference: term(zoneA)},
				}},
				PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{podTerm("db", "zone")}},
			}},
			policies: []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 10, Preference: term(zoneA)}, {Weight: 20, Preference: term(ssd)},
				}},
				PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{podTerm("db", "zone"), podTerm("cache", "zone")},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: podTerm("web", "host")}},
				},
				PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{podTerm("etcd", corev1.LabelHostname)},
				},
			}})},
			want: corev1.PodSpec{Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 10, Preference: term(zoneA)}, {Weight: 20, Preference: term(ssd)},
				}},
				PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{podTerm("db", "zone"), podTerm("cache", "zone")},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: podTerm("web", "host")}},
				},
				PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{podTerm("etcd", corev1.LabelHostname)},
				},
			}},
			order: []string{"p"}, changed: []bool{true}, kept: [][]string{nil},
		},
		{
			name: "order: the higher priority is merged first and wins single values",
			pod:  corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName},
			policies: []Policy{
				pol("low", 1, kupidv1alpha1.SchedulingCriteria{NodeName: "n-low", SchedulerName: "s-low", NodeSelector: map[string]string{"pool": "low", "l": "1"}}),
				pol("high", 9, kupidv1alpha1.SchedulingCriteria{NodeName: "n-high", SchedulerName: "s-high", NodeSelector: map[string]string{"pool": "high"}}),
			},
			want:    corev1.PodSpec{Affinity: required(fieldTerm(nameIn("n-high"))), SchedulerName: "s-high", NodeSelector: map[string]string{"pool": "high", "l": "1"}},
			order:   []string{"high", "low"},
			changed: []bool{true, true},
			kept:    [][]string{nil, {"nodeSelector[pool]", "nodeName", "schedulerName"}},
		},
		{
			name: "order: at equal priority the namespaced policy before the cluster policy, then by name",
			pod:  corev1.PodSpec{},
			policies: []Policy{
				cpol("a-cluster", 5, kupidv1alpha1.SchedulingCriteria{NodeName: "from-cluster"}),
				pol("z-ns", 5, kupidv1alpha1.SchedulingCriteria{NodeName: "from-z"}),
				pol("b-ns", 5, kupidv1alpha1.SchedulingCriteria{NodeName: "from-b"}),
				cpol("urgent", 6, kupidv1alpha1.SchedulingCriteria{Tolerations: []corev1.Toleration{tolSpot}}),
			},
			want:    corev1.PodSpec{Affinity: required(fieldTerm(nameIn("from-b"))), Tolerations: []corev1.Toleration{tolSpot}},
			order:   []string{"urgent", "b-ns", "z-ns", "a-cluster"},
			changed: []bool{true, true, false, false},
			kept:    [][]string{nil, nil, {"nodeName"}, {"nodeName"}},
		},
		{
			name: "order: required terms of two policies multiply in merge order",
			pod:  corev1.PodSpec{},
			policies: []Policy{
				pol("second", 1, kupidv1alpha1.SchedulingCriteria{Affinity: required(term(zoneA), term(zoneB))}),
				pol("first", 2, kupidv1alpha1.SchedulingCriteria{Affinity: required(term(poolEtc))}),
			},
			want:    corev1.PodSpec{Affinity: required(term(poolEtc, zoneA), term(poolEtc, zoneB))},
			order:   []string{"first", "second"},
			changed: []bool{true, true},
			kept:    [][]string{nil, nil},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.pod.DeepCopy()
			got, outcomes := Merge(&tc.pod, tc.policies)
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("merged spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, &tc.pod); diff != "" {
				t.Errorf("Merge modified its input (-before +after):\n%s", diff)
			}
			var order []string
			var changed []bool
			var kept [][]string
			for _, o := range outcomes {
				order, changed, kept = append(order, o.Policy.Name), append(changed, o.Changed), append(kept, o.Kept)
			}
			if diff := cmp.Diff(tc.order, order); diff != "" {
				t.Errorf("merge order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.changed, changed); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.kept, kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			// The webhook may be invoked again on its own result
			// (reinvocationPolicy IfNeeded): nothing may change then.
			again, outcomes := Merge(got, tc.policies)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("merging again changed the pod (-first +second):\n%s", diff)
			}
			for _, o := range outcomes {
				if o.Changed {
					t.Errorf("merging again: %s reports a change", o.Policy.Ref())
				}
			}
		})
	}
}

func TestOrderIgnoresInputOrder(t *testing.T) {
	ps := []Policy{
		cpol("c", 0, kupidv1alpha1.SchedulingCriteria{}), pol("b", 0, kupidv1alpha1.SchedulingCriteria{}),
		pol("a", 3, kupidv1alpha1.SchedulingCriteria{}), cpol("a", 3, kupidv1alpha1.SchedulingCriteria{}),
		pol("a", 0, kupidv1alpha1.SchedulingCriteria{}),
	}
	want := []string{"PodSchedulingPolicy/ns/a", "ClusterPodSchedulingPolicy/a", "PodSchedulingPolicy/ns/a", "PodSchedulingPolicy/ns/b", "ClusterPodSchedulingPolicy/c"}
	for i := range ps {
		// Every rotation of the input sorts the same way.
		rotated := append(append([]Policy{}, ps[i:]...), ps[:i]...)
		Order(rotated)
		var got []string
		for _, p := range rotated {
			got = append(got, p.Ref())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rotation %d (-want +got):\n%s", i, diff)
		}
	}
}
