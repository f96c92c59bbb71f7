package config

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/archway-build/archway/pkg/placement"
)

// alwaysExcludedNamespaces are the reserved namespaces a label selector can
// name exactly; the webhook itself also skips the kube-*, openshift-* and
// hypershift-* prefixes, which a selector cannot express.
var alwaysExcludedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// webhookNamespaceSelector is the namespaceSelector the gate webhook's
// registration should have: the config's selector, ANDed with the
// exclusion of the reserved namespaces and archway's own by name.
func webhookNamespaceSelector(configSelector *metav1.LabelSelector, ownNamespace string) *metav1.LabelSelector {
	out := configSelector.DeepCopy()
	if out == nil {
		out = &metav1.LabelSelector{}
	}
	excluded := slices.Clone(alwaysExcludedNamespaces)
	if ownNamespace != "" && !slices.Contains(excluded, ownNamespace) {
		excluded = append(excluded, ownNamespace)
	}
	slices.Sort(excluded)
	out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: excluded,
	})
	return out
}

// syncWebhookSelector sets the namespaceSelector of the webhook named
// WebhookName in cfg to selector. It reports whether the webhook was found
// and whether anything changed. cfg is modified in place.
func syncWebhookSelector(cfg *admissionregistrationv1.MutatingWebhookConfiguration, selector *metav1.LabelSelector) (found, changed bool) {
	for i := range cfg.Webhooks {
		wh := &cfg.Webhooks[i]
		if wh.Name != placement.WebhookName {
			continue
		}
		if equalSelectors(wh.NamespaceSelector, selector) {
			return true, false
		}
		wh.NamespaceSelector = selector.DeepCopy()
		return true, true
	}
	return false, false
}

// equalSelectors compares selectors as the apiserver stores them: an empty
// selector and a nil one are the same.
func equalSelectors(a, b *metav1.LabelSelector) bool {
	if a == nil {
		a = &metav1.LabelSelector{}
	}
	if b == nil {
		b = &metav1.LabelSelector{}
	}
	if len(a.MatchLabels) != len(b.MatchLabels) || len(a.MatchExpressions) != len(b.MatchExpressions) {
		return false
	}
	for k, v := range a.MatchLabels {
		if bv, ok := b.MatchLabels[k]; !ok || bv != v {
			return false
		}
	}
	for i := range a.MatchExpressions {
		x, y := a.MatchExpressions[i], b.MatchExpressions[i]
		if x.Key != y.Key || x.Operator != y.Operator || !slices.Equal(x.Values, y.Values) {
			return false
		}
	}
	return true
}
