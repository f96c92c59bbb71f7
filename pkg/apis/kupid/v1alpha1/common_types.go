package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SchedulingCriteria are the pod scheduling fields a policy injects into
// the pods it selects. Every field is optional; a field the policy leaves
// unset changes nothing. The pod's own value wins over the policy's for
// nodeName, schedulerName and every nodeSelector key it already has; each
// part so skipped is recorded as an event on the pod and in the policy's
// status.
type SchedulingCriteria struct {
	// nodeSelector keys are added to the pod's nodeSelector; a key the pod
	// already has keeps the pod's value. Default: unset.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// nodeName makes the pods require the node of that name: the
	// requirement metadata.name In [nodeName] is added to every required
	// node selector term (or makes the one term), so the pod still goes
	// through the scheduler and placement (unlike kupid, which sets
	// spec.nodeName, which a gated pod cannot have). A pod that already
	// names another node (its spec.nodeName, or a term's metadata.name
	// requirement, as a DaemonSet pod's) keeps it, and the skip is recorded.
	// At most 253 characters, a DNS subdomain. Default: unset.
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

	// skippedPods counts the pods created with part of this policy not
	// applied, because the pod or a policy merged before this one already
	// had another value (nodeName, schedulerName, a nodeSelector key).
	// Each such pod has an event that names the parts. Default: 0.
	// +optional
	SkippedPods int64 `json:"skippedPods,omitempty"`

	// lastSkipped is the latest pod or workload template where part of
	// this policy was not applied, and which parts. Default: unset.
	// +optional
	LastSkipped *SkippedParts `json:"lastSkipped,omitempty"`
}

// SkippedParts names an object where parts of a policy were not applied.
type SkippedParts struct {
	// kind is the object's kind: Pod, or the workload's (Deployment, ...).
	// +required
	Kind string `json:"kind"`

	// namespace is the object's namespace.
	// +required
	Namespace string `json:"namespace"`

	// name is the object's name.
	// +required
	Name string `json:"name"`

	// parts are the parts of the policy not applied: nodeName,
	// schedulerName, nodeSelector[<key>].
	// +required
	// +listType=atomic
	Parts []string `json:"parts"`

	// time is when the object was admitted.
	// +required
	Time metav1.Time `json:"time"`
}
