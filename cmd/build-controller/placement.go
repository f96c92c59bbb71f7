package main

import (
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/placement"
)

// setupPlacementWebhook serves the scheduling-gate webhook (pkg/placement)
// on every replica.
func setupPlacementWebhook(mgr ctrl.Manager, opts *options) error {
	return placement.SetupWebhook(mgr, placementOptions(&opts.config.Placement), metrics.Registry)
}

// setupPodPlacement runs the pod placement and config controllers
// (pkg/placement) on the leader.
func setupPodPlacement(mgr ctrl.Manager, opts *options) error {
	return placement.SetupController(mgr, placementOptions(&opts.config.Placement), metrics.Registry)
}

// placementOptions maps the placement section of --config onto
// placement.Options; zero values keep placement's defaults.
func placementOptions(cfg *configv1alpha1.PlacementConfig) placement.Options {
	o := placement.Options{
		Namespace:          os.Getenv("POD_NAMESPACE"),
		InsecureRegistries: cfg.InsecureRegistries,
		RegistriesConfPath: cfg.RegistriesConfPath,
		InspectionTries:    int(cfg.Inspection.Tries),
		InspectionBackoff:  duration(cfg.Inspection.Backoff),
		InspectionDeadline: duration(cfg.Inspection.Deadline),
		InspectionTimeout:  duration(cfg.Inspection.Timeout),
		DigestCacheTTL:     duration(cfg.Cache.DigestTTL),
		TagCacheTTL:        duration(cfg.Cache.TagTTL),
		CacheSize:          int(cfg.Cache.Size),
		Workers:            int(cfg.Workers),
	}
	o.InspectionMaxBackoff = duration(cfg.Inspection.MaxBackoff)
	if o.Namespace == "" {
		o.Namespace = podNamespace()
	}
	if ref := cfg.GlobalPullSecret; ref != nil {
		o.GlobalPullSecret = types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	}
	return o
}

func duration(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
