package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPodPlacementConfigName is the only name a ClusterPodPlacementConfig
// may have: it is a singleton.
const ClusterPodPlacementConfigName = "cluster"

// ClusterPodPlacementConfig turns on arch-aware pod placement for the
// cluster. While it exists, new pods in the selected namespaces are gated at
// admission and the placement controller restricts their node affinity to
// the architectures all their images support before letting them schedule.
// Deleting it ungates every pod still gated before it goes.
//
// v1beta1 is the stored version; v1alpha1 is served too, converted by
// archway's conversion webhook.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterpodplacementconfigs,singular=clusterpodplacementconfig,scope=Cluster,shortName=cppc
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether pods are being gated and placed."
// +kubebuilder:printcolumn:name="Fallback",type=string,JSONPath=`.spec.fallbackArchitecture`,description="The architecture used when images cannot be inspected."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="ClusterPodPlacementConfig is a singleton: metadata.name must be 'cluster'"
type ClusterPodPlacementConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is how pods are placed. Default: every field's default.
	// +optional
	Spec ClusterPodPlacementConfigSpec `json:"spec,omitempty"`

	// status is written by the placement controller.
	// +optional
	Status ClusterPodPlacementConfigStatus `json:"status,omitempty"`
}

// ClusterPodPlacementConfigSpec is the cluster-wide placement configuration.
type ClusterPodPlacementConfigSpec struct {
	// logVerbosity is the log level of the placement webhook and
	// controller: Normal, Debug, Trace or TraceAll. Default: Normal.
	// +optional
	// +kubebuilder:default=Normal
	LogVerbosity LogVerbosityLevel `json:"logVerbosity,omitempty"`

	// namespaceSelector selects the namespaces whose pods are gated. It is
	// copied into the webhook configuration, so the apiserver does not even
	// call the webhook for other namespaces. Pods in kube-*, openshift-*,
	// hypershift-* and archway's own namespace are never gated. Default:
	// unset, every other namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// fallbackArchitecture is the architecture a pod is restricted to when
	// its images cannot be inspected after every retry: amd64, arm64,
	// ppc64le, s390x, or empty. Default: empty, such pods are ungated with
	// their affinity unchanged.
	// +optional
	// +kubebuilder:validation:Enum=arm64;amd64;ppc64le;s390x;""
	FallbackArchitecture string `json:"fallbackArchitecture,omitempty"`

	// plugins are optional placement behaviours. Default: none enabled.
	// +optional
	Plugins *Plugins `json:"plugins,omitempty"`

	// preferenceMerge says how the nodeAffinityScoring preferences of the
	// configs that apply to a pod combine (an archway field; the multiarch
	// tuning operator has none). HighestPriority, the default, as the
	// operator's design states it: when an enabled nodeAffinityScoring of a
	// PodPlacementConfig selects the pod, only the highest-priority such
	// config's preferences are added and the cluster config's are ignored.
	// PerArchitecture, as the operator's controller does it: every
	// config's preferences are added, each architecture weighed by the
	// highest-priority config naming it, the cluster config filling in the
	// architectures none names. Either way the pod's
	// preferred-affinity-sources annotation lists what was skipped.
	// +optional
	// +kubebuilder:default=HighestPriority
	PreferenceMerge PreferenceMerge `json:"preferenceMerge,omitempty"`
}

// PreferenceMerge is how the preferences of several configs combine.
// +kubebuilder:validation:Enum=HighestPriority;PerArchitecture
type PreferenceMerge string

// The ways preferences combine.
const (
	// PreferenceMergeHighestPriority: the highest-priority config that
	// applies decides every preference.
	PreferenceMergeHighestPriority PreferenceMerge = "HighestPriority"
	// PreferenceMergePerArchitecture: each architecture takes the weight of
	// the highest-priority config naming it.
	PreferenceMergePerArchitecture PreferenceMerge = "PerArchitecture"
)

// Condition types of a ClusterPodPlacementConfig, as the multiarch tuning
// operator names them.
const (
	// ConditionAvailable is True while pods are gated and placed.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the configuration is being rolled
	// out to the webhook configuration.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the configuration could not be rolled
	// out.
	ConditionDegraded = "Degraded"
	// ConditionDeprovisioning is True while the config is being deleted and
	// its gated pods are being released, then its operand stopped.
	ConditionDeprovisioning = "Deprovisioning"
	// ConditionPodPlacementControllerNotRolledOut is True while the
	// placement controller's Deployment has fewer replicas up to date and
	// available than the placement operator asked for.
	ConditionPodPlacementControllerNotRolledOut = "PodPlacementControllerNotRolledOut"
	// ConditionPodPlacementWebhookNotRolledOut is the same for the
	// placement webhook's Deployment.
	ConditionPodPlacementWebhookNotRolledOut = "PodPlacementWebhookNotRolledOut"
)

// Condition reasons of a ClusterPodPlacementConfig.
const (
	// ReasonReconciled: the webhook configuration matches the spec.
	ReasonReconciled = "Reconciled"
	// ReasonWebhookConfigurationNotFound: the MutatingWebhookConfiguration
	// (or its pod placement webhook) does not exist.
	ReasonWebhookConfigurationNotFound = "WebhookConfigurationNotFound"
	// ReasonWebhookConfigurationSyncFailed: the webhook configuration could
	// not be updated.
	ReasonWebhookConfigurationSyncFailed = "WebhookConfigurationSyncFailed"
	// ReasonUngatingPods: the config is being deleted and gated pods are
	// being released.
	ReasonUngatingPods = "UngatingPods"
	// ReasonRolledOut: every replica asked for is up to date and available.
	ReasonRolledOut = "RolledOut"
	// ReasonRollingOut: replicas are starting or being replaced.
	ReasonRollingOut = "RollingOut"
	// ReasonDeploymentNotFound: the operand's Deployment does not exist.
	ReasonDeploymentNotFound = "DeploymentNotFound"
	// ReasonInvalidReplicas: the Deployment's replica annotation is not a
	// number of replicas.
	ReasonInvalidReplicas = "InvalidReplicas"
	// ReasonStoppingOperand: the gated pods are released; the operand is
	// scaled to zero and its cluster-wide bindings deleted.
	ReasonStoppingOperand = "StoppingOperand"
)

// ClusterPodPlacementConfigStatus is what the placement controller observed.
type ClusterPodPlacementConfigStatus struct {
	// conditions are Available, Progressing, Degraded and Deprovisioning,
	// and PodPlacementControllerNotRolledOut and
	// PodPlacementWebhookNotRolledOut.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
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
