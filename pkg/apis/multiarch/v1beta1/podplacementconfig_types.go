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
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedPods`,description="Pods placed with a preference from this config."
// +kubebuilder:printcolumn:name="Claimed",type=string,JSONPath=`.status.conditions[?(@.type=="PriorityClaimed")].status`,description="Whether this config holds its priority in the namespace."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodPlacementConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is which pods and how. Default: every field's default.
	// +optional
	Spec PodPlacementConfigSpec `json:"spec,omitempty"`

	// status is written by the placement controller.
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
	// none enabled. The exec-format-error monitor is cluster-wide: set it in
	// the ClusterPodPlacementConfig.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.execFormatErrorMonitor)",message="execFormatErrorMonitor is cluster-wide: set it in the ClusterPodPlacementConfig"
	Plugins *Plugins `json:"plugins,omitempty"`
}

// PodPlacementConfigStatus is what the placement controller observed.
type PodPlacementConfigStatus struct {
	// conditions: PriorityClaimed is True while this config holds its
	// priority in its namespace (no other config may take it), False with
	// reason PriorityHeld when another config holds it.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// appliedPods counts the pods the placement controller placed with at
	// least one preferred term from this config (skipped ones do not
	// count), since the config was created. Default: 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AppliedPods int64 `json:"appliedPods,omitempty"`

	// lastAppliedTime is when the last of those pods was placed.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`
}

// Condition types and reasons of a PodPlacementConfig.
const (
	// ConditionPriorityClaimed is True while the config holds its priority.
	ConditionPriorityClaimed = "PriorityClaimed"
	// ReasonPriorityClaimed: the config holds its priority.
	ReasonPriorityClaimed = "Claimed"
	// ReasonPriorityHeld: another config of the namespace holds the
	// priority (possible only for configs created while the validating
	// webhook was not registered).
	ReasonPriorityHeld = "PriorityHeld"
)

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
