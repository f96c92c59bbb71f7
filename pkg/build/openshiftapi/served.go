// Package openshiftapi tells whether OpenShift's own API server serves
// build.openshift.io on a cluster (its Build capability on) rather than
// archway's CRDs or nothing. There, archway's build half is the
// custom-builder mode (manifests/openshift-builds): build-controller
// refuses its build components and kubectl archway install installs that
// mode, never a CRD of build.openshift.io, which OpenShift's API would
// shadow.
package openshiftapi

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// Group is the API group in question.
const Group = "build.openshift.io"

// openshiftOnly are subresources of build.openshift.io/v1 that only
// openshift-apiserver serves: a CustomResourceDefinition cannot.
var openshiftOnly = []string{"builds/details", "builds/log", "builds/clone", "buildconfigs/instantiate", "buildconfigs/instantiatebinary"}

// ServedByOpenShift reports whether the resources of build.openshift.io/v1,
// as discovery lists them, are OpenShift's own API: they include a
// subresource only openshift-apiserver serves.
func ServedByOpenShift(resources []metav1.APIResource) bool {
	return slices.ContainsFunc(resources, func(r metav1.APIResource) bool { return slices.Contains(openshiftOnly, r.Name) })
}

// Serves reports whether OpenShift serves build.openshift.io on the
// cluster d discovers: false where the group is archway's CRDs or not
// served at all. Every authenticated user may read discovery.
func Serves(d discovery.ServerResourcesInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(buildv1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading which API serves %s: %w", buildv1.GroupVersion, err)
	}
	return ServedByOpenShift(list.APIResources), nil
}
