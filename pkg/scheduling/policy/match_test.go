package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

func TestSelect(t *testing.T) {
	everything := &metav1.LabelSelector{}
	app := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": v}}
	}
	ns := func(name string, sel *metav1.LabelSelector) kupidv1alpha1.PodSchedulingPolicy {
		return kupidv1alpha1.PodSchedulingPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec:       kupidv1alpha1.PodSchedulingPolicySpec{PodSelector: sel},
		}
	}
	cluster := func(name string, nsSel, podSel *metav1.LabelSelector) kupidv1alpha1.ClusterPodSchedulingPolicy {
		return kupidv1alpha1.ClusterPodSchedulingPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       kupidv1alpha1.ClusterPodSchedulingPolicySpec{NamespaceSelector: nsSel, PodSelector: podSel},
		}
	}
	badSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	c := Candidates{
		Namespaced: []kupidv1alpha1.PodSchedulingPolicy{
			ns("nil-selector", nil),
			ns("empty-selector", everything),
			ns("etcd", app("etcd")),
			ns("web", app("web")),
			ns("broken", badSel),
		},
		Cluster: []kupidv1alpha1.ClusterPodSchedulingPolicy{
			cluster("nil-namespaces", nil, everything),
			cluster("nil-pods", everything, nil),
			cluster("all", everything, everything),
			cluster("team-a-etcd", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}, app("etcd")),
			cluster("team-b", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}, everything),
		},
	}
	s := Select(c, labels.Set{"app": "etcd"}, labels.Set{"team": "a"})
	var got []string
	for _, p := range s.Selected {
		got = append(got, p.Ref())
	}
	want := []string{
		"PodSchedulingPolicy/team-a/empty-selector", "PodSchedulingPolicy/team-a/etcd",
		"ClusterPodSchedulingPolicy/all", "ClusterPodSchedulingPolicy/team-a-etcd",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selected (-want +got):\n%s", diff)
	}
	if _, ok := s.Invalid["PodSchedulingPolicy/team-a/broken"]; !ok || len(s.Invalid) != 1 {
		t.Errorf("invalid = %v, want only the broken policy", s.Invalid)
	}
}
