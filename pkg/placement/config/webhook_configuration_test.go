package config

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"

	"github.com/archway-build/archway/pkg/placement"
)

func TestWebhookNamespaceSelector(t *testing.T) {
	exclude := func(values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: values}
	}
	optOut := metav1.LabelSelectorRequirement{Key: placement.ExcludeNamespaceLabel, Operator: metav1.LabelSelectorOpDoesNotExist}
	tests := []struct {
		name string
		in   *metav1.LabelSelector
		own  string
		want *metav1.LabelSelector
	}{
		{name: "none", want: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{exclude("kube-node-lease", "kube-public", "kube-system")}}},
		{name: "own namespace", own: "archway-system", want: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{exclude("archway-system", "kube-node-lease", "kube-public", "kube-system")}}},
		{
			name: "user selector kept first", in: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{optOut}},
			want: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{optOut, exclude("kube-node-lease", "kube-public", "kube-system")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.in.DeepCopy()
			got := webhookNamespaceSelector(tt.in, tt.own)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.in); diff != "" {
				t.Errorf("input modified:\n%s", diff)
			}
		})
	}
}

func TestSyncWebhookSelector(t *testing.T) {
	sel := webhookNamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, "")
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{
		{Name: "other.example.com"}, {Name: placement.WebhookName},
	}}
	if found, changed := syncWebhookSelector(cfg, sel); !found || !changed {
		t.Fatalf("first sync: found=%v changed=%v", found, changed)
	}
	if cfg.Webhooks[0].NamespaceSelector != nil {
		t.Error("another webhook was changed")
	}
	if found, changed := syncWebhookSelector(cfg, sel.DeepCopy()); !found || changed {
		t.Errorf("second sync: found=%v changed=%v", found, changed)
	}
	if found, _ := syncWebhookSelector(&admissionregistrationv1.MutatingWebhookConfiguration{}, sel); found {
		t.Error("found a webhook in an empty configuration")
	}
	if !equalSelectors(nil, &metav1.LabelSelector{}) {
		t.Error("nil and empty selectors are equal")
	}
}

// TestShippedConfigOptOut: the ClusterPodPlacementConfig the install ships
// leaves alone the namespaces labelled with the multiarch tuning operator's
// opt-out label, and those with the label earlier archway manifests used.
func TestShippedConfigOptOut(t *testing.T) {
	data, err := os.ReadFile("../../../manifests/placement/cluster_pod_placement_config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(webhookNamespaceSelector(cfg.Spec.NamespaceSelector, "archway-system"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		gated  bool
	}{
		{name: "unlabelled", labels: map[string]string{"kubernetes.io/metadata.name": "team"}, gated: true},
		{name: "the operator's opt-out label", labels: map[string]string{"kubernetes.io/metadata.name": "team", placement.ExcludeNamespaceLabel: ""}},
		{name: "the deprecated opt-out label", labels: map[string]string{"kubernetes.io/metadata.name": "team", placement.DeprecatedExcludeNamespaceLabel: "true"}},
		{name: "archway's namespace", labels: map[string]string{"kubernetes.io/metadata.name": "archway-system"}},
	} {
		if got := sel.Matches(labels.Set(tt.labels)); got != tt.gated {
			t.Errorf("%s: gated = %v, want %v (selector %s)", tt.name, got, tt.gated, sel)
		}
	}
}
