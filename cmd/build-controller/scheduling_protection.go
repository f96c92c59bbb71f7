package main

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/archway-build/archway/pkg/scheduling/protection"
)

// setupControlPlaneProtection serves the control-plane protection webhook
// (pkg/scheduling/protection) on every replica; once the manager has
// stopped, the replica's last denials go into the status.
func setupControlPlaneProtection(mgr ctrl.Manager, opts *options) error {
	finish, err := protection.Setup(mgr, metrics.Registry)
	if err != nil {
		return err
	}
	opts.afterStop = append(opts.afterStop, finish)
	return nil
}
