package main

import (
	"errors"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/archway-build/archway/pkg/build/openshiftapi"
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
	served, err := openshiftapi.Serves(d)
	if err != nil {
		return err
	}
	if served {
		return ErrOpenShiftServesBuilds
	}
	return nil
}

// ErrOpenShiftServesBuilds is the refusal of archway's build components on
// a cluster where OpenShift serves build.openshift.io.
var ErrOpenShiftServesBuilds = errors.New("OpenShift serves build.openshift.io on this cluster (its Build capability is on): " +
	"archway's Build and BuildConfig CRDs would be shadowed by its API and archway's build controllers would fight OpenShift's. " +
	"Install the custom-builder mode instead (kubectl archway install, or oc apply --server-side -k manifests/openshift-builds; " +
	"see docs/admin-guide/openshift-builds.md) and run build-controller without its build components (--controllers)")
