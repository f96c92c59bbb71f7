package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// hasGate reports whether the pod carries the scheduling gate.
func hasGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == SchedulingGate
	})
}

// addGate adds the scheduling gate once.
func addGate(pod *corev1.Pod) {
	if !hasGate(pod) {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: SchedulingGate})
	}
}

// removeGate removes the scheduling gate and leaves other gates alone.
func removeGate(pod *corev1.Pod) {
	pod.Spec.SchedulingGates = slices.DeleteFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == SchedulingGate
	})
	if len(pod.Spec.SchedulingGates) == 0 {
		pod.Spec.SchedulingGates = nil
	}
}

// setLabel sets a pod label, creating the map when needed.
func setLabel(pod *corev1.Pod, key, value string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[key] = value
}

// gate adds the scheduling gate and the gated label to pod.
func gate(pod *corev1.Pod) {
	addGate(pod)
	setLabel(pod, SchedulingGateLabel, SchedulingGateLabelGated)
}
