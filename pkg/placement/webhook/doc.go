// Package webhook is placement's gate webhook, served by every replica: it
// gates new pods (admission.go decides which) while a
// ClusterPodPlacementConfig exists and a placement controller's heartbeat
// is fresh, reports the gate with an event once the pod is persisted
// (gate_events.go), and validates PodPlacementConfigs and the
// ClusterPodPlacementConfig's deletion (validation.go). It reads only
// informer caches. Setup registers it with a manager.
package webhook
