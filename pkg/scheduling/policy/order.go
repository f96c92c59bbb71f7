package policy

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// Policy kinds, as they appear in Ref and in metrics.
const (
	KindPodSchedulingPolicy        = "PodSchedulingPolicy"
	KindClusterPodSchedulingPolicy = "ClusterPodSchedulingPolicy"
)

// Policy is one policy that selects a pod, as the merge sees it.
type Policy struct {
	// Kind is KindPodSchedulingPolicy or KindClusterPodSchedulingPolicy.
	Kind string
	// Namespace is empty for a cluster policy.
	Namespace string
	Name      string
	// UID tells a policy from a later one of the same name.
	UID      types.UID
	Priority int32
	Criteria kupidv1alpha1.SchedulingCriteria
}

// Ref names the policy in logs, metrics and the pod's annotation:
// "ClusterPodSchedulingPolicy/name" or "PodSchedulingPolicy/namespace/name".
func (p Policy) Ref() string {
	if p.Namespace == "" {
		return p.Kind + "/" + p.Name
	}
	return p.Kind + "/" + p.Namespace + "/" + p.Name
}

// Order sorts policies into the order they are merged in:
//
//  1. by spec.priority, the highest first;
//  2. at equal priority, PodSchedulingPolicies before
//     ClusterPodSchedulingPolicies: the namespace's own policy is the more
//     specific, and a cluster policy is a default that a cluster
//     administrator who must win raises above it by priority;
//  3. then by name (and namespace, for completeness).
//
// The first policy merged wins wherever only one value can stand (nodeName,
// schedulerName, a nodeSelector key): merging keeps a value already there,
// so a higher priority means winning conflicts. The order is total, so it
// never depends on the order the informer cache lists policies in.
func Order(ps []Policy) {
	slices.SortStableFunc(ps, func(a, b Policy) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Namespace, b.Namespace)
	})
}

func kindRank(kind string) int {
	if kind == KindClusterPodSchedulingPolicy {
		return 1
	}
	return 0
}
