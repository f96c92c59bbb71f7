package main

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// refuseWhereOpenShiftServesBuilds keeps archway's build components from
// running where OpenShift's own API serves build.openshift.io: there the
// build half is the custom-builder mode (manifests/openshift-builds), and
// archway's CRDs, if applied, are shadowed.
func refuseWhereOpenShiftServesBuilds(mgr ctrl.Manager) error {
	d, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	return refuseWhereOpenShiftServes(d)
}

// openshiftOnly are subresources of build.openshift.io/v1 that only
// OpenShift's own API server serves: a CustomResourceDefinition cannot.
var openshiftOnly = []string{"builds/details", "builds/log", "builds/clone", "buildconfigs/instantiate", "buildconfigs/instantiatebinary"}

// ServedByOpenShift reports whether the resources of build.openshift.io/v1,
// as discovery lists them, are OpenShift's own API (its Build capability
// on) rather than archway's CRDs: they include a subresource only
// openshift-apiserver serves.
func ServedByOpenShift(resources []metav1.APIResource) bool {
	for _, r := range resources {
		for _, name := range openshiftOnly {
			if r.Name == name {
				return true
			}
		}
	}
	return false
}

// ErrOpenShiftServesBuilds is the refusal of archway's build components on
// a cluster where OpenShift serves build.openshift.io.
var ErrOpenShiftServesBuilds = errors.New("OpenShift serves build.openshift.io on this cluster (its Build capability is on): " +
	"archway's Build and BuildConfig CRDs would be shadowed by its API and archway's build controllers would fight OpenShift's. " +
	"Install the custom-builder mode instead (oc apply --server-side -k manifests/openshift-builds; " +
	"see docs/admin-guide/openshift-builds.md) and run build-controller without its build components (--controllers)")

// refuseWhereOpenShiftServes returns ErrOpenShiftServesBuilds when
// discovery shows OpenShift's build API, nil when build.openshift.io is
// archway's or not served at all.
func refuseWhereOpenShiftServes(d discovery.ServerResourcesInterface) error {
	list, err := d.ServerResourcesForGroupVersion(buildv1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading which API serves %s: %w", buildv1.GroupVersion, err)
	case ServedByOpenShift(list.APIResources):
		return ErrOpenShiftServesBuilds
	}
	return nil
}
