package webhook

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/podcontroller"
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
	skipRequiredArch      = "required-arch"
	skipControlPlane      = "control-plane"
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
	// local are the PodPlacementConfigs of the pod's namespace.
	local        []multiarchv1beta1.PodPlacementConfig
	ownNamespace string
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
	case selectsControlPlane(in.pod):
		return false, skipControlPlane
	// A pod that already decides its architecture is still gated when a
	// configured preference would be added, as the multiarch tuning
	// operator gates and scores it.
	case podcontroller.PinsArch(in.pod) && !podcontroller.WouldAddPreferences(in.pod, podcontroller.PolicyFor(in.pod, &in.config.Spec, in.local)):
		return false, skipPinnedArch
	case podcontroller.AllTermsConstrainArch(in.pod) && !podcontroller.WouldAddPreferences(in.pod, podcontroller.PolicyFor(in.pod, &in.config.Spec, in.local)):
		return false, skipRequiredArch
	case placement.HasGate(in.pod):
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

// isDaemonSetPod reports whether a DaemonSet is the pod's controller: the
// DaemonSet controller places its pods itself, one per node. A pod that
// merely lists a DaemonSet among its owners is placed like any other.
func isDaemonSetPod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/")
}

// controlPlaneRoleLabels are the node labels only control-plane nodes have.
var controlPlaneRoleLabels = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// selectsControlPlane reports whether the pod's nodeSelector can match only
// control-plane nodes: their architecture is the cluster's, and whoever
// pins a pod there has chosen its node.
func selectsControlPlane(pod *corev1.Pod) bool {
	for _, key := range controlPlaneRoleLabels {
		if _, ok := pod.Spec.NodeSelector[key]; ok {
			return true
		}
	}
	return false
}

// admissionLabels are the labels the webhook writes on a pod it admits
// while placement is on (nil otherwise): scheduling-gate gated or not-set,
// node-affinity not-set, and preferred-node-affinity not-set when a config
// applying to the pod has nodeAffinityScoring. The controller moves them
// on when it places the pod.
func admissionLabels(in admissionInput, gated bool) map[string]string {
	if in.config == nil || in.config.DeletionTimestamp != nil || isReservedNamespace(in.namespace, in.ownNamespace) {
		return nil
	}
	if sel := in.config.Spec.NamespaceSelector; sel != nil && in.namespaceLabels != nil {
		if s, err := metav1.LabelSelectorAsSelector(sel); err != nil || !s.Matches(in.namespaceLabels) {
			return nil
		}
	}
	l := map[string]string{placement.SchedulingGateLabel: placement.SchedulingGateLabelNotSet, placement.NodeAffinityLabel: placement.LabelValueNotSet}
	if gated {
		l[placement.SchedulingGateLabel] = placement.SchedulingGateLabelGated
	}
	if len(podcontroller.PolicyFor(in.pod, &in.config.Spec, in.local).Weights) > 0 {
		l[placement.PreferredNodeAffinityLabel] = placement.LabelValueNotSet
	}
	return l
}
