package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// The merge rules, kupid's, made idempotent so that the apiserver's
// reinvocation of the webhook (reinvocationPolicy IfNeeded) changes nothing
// the first invocation did:
//
//   - schedulerName and each nodeSelector key: a value already on the pod
//     (its own or an earlier policy's) stays; the policy's fills in only
//     what is unset. schedulerName counts as unset when it is
//     "default-scheduler", which the apiserver fills in before admission.
//   - nodeName (unlike kupid, which sets spec.nodeName): the pod is made to
//     require the node of that name, by the requirement metadata.name In
//     [nodeName] in every required node selector term (the one term, when
//     it has none), as the DaemonSet controller pins its pods. The pod then
//     still goes through the scheduler (its resources, taints, and the
//     control-plane protection's check of bindings) and through placement,
//     whose gate a pod with spec.nodeName could not have and whose
//     architecture requirement it appends to the same terms; and a policy
//     pins a workload's pods alike whether its template or the pods were
//     merged. A node already named stays: the pod's spec.nodeName, or a
//     metadata.name requirement of its terms that the node fails (its
//     own, a DaemonSet pod's, or an earlier policy's).
//   - tolerations, preferred node affinity terms and pod (anti-)affinity
//     terms (required and preferred): the policy's are appended, skipping
//     any exactly equal to one already there. Tolerations go before the
//     two the apiserver's DefaultTolerationSeconds plugin adds to a pod
//     before webhooks run, where they stand in a pod made from a merged
//     template: a pod comes out the same whether its template was merged.
//   - required node affinity: node selector terms are ORed and the
//     requirements of a term ANDed, so the policy's terms restrict the
//     pod's by the cartesian product: every pod term ANDed with every
//     policy term (the pod term's requirements, then the policy term's not
//     already in it). A pod with no required terms takes the policy's.
//     Terms a weaker term of the result already covers (a superset of
//     another term's requirements) are dropped: the OR is unchanged, and
//     merging the same policy again yields the same terms.

// Outcome is what merging one policy did to the pod.
type Outcome struct {
	// Policy is the policy merged.
	Policy Policy
	// Changed is true when the policy added anything to the pod.
	Changed bool
	// Kept lists the fields where the policy's value was not applied
	// because the pod (or a policy merged earlier) already had another:
	// "nodeSelector[key]" (by key), "nodeName", "schedulerName", in that
	// order.
	Kept []string
}

// Merge returns spec with every policy merged into it, in the order Order
// sorts them, and what each policy did, in that order. Neither spec nor
// policies is modified.
func Merge(spec *corev1.PodSpec, policies []Policy) (*corev1.PodSpec, []Outcome) {
	out := spec.DeepCopy()
	ordered := slices.Clone(policies)
	Order(ordered)
	outcomes := make([]Outcome, 0, len(ordered))
	for _, p := range ordered {
		o := Outcome{Policy: p}
		before := out.DeepCopy()
		o.Kept = mergeCriteria(out, &p.Criteria)
		o.Changed = !equality.Semantic.DeepEqual(before, out)
		outcomes = append(outcomes, o)
	}
	return out, outcomes
}

// mergeCriteria merges c into spec and returns the fields it left as
// they were because spec already had a value.
func mergeCriteria(spec *corev1.PodSpec, c *kupidv1alpha1.SchedulingCriteria) []string {
	var kept []string
	keys := make([]string, 0, len(c.NodeSelector))
	for k := range c.NodeSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := spec.NodeSelector[k]; ok {
			if v != c.NodeSelector[k] {
				kept = append(kept, "nodeSelector["+k+"]")
			}
			continue
		}
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[k] = c.NodeSelector[k]
	}
	if c.NodeName != "" && !requireNode(spec, c.NodeName) {
		kept = append(kept, "nodeName")
	}
	if c.SchedulerName != "" && c.SchedulerName != spec.SchedulerName {
		if spec.SchedulerName == "" || spec.SchedulerName == corev1.DefaultSchedulerName {
			spec.SchedulerName = c.SchedulerName
		} else {
			kept = append(kept, "schedulerName")
		}
	}
	spec.Tolerations = mergeTolerations(spec.Tolerations, c.Tolerations)
	if c.Affinity != nil {
		spec.Affinity = mergeAffinity(spec.Affinity, c.Affinity)
	}
	return kept
}

// nodeNameField is the node field a node selector term can name a node by.
const nodeNameField = "metadata.name"

// requireNode makes spec require the node named name (see the merge rules)
// and reports whether it could: false, with spec unchanged, when spec
// already names another node.
func requireNode(spec *corev1.PodSpec, name string) bool {
	if spec.NodeName != "" {
		return spec.NodeName == name
	}
	var terms []corev1.NodeSelectorTerm
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	for _, t := range terms {
		for _, r := range t.MatchFields {
			if r.Key != nodeNameField {
				continue
			}
			named := slices.Contains(r.Values, name)
			if (r.Operator == corev1.NodeSelectorOpIn && !named) || (r.Operator == corev1.NodeSelectorOpNotIn && named) {
				return false
			}
		}
	}
	pin := corev1.NodeSelectorRequirement{Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{name}}
	if len(terms) == 0 {
		spec.Affinity = mergeAffinity(spec.Affinity, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{pin},
			}}},
		}})
		return true
	}
	for i := range terms {
		terms[i].MatchFields = appendMissing(terms[i].MatchFields, []corev1.NodeSelectorRequirement{pin})
	}
	return true
}

