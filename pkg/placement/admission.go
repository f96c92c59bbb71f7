package placement

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// reservedNamespacePrefixes are never gated: the cluster's own workloads
// must schedule even when placement is broken.
var reservedNamespacePrefixes = []string{"kube-", "openshift-", "hypershift-"}

// isReservedNamespace reports whether pods in ns are never gated: kube-*,
// openshift-*, hypershift-*, and own (archway's namespace).
func isReservedNamespace(ns, own string) bool {
	if ns == own && own != "" {
		return true
	}
	for _, p := range reservedNamespacePrefixes {
		if strings.HasPrefix(ns, p) {
			return true
		}
	}
	return false
}

// Reasons the webhook does not gate a pod, for its metrics and logs.
const (
	skipNoConfig          = "no-config"
	skipConfigDeleting    = "config-deleting"
	skipNoController      = "no-controller"
	skipReservedNamespace = "reserved-namespace"
	skipNamespaceSelector = "namespace-not-selected"
	skipNodeName          = "node-name"
	skipDaemonSet         = "daemonset"
	skipPinnedArch        = "node-selector-arch"
	skipAlreadyGated      = "already-gated"
)

// admissionInput is what the webhook knows about a new pod: the pod, the
// config (nil when none exists) and, when the informer has it, the labels
// of the pod's namespace.
type admissionInput struct {
	pod             *corev1.Pod
	namespace       string
	namespaceLabels labels.Set // nil when unknown
	config          *multiarchv1beta1.ClusterPodPlacementConfig
	ownNamespace    string
	// controllerAlive: a placement controller's heartbeat is fresh, so a
	// gate added now will be removed.
	controllerAlive bool
}

// shouldGate decides whether a new pod gets the scheduling gate, and when
// not, why.
func shouldGate(in admissionInput) (bool, string) {
	switch {
	case in.config == nil:
		return false, skipNoConfig
	case in.config.DeletionTimestamp != nil:
		return false, skipConfigDeleting
	case !in.controllerAlive:
		return false, skipNoController
	case isReservedNamespace(in.namespace, in.ownNamespace):
		return false, skipReservedNamespace
	case in.pod.Spec.NodeName != "":
		return false, skipNodeName
	case isDaemonSetPod(in.pod):
		return false, skipDaemonSet
	case pinsArch(in.pod):
		return false, skipPinnedArch
	case hasGate(in.pod):
		return false, skipAlreadyGated
	}
	// The apiserver filters namespaces with the selector synced into the
	// webhook configuration; checking here too covers the moment between a
	// config change and that sync.
	if sel := in.config.Spec.NamespaceSelector; sel != nil && in.namespaceLabels != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err == nil && !s.Matches(in.namespaceLabels) {
			return false, skipNamespaceSelector
		}
	}
	return true, ""
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") {
			return true
		}
	}
	return false
}

// gate adds the scheduling gate and the gated label to pod.
func gate(pod *corev1.Pod) {
	addGate(pod)
	setLabel(pod, SchedulingGateLabel, SchedulingGateLabelGated)
}
