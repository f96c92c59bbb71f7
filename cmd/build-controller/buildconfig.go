package main

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/archway-build/archway/pkg/build/buildconfig"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/webhook"
)

// newStarter is the Starter of a component, counting into the process's
// archway_buildconfig_builds_started_total.
func newStarter(mgr ctrl.Manager) (*instantiate.Starter, error) {
	starter := instantiate.NewStarter(mgr.GetClient(), mgr.GetAPIReader())
	starter.Metrics = instantiate.NewMetrics()
	if err := starter.Metrics.Register(crmetrics.Registry); err != nil {
		return nil, fmt.Errorf("registering the BuildConfig metrics: %w", err)
	}
	return starter, nil
}

// setupBuildConfig adds the BuildConfig controller (leader only).
func setupBuildConfig(mgr ctrl.Manager, _ *options) error {
	starter, err := newStarter(mgr)
	if err != nil {
		return err
	}
	return buildconfig.Setup(mgr, starter, buildconfig.Options{})
}

// setupBuildConfigWebhooks serves the SCM webhook triggers on every replica
// from the webhook server (--webhook-port, TLS from --webhook-cert-dir)
// under /apis/build.openshift.io/v1/namespaces/.
func setupBuildConfigWebhooks(mgr ctrl.Manager, _ *options) error {
	starter, err := newStarter(mgr)
	if err != nil {
		return err
	}
	m := webhook.NewMetrics()
	if err := m.Register(crmetrics.Registry); err != nil {
		return fmt.Errorf("registering the webhook metrics: %w", err)
	}
	mgr.GetWebhookServer().Register(webhook.PathPrefix, webhook.NewHandler(mgr.GetAPIReader(), starter, m))
	return nil
}
