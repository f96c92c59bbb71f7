package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	archwaybuildv1alpha1 "github.com/archway-build/archway/pkg/apis/archwaybuild/v1alpha1"
	"github.com/archway-build/archway/pkg/build/custom"
	"github.com/archway-build/archway/pkg/build/custombuilds"
	"github.com/archway-build/archway/test/bed"
)

// CustomBuildsWebhookObject says whether u is one of the objects of
// manifests/openshift-builds/webhook, which run build-controller's
// custom-builds-webhook in pods of the cluster and point OpenShift's API
// at them: a suite runs the webhook itself (bed.Bed.StartWebhooks with
// bed.CustomBuildsWebhookConfiguration, or bed.Bed.StartCustomBuildsWebhook).
func CustomBuildsWebhookObject(u *unstructured.Unstructured) bool {
	if u.GetKind() == "ValidatingWebhookConfiguration" {
		return u.GetName() == custombuilds.WebhookConfigurationName
	}
	return strings.HasPrefix(u.GetName(), custombuilds.WebhookConfigurationName) &&
		slices.Contains([]string{"Deployment", "PodDisruptionBudget", "Service", "ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding"}, u.GetKind())
}

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

// OpenShiftBuilds is OpenShift's Build resource.
var OpenShiftBuilds = schema.GroupVersionResource{Group: "build.openshift.io", Version: "v1", Resource: "builds"}

// OpenShiftBuildPhase returns the phase of OpenShift's Build ns/name.
func OpenShiftBuildPhase(ctx context.Context, dyn dynamic.Interface, ns, name string) (string, error) {
	b, err := dyn.Resource(OpenShiftBuilds).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
	return phase, nil
}

// GetMultiArchBuild returns the MultiArchBuild the custom builder keeps for
// OpenShift's Build ns/name.
func GetMultiArchBuild(ctx context.Context, dyn dynamic.Interface, ns, name string) (*archwaybuildv1alpha1.MultiArchBuild, error) {
	u, err := dyn.Resource(archwaybuildv1alpha1.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	m := &archwaybuildv1alpha1.MultiArchBuild{}
	return m, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, m)
}
