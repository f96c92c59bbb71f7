package image

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/archway-build/archway/pkg/platform"
)

// SecretInspector reads images' platforms with the credentials of a docker
// config secret, as build-controller's check of a Build's base images
// before the fan-out asks for them (pkg/build/controller's BaseInspector).
type SecretInspector struct {
	Inspector Inspector
}

// BasePlatforms inspects ref with the credentials of a docker config
// secret's data, of type kubernetes.io/dockerconfigjson or
// kubernetes.io/dockercfg (any other, or none: anonymous).
func (s SecretInspector) BasePlatforms(ctx context.Context, ref, secretType string, data []byte) ([]platform.Platform, error) {
	keys := &Keyring{}
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
	ps, _, err := s.Inspector.Architectures(ctx, Reference{Name: ref}, keys.Lookup(ref))
	return ps, err
}
