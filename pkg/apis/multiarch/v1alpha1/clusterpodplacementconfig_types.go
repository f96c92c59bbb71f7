package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPodPlacementConfig turns on arch-aware pod placement for the
// cluster, in the multiarch tuning operator's first API version. It is the
// same object as the v1beta1 one (stored as v1beta1): use v1beta1 for the
// fields this version lacks (fallbackArchitecture, plugins,
// preferenceMerge).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterpodplacementconfigs,singular=clusterpodplacementconfig,scope=Cluster,shortName=cppc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether pods are being gated and placed."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="ClusterPodPlacementConfig is a singleton: metadata.name must be 'cluster'"
type ClusterPodPlacementConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata. Two annotations carry the
	// v1beta1 fields this version cannot express (conversion.go); leave
	// them as they are read.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is how pods are placed. Default: every field's default.
	// +optional
	Spec ClusterPodPlacementConfigSpec `json:"spec,omitempty"`

	// status is written by the placement controller.
	// +optional
	Status ClusterPodPlacementConfigStatus `json:"status,omitempty"`
}

// ClusterPodPlacementConfigSpec is the cluster-wide placement configuration
// of v1alpha1.
type ClusterPodPlacementConfigSpec struct {
	// logVerbosity is the log level of the placement webhook and
	// controller: Normal, Debug, Trace or TraceAll. Default: Normal.
	// +optional
	// +kubebuilder:default=Normal
	LogVerbosity LogVerbosityLevel `json:"logVerbosity,omitempty"`

	// namespaceSelector selects the namespaces whose pods are gated. Pods
	// in kube-*, openshift-*, hypershift-* and archway's own namespace are
	// never gated. Default: unset, every other namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// LogVerbosityLevel is how much the placement components log.
// +kubebuilder:validation:Enum=Normal;Debug;Trace;TraceAll
type LogVerbosityLevel string

// ClusterPodPlacementConfigStatus is what the placement components
// observed.
type ClusterPodPlacementConfigStatus struct {
	// conditions are those of v1beta1: Available, Progressing, Degraded,
	// Deprovisioning, PodPlacementControllerNotRolledOut and
	// PodPlacementWebhookNotRolledOut.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterPodPlacementConfigList is a list of ClusterPodPlacementConfigs.
//
// +kubebuilder:object:root=true
type ClusterPodPlacementConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the configs.
	Items []ClusterPodPlacementConfig `json:"items"`
}
