package v1beta1

// Hub marks v1beta1, the stored version, as the version every other
// version of ClusterPodPlacementConfig converts through (v1alpha1's
// conversion.go).
func (*ClusterPodPlacementConfig) Hub() {}
