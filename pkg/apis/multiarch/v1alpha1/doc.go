// Package v1alpha1 holds multiarch.openshift.io/v1alpha1, the first version
// of the multiarch tuning operator's ClusterPodPlacementConfig, served beside
// v1beta1 (the stored version) so that manifests written for it apply
// unchanged. Its spec has only logVerbosity and namespaceSelector; the
// apiserver converts it to and from v1beta1 through archway's conversion
// webhook (conversion.go), which keeps the v1beta1 fields this version cannot
// express in annotations, so a round trip through v1alpha1 loses nothing.
//
// +kubebuilder:object:generate=true
// +groupName=multiarch.openshift.io
package v1alpha1
