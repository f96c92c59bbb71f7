package policy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// selects reports whether sel selects set. As in kupid, a nil selector
// selects nothing and an empty one everything.
func selects(sel *metav1.LabelSelector, set labels.Set) (bool, error) {
	if sel == nil {
		return false, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(set), nil
}

// Candidates are the policies that may select a pod: those of its
// namespace and the cluster's.
type Candidates struct {
	Namespaced []kupidv1alpha1.PodSchedulingPolicy
	Cluster    []kupidv1alpha1.ClusterPodSchedulingPolicy
}

// Selection is which candidates select a pod.
type Selection struct {
	// Selected are the valid policies that select the pod, unordered.
	Selected []Policy
	// Invalid are the policies skipped because they break the rules of
	// validation.go (written while the validating webhook was not
	// registered), with why.
	Invalid map[string]error
}

// Select returns the candidates that select a pod with podLabels in a
// namespace with namespaceLabels.
func Select(c Candidates, podLabels, namespaceLabels labels.Set) Selection {
	var s Selection
	invalid := func(ref string, err error) {
		if s.Invalid == nil {
			s.Invalid = map[string]error{}
		}
		s.Invalid[ref] = err
	}
	for i := range c.Namespaced {
		p := &c.Namespaced[i]
		pol := Policy{Kind: KindPodSchedulingPolicy, Namespace: p.Namespace, Name: p.Name, UID: p.UID, Priority: p.Spec.Priority, Criteria: p.Spec.SchedulingCriteria}
		if errs := ValidatePodSchedulingPolicy(p); len(errs) > 0 {
			invalid(pol.Ref(), errs.ToAggregate())
			continue
		}
		if ok, _ := selects(p.Spec.PodSelector, podLabels); ok {
			s.Selected = append(s.Selected, pol)
		}
	}
	for i := range c.Cluster {
		p := &c.Cluster[i]
		pol := Policy{Kind: KindClusterPodSchedulingPolicy, Name: p.Name, UID: p.UID, Priority: p.Spec.Priority, Criteria: p.Spec.SchedulingCriteria}
		if errs := ValidateClusterPodSchedulingPolicy(p); len(errs) > 0 {
			invalid(pol.Ref(), errs.ToAggregate())
			continue
		}
		nsOK, _ := selects(p.Spec.NamespaceSelector, namespaceLabels)
		podOK, _ := selects(p.Spec.PodSelector, podLabels)
		if nsOK && podOK {
			s.Selected = append(s.Selected, pol)
		}
	}
	return s
}
