package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/pkg/platform"
)

// baseInspector reads base images' platforms for the Build controller's
// check before the fan-out with placement's inspector and placement's
// registry settings: the watched registry configuration (mirrors, blocked
// and insecure registries, CAs; a loopback registry is verified like any
// other, as nodes do) and placement's time limit per image
// (placement.inspection.timeout), behind a cache keyed by digest and
// credentials (a tag's digest is trusted for 30 s, a digest's platforms
// for an hour) that a new registry configuration empties.
type baseInspector struct {
	inspector image.Inspector
}

func newBaseInspector(store *registries.Store, cfg *configv1alpha1.PlacementConfig) baseInspector {
	o := placementOptions(cfg).WithDefaults()
	remote := image.NewRemote(image.RemoteOptions{
		InsecureRegistries: o.InsecureRegistries,
		Registries:         store,
		Timeout:            o.InspectionTimeout,
		UserAgent:          "archway-build-controller",
	})
	cache := image.NewCache(remote, image.CacheOptions{TagTTL: 30 * time.Second, DigestTTL: time.Hour, Size: 1000})
	store.Subscribe(func(*registries.Settings) { cache.Purge() })
	return baseInspector{inspector: cache}
}

// BasePlatforms inspects ref with the credentials of a docker config
// secret's data (none: anonymous).
func (b baseInspector) BasePlatforms(ctx context.Context, ref, secretType string, data []byte) ([]platform.Platform, error) {
	keys := &image.Keyring{}
	var err error
	switch corev1.SecretType(secretType) {
	case corev1.SecretTypeDockerConfigJson:
		err = keys.AddDockerConfigJSON(data)
	case corev1.SecretTypeDockercfg:
		err = keys.AddDockercfg(data)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the pull secret: %w", err)
	}
	ps, _, err := b.inspector.Architectures(ctx, image.Reference{Name: ref}, keys.Lookup(ref))
	return ps, err
}
