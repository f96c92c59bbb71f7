package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodPlacementConfig tunes arch-aware placement for some pods of its
// namespace: its plugins (preferred architecture weights) apply to the pods
// its labelSelector matches, before the ClusterPodPlacementConfig's. Where
// several match a pod, the highest priority decides each architecture's
// weight; the cluster config fills in only architectures none of them
// names. The required affinity stays the cluster controller's.
//
// A PodPlacementConfig can exist only while the ClusterPodPlacementConfig
// does; the cluster config cannot be deleted while any exists.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=podplacementconfigs,singular=podplacementconfig,scope=Namespaced,shortName=ppc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,description="Higher wins among the configs matching a pod."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodPlacementConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is which pods and how. Default: every field's default.
	// +optional
	Spec PodPlacementConfigSpec `json:"spec,omitempty"`

	// status is reserved for the controller.
	// +optional
	Status PodPlacementConfigStatus `json:"status,omitempty"`
}

// PodPlacementConfigSpec is a namespace's placement tuning.
type PodPlacementConfigSpec struct {
	// labelSelector selects the pods of the namespace the config applies
	// to. Default: unset, every pod of the namespace.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// priority orders the configs of a namespace that match the same pod:
	// the higher wins, architecture by architecture. From 0 to 255, unique
	// within the namespace. Default: 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	Priority int32 `json:"priority,omitempty"`

	// plugins are the placement behaviours for the selected pods. Default:
	// none enabled.
	// +optional
	Plugins *Plugins `json:"plugins,omitempty"`
}

// PodPlacementConfigStatus is reserved for the controller.
type PodPlacementConfigStatus struct {
	// conditions are reserved for the controller.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PodPlacementConfigList is a list of PodPlacementConfigs.
//
// +kubebuilder:object:root=true
type PodPlacementConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the configs.
	Items []PodPlacementConfig `json:"items"`
}
