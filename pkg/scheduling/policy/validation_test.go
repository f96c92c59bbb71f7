package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

func TestValidateCriteria(t *testing.T) {
	cases := []struct {
		name string
		c    kupidv1alpha1.SchedulingCriteria
		// want is a substring of the error; empty means valid.
		want string
	}{
		{name: "empty is valid"},
		{name: "everything valid", c: kupidv1alpha1.SchedulingCriteria{
			NodeSelector: map[string]string{"pool": "etcd"}, NodeName: "node-1", SchedulerName: "s",
			Tolerations: []corev1.Toleration{tolEtcd, tolSpot, {Operator: corev1.TolerationOpExists}},
			Affinity: &corev1.Affinity{
				NodeAffinity: required(term(zoneA, req("gen", corev1.NodeSelectorOpGt, "3"))).NodeAffinity,
				PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{podTerm("etcd", corev1.LabelHostname)},
				},
			},
		}},
		{name: "bad nodeSelector value", c: kupidv1alpha1.SchedulingCriteria{NodeSelector: map[string]string{"pool": "a b"}}, want: "spec.nodeSelector[pool]"},
		{name: "bad nodeName", c: kupidv1alpha1.SchedulingCriteria{NodeName: "Node_1"}, want: "spec.nodeName"},
		{name: "In without values", c: kupidv1alpha1.SchedulingCriteria{Affinity: required(term(req("pool", corev1.NodeSelectorOpIn)))},
			want: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value: operator In needs at least one value"},
		{name: "Exists with values", c: kupidv1alpha1.SchedulingCriteria{Affinity: required(term(req("pool", corev1.NodeSelectorOpExists, "x")))}, want: "takes no values"},
		{name: "Gt not an integer", c: kupidv1alpha1.SchedulingCriteria{Affinity: required(term(req("gen", corev1.NodeSelectorOpGt, "x")))}, want: "must be an integer"},
		{name: "unknown operator", c: kupidv1alpha1.SchedulingCriteria{Affinity: required(term(req("gen", "Near", "x")))}, want: `Unsupported value: "Near"`},
		{name: "no required terms", c: kupidv1alpha1.SchedulingCriteria{Affinity: required()}, want: "at least one node selector term"},
		{name: "matchFields on a label", c: kupidv1alpha1.SchedulingCriteria{Affinity: required(corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{req("pool", corev1.NodeSelectorOpIn, "a")},
		})}, want: "matchFields[0].key"},
		{name: "preferred weight out of range", c: kupidv1alpha1.SchedulingCriteria{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0, Preference: term(zoneA)}},
		}}}, want: "must be from 1 to 100"},
		{name: "pod affinity without topologyKey", c: kupidv1alpha1.SchedulingCriteria{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{podTerm("db", "")},
		}}}, want: "topologyKey: Required value"},
		{name: "pod affinity with matchLabelKeys", c: kupidv1alpha1.SchedulingCriteria{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{}, MatchLabelKeys: []string{"app"}}},
		}}}, want: "matchLabelKeys: Forbidden"},
		{name: "toleration Exists with a value", c: kupidv1alpha1.SchedulingCriteria{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}}, want: "value must be empty"},
		{name: "toleration without key must be Exists", c: kupidv1alpha1.SchedulingCriteria{Tolerations: []corev1.Toleration{{Value: "v"}}}, want: "operator must be Exists when key is empty"},
		{name: "toleration bad effect", c: kupidv1alpha1.SchedulingCriteria{Tolerations: []corev1.Toleration{{Key: "k", Effect: "Never"}}}, want: "tolerations[0].effect"},
		{name: "tolerationSeconds without NoExecute", c: kupidv1alpha1.SchedulingCriteria{Tolerations: []corev1.Toleration{{Key: "k", TolerationSeconds: new(int64)}}}, want: "effect must be NoExecute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &kupidv1alpha1.PodSchedulingPolicy{Spec: kupidv1alpha1.PodSchedulingPolicySpec{SchedulingCriteria: tc.c}}
			err := ValidatePodSchedulingPolicy(p).ToAggregate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want an error with %q, got none", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}

func TestValidateSelectors(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
	p := &kupidv1alpha1.ClusterPodSchedulingPolicy{Spec: kupidv1alpha1.ClusterPodSchedulingPolicySpec{NamespaceSelector: bad, PodSelector: &metav1.LabelSelector{}}}
	err := ValidateClusterPodSchedulingPolicy(p).ToAggregate()
	if err == nil || !strings.Contains(err.Error(), "spec.namespaceSelector.matchExpressions[0].values") {
		t.Fatalf("want an error on spec.namespaceSelector.matchExpressions[0].values, got %v", err)
	}
}
