// Package policy injects scheduling criteria into new pods and into the pod
// templates of workloads from PodSchedulingPolicies and
// ClusterPodSchedulingPolicies (kupid.gardener.cloud/v1alpha1), as
// Gardener's kupid does, with a merge order that does not depend on cache
// order.
//
// The parts, one file each: order.go sorts the policies that select a pod
// into merge order; merge.go merges them into the pod's spec (a pure
// function); match.go decides which policies select a pod; validation.go
// holds the rules a policy must meet so that no merge can make a pod
// invalid; webhook.go serves the mutating webhook on pods and the
// validating webhook on policies; workload.go says which workloads' templates
// are merged and workload_webhook.go merges them; status.go counts what the webhook applied
// and adds it to each policy's status periodically; metrics.go and setup.go
// create the metrics and wire everything into a manager.
package policy
