package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/archway-build/archway/pkg/build/custom"
	"github.com/archway-build/archway/test/bed"
)

// CustomBuilderObject says whether u is one of the objects of
// manifests/openshift-builds that every custom pod needs:
// archway's namespace, build-controller's configuration, the Role that
// lets custom pods read it and the custom pods' ClusterRoles.
func CustomBuilderObject(u *unstructured.Unstructured) bool {
	switch u.GetKind() {
	case "Namespace":
		return true
	case "ConfigMap":
		return strings.HasPrefix(u.GetName(), "build-controller-config-")
	case "Role":
		return u.GetName() == custom.ConfigRole
	case "ClusterRole":
		return u.GetName() == "archway-custom-builder" || u.GetName() == "archway-custom-builder-nodes"
	}
	return false
}

// InstallCustomBuilderConfig creates the objects of manifests/openshift-builds
// that every custom pod needs (every custom pod reads build-controller's
// configuration, and refuses to start without it) and returns the name of
// the configuration's ConfigMap (build-controller-config-<hash>).
func InstallCustomBuilderConfig(ctx context.Context, c client.Client) (configMap string, err error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(bed.RepoRoot(), "manifests", "openshift-builds"))
	if err != nil {
		return "", err
	}
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			return "", err
		}
		u := &unstructured.Unstructured{Object: obj}
		if !CustomBuilderObject(u) {
			continue
		}
		if u.GetKind() == "ConfigMap" {
			configMap = u.GetName()
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	if configMap == "" {
		return "", fmt.Errorf("manifests/openshift-builds has no build-controller-config ConfigMap")
	}
	return configMap, nil
}
