package placement

// Names shared with users, dashboards and scripts, as the multiarch tuning
// operator defines them.

const (
	// SchedulingGate is the scheduling gate the webhook adds and the
	// controller removes.
	SchedulingGate = "multiarch.openshift.io/scheduling-gate"

	// ArchLabel is the node label the affinity constrains.
	ArchLabel = "kubernetes.io/arch"

	// NoSupportedArchKey is the node label no node has: a required term on
	// it keeps a pod whose images share no architecture Pending.
	NoSupportedArchKey = "multiarch.openshift.io/no-supported-arch"

	// ConfigFinalizer holds a ClusterPodPlacementConfig until its gated
	// pods are released.
	ConfigFinalizer = "finalizers.multiarch.openshift.io/pod-placement"

	// OperandFinalizer holds a ClusterPodPlacementConfig until the
	// placement operator has stopped the operand: the placement controller
	// and webhook scaled to zero and their cluster-wide bindings deleted.
	OperandFinalizer = "placement.archway.dev/operand"

	// ControllerName names the placement controller's Deployment, service
	// account, ClusterRole and the ClusterRoleBinding the placement operator
	// makes between them.
	ControllerName = "archway-placement-controller"
	// WebhookComponentName is the same for the placement webhook.
	WebhookComponentName = "archway-placement-webhook"

	// ReplicasAnnotation, on the placement controller's and webhook's
	// Deployments (or, when the Deployment has none, on their pod
	// template, where an OLM bundle carries it), is how many replicas the
	// placement operator runs while the ClusterPodPlacementConfig exists
	// (default 1).
	ReplicasAnnotation = "placement.archway.dev/replicas"

	// WebhookName is the name of the gate webhook inside its
	// MutatingWebhookConfiguration.
	WebhookName = "pod-placement-scheduling-gate.multiarch.openshift.io"

	// WebhookConfigurationName is the default name of the
	// MutatingWebhookConfiguration that holds the gate webhook.
	WebhookConfigurationName = "archway-pod-placement"

	// WebhookPath is where the gate webhook is served.
	WebhookPath = "/mutate-v1-pod-placement"
)

// Namespace labels the shipped ClusterPodPlacementConfig's
// namespaceSelector reads (manifests/placement).
const (
	// ExcludeNamespaceLabel on a namespace keeps its pods from being gated:
	// the multiarch tuning operator's opt-out label, from its sample config.
	ExcludeNamespaceLabel = "multiarch.openshift.io/exclude-pod-placement"
	// DeprecatedExcludeNamespaceLabel is the opt-out label earlier archway
	// manifests used; the shipped selector still honours it.
	DeprecatedExcludeNamespaceLabel = "multiarch.openshift.io/exclude-namespace"
)

// Pod labels.
const (
	// SchedulingGateLabel says whether the pod is gated or was released.
	SchedulingGateLabel = "multiarch.openshift.io/scheduling-gate"
	// SchedulingGateLabelGated is its value from admission until release.
	SchedulingGateLabelGated = "gated"
	// SchedulingGateLabelNotSet is its value on pods admitted ungated
	// while placement is on.
	SchedulingGateLabelNotSet = "not-set"
	// SchedulingGateLabelRemoved is its value once the gate is removed.
	SchedulingGateLabelRemoved = "removed"

	// NodeAffinityLabel is "not-set" from admission, "set" once the
	// controller constrained the required node affinity (fallback
	// included), and stays "not-set" when it left it unchanged.
	NodeAffinityLabel = "multiarch.openshift.io/node-affinity"
	// PreferredNodeAffinityLabel is "not-set" from admission when a
	// config applying to the pod has nodeAffinityScoring, and "set" once
	// the controller added preferred terms from it.
	PreferredNodeAffinityLabel = "multiarch.openshift.io/preferred-node-affinity"
	// LabelValueSet and LabelValueNotSet are the values of the two above.
	LabelValueSet    = "set"
	LabelValueNotSet = "not-set"

	// SingleArchLabel ("") marks pods whose images share exactly one
	// architecture; the per-architecture label says which.
	SingleArchLabel = "multiarch.openshift.io/single-arch"
	// MultiArchLabel ("") marks pods whose images share several
	// architectures.
	MultiArchLabel = "multiarch.openshift.io/multi-arch"
	// archLabelPrefix + an architecture ("") marks each architecture the
	// pod's images share, e.g. multiarch.openshift.io/arm64.
	archLabelPrefix = "multiarch.openshift.io/"
	// NoSupportedArchLabel marks pods whose images share no architecture.
	NoSupportedArchLabel = "multiarch.openshift.io/no-supported-arch"
	// FallbackArchLabel marks pods placed on the fallback architecture
	// after inspection failed; its value is that architecture.
	FallbackArchLabel = "multiarch.openshift.io/fallback-arch"
	// ImageInspectionErrorLabel ("") marks pods released after their
	// images could not be inspected; the annotation of the same name holds
	// the last error.
	ImageInspectionErrorLabel = "multiarch.openshift.io/image-inspect-error"
	// ImageInspectionErrorCountLabel is how many times the pod's images
	// failed inspection before it was released ("1", "2", ...).
	ImageInspectionErrorCountLabel = "multiarch.openshift.io/image-inspect-error-count"
)

