package main

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/archway-build/archway/pkg/scheduling/protection"
)

// setupControlPlaneProtection serves the control-plane protection webhook
// (pkg/scheduling/protection) on every replica.
func setupControlPlaneProtection(mgr ctrl.Manager, _ *options) error {
	return protection.Setup(mgr, metrics.Registry)
}
