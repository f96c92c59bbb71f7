package controller

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

// UnfitNodeRequirement is the node selector requirement that keeps build
// pods off the nodes build.unfitNodes marks (DoesNotExist on the label,
// or NotIn its values), nil when it marks none.
func UnfitNodeRequirement(cfg *configv1alpha1.BuildControllerConfig) *corev1.NodeSelectorRequirement {
	u := cfg.UnfitNodes
	if u == nil || u.LabelKey == "" {
		return nil
	}
	if len(u.Values) == 0 {
		return &corev1.NodeSelectorRequirement{Key: u.LabelKey, Operator: corev1.NodeSelectorOpDoesNotExist}
	}
	return &corev1.NodeSelectorRequirement{Key: u.LabelKey, Operator: corev1.NodeSelectorOpNotIn, Values: slices.Clone(u.Values)}
}

// excludeUnfitNodes adds req to each required node affinity term of pod,
// or makes it the one term when there is none: terms are ORed, so a term
// without it would let the pod onto an unfit node.
func excludeUnfitNodes(pod *corev1.Pod, req *corev1.NodeSelectorRequirement) {
	if req == nil {
		return
	}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		if !hasRequirement(terms[i], req) {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, *req.DeepCopy())
		}
	}
}

func hasRequirement(t corev1.NodeSelectorTerm, req *corev1.NodeSelectorRequirement) bool {
	return slices.ContainsFunc(t.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
		return equality.Semantic.DeepEqual(r, *req)
	})
}

// unfitNodesEscape says how a pod as admission left it could run on a node
// req excludes ("" when it cannot): bound to a node already, or a
// required node affinity term without req. Admission (a scheduling policy
// merged by a webhook, any other mutating webhook) runs after
// build-controller made the pod, so what it left is checked.
func unfitNodesEscape(pod *corev1.Pod, req *corev1.NodeSelectorRequirement) string {
	if req == nil {
		return ""
	}
	if pod.Spec.NodeName != "" {
		return fmt.Sprintf("admission bound pod %s to node %s", pod.Name, pod.Spec.NodeName)
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		return fmt.Sprintf("admission removed the required node affinity of pod %s", pod.Name)
	}
	for i, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if !hasRequirement(t, req) {
			return fmt.Sprintf("admission left node affinity term %d of pod %s without the requirement %s %s %v", i, pod.Name, req.Key, req.Operator, req.Values)
		}
	}
	return ""
}
