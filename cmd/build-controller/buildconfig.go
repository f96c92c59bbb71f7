package main

import (
	"fmt"
	"net/http"

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/archway-build/archway/pkg/build/buildconfig"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/binary"
	"github.com/archway-build/archway/pkg/build/trigger/scm"
	"github.com/archway-build/archway/pkg/registry"
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

// setupBuildConfigWebhooks serves the SCM webhook triggers and the
// binary-build endpoint (buildconfigs/{name}/instantiatebinary) on every
// replica from the webhook server (--webhook-port, TLS from
// --webhook-cert-dir) under /apis/build.openshift.io/v1/namespaces/.
func setupBuildConfigWebhooks(mgr ctrl.Manager, _ *options) error {
	starter, err := newStarter(mgr)
	if err != nil {
		return err
	}
	m := scm.NewMetrics()
	if err := m.Register(crmetrics.Registry); err != nil {
		return fmt.Errorf("registering the webhook metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(binary.Pattern, &binary.Handler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Starter: starter,
		Access: registry.Access{UserAgent: "archway-build-controller"},
	})
	mux.Handle(scm.PathPrefix, scm.NewHandler(mgr.GetAPIReader(), starter, m))
	mgr.GetWebhookServer().Register(scm.PathPrefix, mux)
	return nil
}