// ArchLabelFor is the pod label that marks arch as one its images share.
func ArchLabelFor(arch string) string { return archLabelPrefix + arch }

// Pod annotations.
const (
	// PreferredAffinitySourcesAnnotation lists the configured preferences
	// of the pod and where each came from: arch:weight:source[:skipped],
	// comma-separated, source ClusterPodPlacementConfig or
	// PodPlacementConfig-<name>; skipped ones were not applied (the pod
	// states its own kubernetes.io/arch preference, or a higher-priority
	// config set that architecture).
	PreferredAffinitySourcesAnnotation = "multiarch.openshift.io/preferred-affinity-sources"

	// ImageInspectionErrorAnnotation is the last inspection error of a pod
	// labelled ImageInspectionErrorLabel, cut to MaxInspectionErrorAnnotation
	// characters.
	ImageInspectionErrorAnnotation = "multiarch.openshift.io/image-inspect-error"
)

// MaxInspectionErrorAnnotation bounds the error annotation, as the
// multiarch tuning operator does.
const MaxInspectionErrorAnnotation = 256

// Event reasons, one event per outcome per pod.
const (
	// EventSchedGateAdded: the webhook gated the pod.
	EventSchedGateAdded = "ArchAwareSchedGateAdded"
	// EventPredicateSet: the required affinity now names the architectures
	// the pod's images share, and the gate is removed.
	EventPredicateSet = "ArchAwarePredicateSet"
	// EventPredicatesConflict: every required term already constrains
	// kubernetes.io/arch; the controller left them as they were.
	EventPredicatesConflict = "ArchAwarePredicatesConflict"
	// EventInspectionError: the images could not be inspected after every
	// retry; the pod was released with its affinity unchanged.
	EventInspectionError = "ArchAwareInspectionError"
	// EventFallbackPredicateSet: inspection failed after every retry; the
	// pod was restricted to the fallback architecture.
	EventFallbackPredicateSet = "ArchAwareFallbackPredicateSet"
	// EventGatedPodIgnored: the gated pod was changed so it no longer
	// needs arch-aware placement (it now pins kubernetes.io/arch).
	EventGatedPodIgnored = "ArchAwareGatedPodIgnored"
	// EventSchedGateRemovalSuccess: the gate was removed without placing
	// the pod, because the ClusterPodPlacementConfig is gone or going.
	EventSchedGateRemovalSuccess = "ArchAwareSchedGateRemovalSuccess"
	// EventSchedGateRemovalFailed: the apiserver refused the update that
	// places the pod; it is released with its affinity unchanged.
	EventSchedGateRemovalFailed = "ArchAwareSchedGateRemovalFailed"
	// EventPreferenceSkipped: a configured preference was not applied
	// because it overlaps with the pod's own or a higher-priority config's;
	// one event per skipped preference (an archway addition).
	EventPreferenceSkipped = "ArchAwarePreferredAffinitySkipped"
	// EventNoSupportedArchitectures: the pod's images share no
	// architecture; it stays Pending.
	EventNoSupportedArchitectures = "NoSupportedArchitecturesFound"
)
