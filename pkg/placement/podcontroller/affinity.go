package podcontroller

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/archway-build/archway/pkg/placement"
)

// The merge below follows what the apiserver allows on a gated pod
// (KEP-3838): required node affinity may be set where there was none, and
// a matchExpression may be appended to an existing term; adding a term or
// changing existing expressions is rejected. Preferred terms may change.
// Node selector terms are ORed and the expressions of a term ANDed, so
// appending the requirement to every term restricts each alternative.

// archRequirement is kubernetes.io/arch In archs (sorted).
func archRequirement(archs sets.Set[string]) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: placement.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: sets.List(archs)}
}

// noSupportedArchRequirement matches no node: the pod stays Pending and
// says why.
func noSupportedArchRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: placement.NoSupportedArchKey, Operator: corev1.NodeSelectorOpExists}
}

// constrainsArch reports whether a term already has a say on
// kubernetes.io/arch, in which case the user's choice stands.
func constrainsArch(term corev1.NodeSelectorTerm) bool {
	return slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
		return r.Key == placement.ArchLabel
	})
}

// emptyTerm reports whether a term has neither expressions nor fields. The
// API defines such a term to match no node, and on a gated pod the
// apiserver refuses any addition to it (only a term that already holds a
// requirement may grow), so it is left as the pod states it.
func emptyTerm(term corev1.NodeSelectorTerm) bool {
	return len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0
}

// HasEmptyTerm reports whether one of the pod's required terms is empty.
func HasEmptyTerm(pod *corev1.Pod) bool {
	return slices.ContainsFunc(requiredTerms(pod), emptyTerm)
}

// requiredTerms returns the pod's required node selector terms, if any.
func requiredTerms(pod *corev1.Pod) []corev1.NodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// AllTermsConstrainArch reports whether the pod has required terms and
// every one of them already constrains kubernetes.io/arch: there is
// nothing left for the controller to require.
func AllTermsConstrainArch(pod *corev1.Pod) bool {
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

// PinsArch reports whether the pod's nodeSelector names an architecture.
func PinsArch(pod *corev1.Pod) bool {
	_, ok := pod.Spec.NodeSelector[placement.ArchLabel]
	return ok
}

// withRequirement returns affinity with req appended to every required
// term that does not constrain kubernetes.io/arch and is not empty, or
// with a required affinity of the single term {req} when the pod has none.
// It reports whether anything changed. affinity is not modified.
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
		if constrainsArch(*term) || emptyTerm(*term) || slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == req.Key && r.Operator == req.Operator && slices.Equal(r.Values, req.Values)
		}) {
			continue
		}
		term.MatchExpressions = append(term.MatchExpressions, req)
		changed = true
	}
	return out, changed
}

// sourceEntry is one configured preference as the pod's
// preferred-affinity-sources annotation records it.
type sourceEntry struct {
	preference
	// skipped says why it was not applied; empty when it was.
	skipped string
}

// String is arch:weight:source, with :skipped when it was not applied.
func (e sourceEntry) String() string {
	s := fmt.Sprintf("%s:%d:%s", e.Architecture, e.Weight, e.Source)
	if e.skipped != "" {
		s += ":skipped"
	}
	return s
}

// sourcesAnnotation is the value of PreferredAffinitySourcesAnnotation.
func sourcesAnnotation(entries []sourceEntry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.String()
	}
	return strings.Join(parts, ",")
}

// withPreferences returns affinity with one preferred term per configured
// architecture (pol.weights), weighted as configured, and the record of
// where each came from. As the multiarch tuning operator, every configured
// architecture is added, the images' or not: a preference for one the
// required term rules out changes nothing, and the pod says what the
// configuration asked (preferred-node-affinity set). A pod that states its
// own kubernetes.io/arch preference gets none: every configured weight is
// recorded as skipped, as are the weights PolicyFor set aside. It reports
// whether anything was added. affinity is not modified.
func withPreferences(affinity *corev1.Affinity, pol policy, own bool) (*corev1.Affinity, bool, []sourceEntry) {
	var entries []sourceEntry
	out := affinity.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	added := false
	for _, w := range pol.Weights {
		if own {
			entries = append(entries, sourceEntry{preference: w, skipped: "the pod states its own " + placement.ArchLabel + " preference"})
			continue
		}
		entries = append(entries, sourceEntry{preference: w})
		out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{
				Weight: w.Weight,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: placement.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{w.Architecture}},
				}},
			})
		added = true
	}
	entries = append(entries, pol.shadowed...)
	if !added {
		return affinity, false, entries
	}
	return out, true, entries
}
