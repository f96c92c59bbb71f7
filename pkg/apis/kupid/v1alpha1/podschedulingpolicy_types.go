package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodSchedulingPolicy injects scheduling criteria into the new pods of its
// namespace that its podSelector selects. Several policies may select the
// same pod: they are applied one after another, by descending
// spec.priority, then namespaced before cluster policies, then by name, and
// the first applied wins where values conflict (nodeName, schedulerName, a
// nodeSelector key). The pod's own values win over every policy.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=podschedulingpolicies,singular=podschedulingpolicy,scope=Namespaced,shortName=psp
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,description="Higher is applied first and wins conflicts."
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedPods`,description="Pods the policy was applied to."
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.skippedPods`,description="Pods where part of the policy was not applied (see status.lastSkipped and the pods' events)."
// +kubebuilder:printcolumn:name="Last applied",type=date,JSONPath=`.status.lastAppliedTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodSchedulingPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is which pods and what to inject.
	// +required
	Spec PodSchedulingPolicySpec `json:"spec"`

	// status is written by the scheduling-policy webhook.
	// +optional
	Status PolicyStatus `json:"status,omitempty"`
}

// PodSchedulingPolicySpec selects pods of the policy's namespace and holds
// the criteria injected into them.
type PodSchedulingPolicySpec struct {
	// podSelector selects the pods of the namespace the policy applies to.
	// Unset selects no pod; an empty selector ({}) selects every pod.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn'] && has(e.values) && size(e.values) > 0) || (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="matchExpressions: operator In and NotIn need values, Exists and DoesNotExist take none, and no other operator exists"
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// priority orders the policies that select the same pod: the higher is
	// applied first and so wins conflicts. From 0 to 1000. Default: 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	SchedulingCriteria `json:",inline"`
}

// PodSchedulingPolicyList is a list of PodSchedulingPolicies.
//
// +kubebuilder:object:root=true
type PodSchedulingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the policies.
	Items []PodSchedulingPolicy `json:"items"`
}
