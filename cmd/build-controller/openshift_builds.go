package main

import (
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/archway-build/archway/pkg/build/custom"
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
	return custom.RefuseWhereOpenShiftServesBuilds(d)
}
