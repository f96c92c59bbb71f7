// Package v1alpha1 holds archway's scheduling.archway.dev/v1alpha1 API: the
// cluster-scoped ControlPlaneProtection that keeps pods off control-plane
// nodes unless both whoever puts them there and the pod's namespace are
// authorized.
//
// The shape follows the scheduling-groups design for protecting
// control-plane nodes (groups of {name, labelSelector, mode,
// authorizedUsers}); no shipped product implements it, so the group and kind
// are archway's own. Every shape rule is a CEL rule or an OpenAPI constraint
// on the types, so bad configuration is refused by the apiserver with a
// message that says what to fix.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.archway.dev
package v1alpha1
