package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SchedulingCriteria are the pod scheduling fields a policy injects into
// the pods it selects. Every field is optional; a field the policy leaves
// unset changes nothing. The pod's own value wins over the policy's for
// nodeName, schedulerName and every nodeSelector key it already has.
type SchedulingCriteria struct {
	// nodeSelector keys are added to the pod's nodeSelector; a key the pod
	// already has keeps the pod's value. Default: unset.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// nodeName is set on pods that have none. It is not set on a pod that
	// carries scheduling gates (the apiserver rejects a gated pod with a
	// node name); use a required node affinity on kubernetes.io/hostname
	// for those. At most 253 characters, a DNS subdomain. Default: unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	NodeName string `json:"nodeName,omitempty"`

	// affinity is merged into the pod's affinity: required node selector
	// terms become the cartesian product of the pod's terms and the
	// policy's (each pod term ANDed with each policy term); preferred node
	// affinity terms and pod (anti-)affinity terms are appended, skipping
	// exact duplicates. Default: unset.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// schedulerName is set on pods that name no scheduler or the default
	// one ("default-scheduler", which the apiserver fills in before
	// admission). At most 253 characters. Default: unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SchedulerName string `json:"schedulerName,omitempty"`

	// tolerations are appended to the pod's, skipping exact duplicates.
	// A toleration with operator Exists has no value; one with an empty key
	// has operator Exists. At most 64. Default: unset.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')",message="a toleration with operator Exists must not have a value"
	// +kubebuilder:validation:XValidation:rule="self.all(t, (has(t.key) && t.key != '') || (has(t.operator) && t.operator == 'Exists'))",message="a toleration with an empty key must have operator Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['', 'Equal', 'Exists'])",message="a toleration's operator must be Equal or Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="a toleration's effect must be NoSchedule, PreferNoSchedule or NoExecute"
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// Priority bounds: a policy's spec.priority is within them.
const (
	MinPriority = 0
	MaxPriority = 1000
)

// PolicyStatus is what the webhook observed applying a policy. Each
// webhook replica counts in memory and adds its count to the status
// periodically, so the numbers lag admissions by up to the flush interval.
type PolicyStatus struct {
	// matchedPods counts the pods this policy was applied to at their
	// creation, over the policy's lifetime. Default: 0.
	// +optional
	MatchedPods int64 `json:"matchedPods,omitempty"`

	// lastAppliedTime is when the policy was last applied to a pod.
	// Default: unset, never applied.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`
}
