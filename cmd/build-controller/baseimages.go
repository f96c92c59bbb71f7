package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/platform"
)

// baseInspector reads base images' platforms for the Build controller's
// check before the fan-out with placement's inspector: containers/image,
// the registry rules of build pods (loopback registries without TLS
// checks), and a cache keyed by digest and credentials (a tag's digest is
// trusted for 30 s, a digest's platforms for an hour).
type baseInspector struct {
	inspector image.Inspector
}

func newBaseInspector() baseInspector {
	remote := image.NewRemote(image.RemoteOptions{Timeout: 10 * time.Second, UserAgent: "archway-build-controller"})
	return baseInspector{inspector: image.NewCache(remote, image.CacheOptions{TagTTL: 30 * time.Second, DigestTTL: time.Hour, Size: 1000})}
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
