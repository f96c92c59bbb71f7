// Package v1beta1 holds archway's multiarch.openshift.io/v1beta1 API: the
// ClusterPodPlacementConfig that turns on arch-aware pod placement for the
// whole cluster, and the namespaced PodPlacementConfig that tunes it per
// namespace.
//
// The group, the kinds and the JSON field names are those of OpenShift's
// multiarch tuning operator, so manifests and habits written for it carry
// over. Every shape rule is a CEL rule or an OpenAPI constraint on the types,
// so it holds without a validating webhook.
//
// +kubebuilder:object:generate=true
// +groupName=multiarch.openshift.io
package v1beta1
