package main

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/archway-build/archway/pkg/build"
)

// setupBuild adds the Build controller (pkg/build), configured by the
// build section of --config.
func setupBuild(mgr ctrl.Manager, opts *options) error {
	cfg := &opts.config.Build
	if cfg.BuilderImage == "" {
		return fmt.Errorf("--config must set build.builderImage (the image of build pods)")
	}
	return build.Setup(context.Background(), mgr, cfg, build.Options{})
}
