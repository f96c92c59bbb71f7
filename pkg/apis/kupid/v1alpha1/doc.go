// Package v1alpha1 holds archway's kupid.gardener.cloud/v1alpha1 API: the
// namespaced PodSchedulingPolicy and the cluster-scoped
// ClusterPodSchedulingPolicy, which inject scheduling criteria (node
// selector, node name, affinity, scheduler name, tolerations) into the pods
// they select when those pods are created.
//
// The group, the kinds and the JSON field names are those of Gardener's
// kupid, so policies written for it carry over. archway adds spec.priority,
// which makes the order policies are merged in deterministic, and a status
// (how many pods a policy was applied to and when last). Shape rules are CEL
// rules or OpenAPI constraints on the types, so they hold without a
// validating webhook.
//
// +kubebuilder:object:generate=true
// +groupName=kupid.gardener.cloud
package v1alpha1
