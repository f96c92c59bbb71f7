package main

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/controller"
)

// setupBuild adds the Build controller (pkg/build/controller), configured by the
// build section of --config.
func setupBuild(mgr ctrl.Manager, opts *options) error {
	cfg := &opts.config.Build
	if cfg.BuilderImage == "" {
		return fmt.Errorf("--config must set build.builderImage (the image of build pods)")
	}
	if err := refuseWhereOpenShiftServesBuilds(mgr); err != nil {
		return err
	}
	if cfg.PodSecurity == configv1alpha1.PodSecurityPrivileged {
		ctrl.Log.WithName("setup").Info("WARNING: build.podSecurity is Privileged: build pods run privileged in the host's user namespace, "+
			"and whoever may create a Build may run code as root on a node; every such pod carries the annotation "+controller.PodSecurityAnnotation+": Privileged",
			"podSecurity", cfg.PodSecurity)
	}
	store, err := opts.registryStore(mgr)
	if err != nil {
		return err
	}
	return controller.Setup(context.Background(), mgr, cfg, controller.Options{
		BaseInspector: newBaseInspector(store, &opts.config.Placement),
		// One registry configuration for placement and builds: the
		// plain-HTTP registries, and the mirrors and blocked registries
		// of the registries ConfigMap and the mirror sets.
		InsecureRegistries: opts.config.Placement.InsecureRegistries,
		Registries:         store,
	})
}
