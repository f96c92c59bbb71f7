package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// HasGate reports whether the pod carries the scheduling gate.
func HasGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == SchedulingGate
	})
}

// AddGate adds the scheduling gate once.
func AddGate(pod *corev1.Pod) {
	if !HasGate(pod) {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: SchedulingGate})
	}
}

// RemoveGate removes the scheduling gate and leaves other gates alone.
func RemoveGate(pod *corev1.Pod) {
	pod.Spec.SchedulingGates = slices.DeleteFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == SchedulingGate
	})
	if len(pod.Spec.SchedulingGates) == 0 {
		pod.Spec.SchedulingGates = nil
	}
}

// SetLabel sets a pod label, creating the map when needed.
func SetLabel(pod *corev1.Pod, key, value string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[key] = value
}

// Gate adds the scheduling gate and the gated label to pod.
func Gate(pod *corev1.Pod) {
	AddGate(pod)
	SetLabel(pod, SchedulingGateLabel, SchedulingGateLabelGated)
}