// mergeAffinity returns pod merged with policy; pod may be nil and is
// modified in place otherwise.
func mergeAffinity(pod, policy *corev1.Affinity) *corev1.Affinity {
	if pod == nil {
		pod = &corev1.Affinity{}
	}
	if na := policy.NodeAffinity; na != nil {
		if pod.NodeAffinity == nil {
			pod.NodeAffinity = &corev1.NodeAffinity{}
		}
		pna := pod.NodeAffinity
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil && len(req.NodeSelectorTerms) > 0 {
			if pna.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(pna.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
				pna.RequiredDuringSchedulingIgnoredDuringExecution = req.DeepCopy()
			} else {
				pna.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms =
					productTerms(pna.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, req.NodeSelectorTerms)
			}
		}
		pna.PreferredDuringSchedulingIgnoredDuringExecution = appendMissing(
			pna.PreferredDuringSchedulingIgnoredDuringExecution, na.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := policy.PodAffinity; pa != nil {
		if pod.PodAffinity == nil {
			pod.PodAffinity = &corev1.PodAffinity{}
		}
		pod.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = appendMissing(
			pod.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pa.RequiredDuringSchedulingIgnoredDuringExecution)
		pod.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = appendMissing(
			pod.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if paa := policy.PodAntiAffinity; paa != nil {
		if pod.PodAntiAffinity == nil {
			pod.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		pod.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = appendMissing(
			pod.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, paa.RequiredDuringSchedulingIgnoredDuringExecution)
		pod.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = appendMissing(
			pod.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, paa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return pod
}

// mergeTolerations appends the policy's tolerations to the pod's, before
// the trailing ones the apiserver's DefaultTolerationSeconds plugin adds
// (NoExecute tolerations of the not-ready and unreachable taints, for a
// number of seconds), skipping exact duplicates.
func mergeTolerations(pod, policy []corev1.Toleration) []corev1.Toleration {
	end := len(pod)
	for end > 0 && isDefaultToleration(pod[end-1]) {
		end--
	}
	if end == len(pod) {
		return appendMissing(pod, policy)
	}
	merged := appendMissing(slices.Clone(pod[:end]), slices.DeleteFunc(slices.Clone(policy), func(t corev1.Toleration) bool {
		return containsEqual(pod[end:], t)
	}))
	if len(merged) == end {
		return pod
	}
	return append(merged, pod[end:]...)
}

// isDefaultToleration reports whether t is one the DefaultTolerationSeconds
// admission plugin adds.
func isDefaultToleration(t corev1.Toleration) bool {
	return (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) &&
		t.Operator == corev1.TolerationOpExists && t.Effect == corev1.TaintEffectNoExecute && t.TolerationSeconds != nil
}

// productTerms ANDs every pod term with every policy term, pod terms
// outermost, and drops the terms another term of the result covers.
func productTerms(pod, policy []corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	out := make([]corev1.NodeSelectorTerm, 0, len(pod)*len(policy))
	for _, p := range pod {
		for _, q := range policy {
			t := *p.DeepCopy()
			t.MatchExpressions = appendMissing(t.MatchExpressions, q.MatchExpressions)
			t.MatchFields = appendMissing(t.MatchFields, q.MatchFields)
			out = append(out, t)
		}
	}
	return dropCovered(out)
}

// dropCovered removes each term whose requirements include all of another
// term's (an exact duplicate of an earlier term, or a strict superset of
// any term): a node matching it matches the other term too, so the OR of
// the terms stays the same.
func dropCovered(terms []corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	var out []corev1.NodeSelectorTerm
	for i, t := range terms {
		covered := false
		for j, o := range terms {
			if i == j || !includes(t, o) {
				continue
			}
			// o's requirements are all in t. Drop t when o is strictly
			// weaker, or when they are equal and o comes first.
			if !includes(o, t) || j < i {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, t)
		}
	}
	return out
}

// includes reports whether every requirement of o is in t.
func includes(t, o corev1.NodeSelectorTerm) bool {
	return containsAll(t.MatchExpressions, o.MatchExpressions) && containsAll(t.MatchFields, o.MatchFields)
}

func containsAll[T any](have, want []T) bool {
	for _, w := range want {
		if !containsEqual(have, w) {
			return false
		}
	}
	return true
}

func containsEqual[T any](have []T, w T) bool {
	return slices.ContainsFunc(have, func(h T) bool { return equality.Semantic.DeepEqual(h, w) })
}

// appendMissing appends to have a copy of each element of add that is not
// exactly equal to one already there; it returns have itself when nothing
// is added.
func appendMissing[T any, PT interface {
	*T
	DeepCopy() *T
}](have, add []T) []T {
	for i := range add {
		if !containsEqual(have, add[i]) {
			have = append(have, *PT(&add[i]).DeepCopy())
		}
	}
	return have
}
