package main

import (
	"time"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/placement/registries"
)

// newBaseInspector reads base images' platforms for the Build controller's
// check before the fan-out with placement's inspector and placement's
// registry settings: the watched registry configuration (mirrors, blocked
// and insecure registries, CAs; a loopback registry is verified like any
// other, as nodes do) and placement's time limit per image
// (placement.inspection.timeout), behind a cache keyed by digest and
// credentials (a tag's digest is trusted for 30 s, a digest's platforms
// for an hour) that a new registry configuration empties.
func newBaseInspector(store *registries.Store, cfg *configv1alpha1.PlacementConfig) image.SecretInspector {
	o := placementOptions(cfg).WithDefaults()
	remote := image.NewRemote(image.RemoteOptions{
		InsecureRegistries: o.InsecureRegistries,
		Registries:         store,
		Timeout:            o.InspectionTimeout,
		UserAgent:          "archway-build-controller",
	})
	cache := image.NewCache(remote, image.CacheOptions{TagTTL: 30 * time.Second, DigestTTL: time.Hour, Size: 1000})
	store.Subscribe(func(*registries.Settings) { cache.Purge() })
	return image.SecretInspector{Inspector: cache}
}
