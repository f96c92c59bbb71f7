package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// The merge below follows what the apiserver allows on a gated pod
// (KEP-3838): required node affinity may be set where there was none, and
// a matchExpression may be appended to an existing term; adding a term or
// changing existing expressions is rejected. Preferred terms may change.
// Node selector terms are ORed and the expressions of a term ANDed, so
// appending the requirement to every term restricts each alternative.

// archRequirement is kubernetes.io/arch In archs (sorted).
func archRequirement(archs sets.Set[string]) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: sets.List(archs)}
}

// noSupportedArchRequirement matches no node: the pod stays Pending and
// says why.
func noSupportedArchRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: NoSupportedArchKey, Operator: corev1.NodeSelectorOpExists}
}

// constrainsArch reports whether a term already has a say on
// kubernetes.io/arch, in which case the user's choice stands.
func constrainsArch(term corev1.NodeSelectorTerm) bool {
	return slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
		return r.Key == ArchLabel
	})
}

// requiredTerms returns the pod's required node selector terms, if any.
func requiredTerms(pod *corev1.Pod) []corev1.NodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// allTermsConstrainArch reports whether the pod has required terms and
// every one of them already constrains kubernetes.io/arch: there is
// nothing left for the controller to require.
func allTermsConstrainArch(pod *corev1.Pod) bool {
	terms := requiredTerms(pod)
	return len(terms) > 0 && !slices.ContainsFunc(terms, func(t corev1.NodeSelectorTerm) bool { return !constrainsArch(t) })
}

// hasArchPreference reports whether the pod states a preference of its own
// on kubernetes.io/arch: such a pod gets no configured preference.
func hasArchPreference(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return false
	}
	return slices.ContainsFunc(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, func(p corev1.PreferredSchedulingTerm) bool {
		return constrainsArch(p.Preference)
	})
}

// pinsArch reports whether the pod's nodeSelector names an architecture.
func pinsArch(pod *corev1.Pod) bool {
	_, ok := pod.Spec.NodeSelector[ArchLabel]
	return ok
}

// withRequirement returns affinity with req appended to every required
// term that does not constrain kubernetes.io/arch, or with a required
// affinity of the single term {req} when the pod has none. It reports
// whether anything changed. affinity is not modified.
func withRequirement(affinity *corev1.Affinity, req corev1.NodeSelectorRequirement) (*corev1.Affinity, bool) {
	out := affinity.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	required := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
		}
		return out, true
	}
	changed := false
	for i := range required.NodeSelectorTerms {
		term := &required.NodeSelectorTerms[i]
		if constrainsArch(*term) || slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == req.Key && r.Operator == req.Operator && slices.Equal(r.Values, req.Values)
		}) {
			continue
		}
		term.MatchExpressions = append(term.MatchExpressions, req)
		changed = true
	}
	return out, changed
}

// withPreferences returns affinity with one preferred term per configured
// architecture the pod can run on (archs), weighted as configured. An
// architecture the pod already prefers (a preferred term with
// kubernetes.io/arch In [..., arch, ...]) keeps the user's weight. It
// reports whether anything was added. affinity is not modified.
func withPreferences(affinity *corev1.Affinity, weights []multiarchv1beta1.NodeAffinityScoringPlatformTerm, archs sets.Set[string]) (*corev1.Affinity, bool) {
	out := affinity.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	preferred := sets.New[string]()
	for _, p := range out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		for _, r := range p.Preference.MatchExpressions {
			if r.Key == ArchLabel && r.Operator == corev1.NodeSelectorOpIn {
				preferred.Insert(r.Values...)
			}
		}
	}
	added := false
	for _, w := range weights {
		if !archs.Has(w.Architecture) || preferred.Has(w.Architecture) {
			continue
		}
		preferred.Insert(w.Architecture)
		out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{
				Weight: w.Weight,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{w.Architecture}},
				}},
			})
		added = true
	}
	if !added {
		return affinity, false
	}
	return out, true
}
