package main

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/archway-build/archway/pkg/scheduling/policy"
)

// setupSchedulingPolicyWebhook serves the scheduling-policy webhooks
// (pkg/scheduling/policy) on every replica; each replica adds what it
// applied to the policies' status.
func setupSchedulingPolicyWebhook(mgr ctrl.Manager, _ *options) error {
	_, err := policy.SetupWebhook(mgr, policy.Options{}, metrics.Registry)
	return err
}
