// Package conversion serves the conversion webhook of the
// ClusterPodPlacementConfig CRD, which the apiserver calls to convert
// between v1alpha1 and v1beta1 (the stored version), as the multiarch
// tuning operator's CRD does. The conversion itself is the API types'
// (pkg/apis/multiarch/v1alpha1's conversion.go, v1beta1 the hub); this
// package registers it with the webhook server at Path and, with
// build-controller's own certificates, writes their CA into the CRD
// (ca_injection.go).
//
// It runs in the placement operator's process, the one placement component
// that runs whether or not the config exists: the apiserver needs the
// webhook to create a config through v1alpha1, before anything else of
// placement runs.
package conversion

import (
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// Path is where the conversion webhook is served: controller-runtime's,
// which the CRD's spec.conversion names (manifests/crd).
const Path = "/convert"

// Setup registers the conversion webhook of ClusterPodPlacementConfig and,
// when inject is set, the writer of the CA into the CRD. The manager's
// scheme must hold both versions: with v1beta1 alone controller-runtime
// would skip the webhook silently.
func Setup(mgr ctrl.Manager, inject *CAInjection) error {
	cppc := &multiarchv1beta1.ClusterPodPlacementConfig{}
	ok, err := conversion.IsConvertible(mgr.GetScheme(), cppc)
	if err != nil {
		return fmt.Errorf("the ClusterPodPlacementConfig conversion: %w", err)
	}
	if !ok {
		return errors.New("the ClusterPodPlacementConfig conversion: the scheme lacks multiarch.openshift.io/v1alpha1")
	}
	if err := ctrl.NewWebhookManagedBy(mgr, cppc).Complete(); err != nil {
		return err
	}
	if inject == nil {
		return nil
	}
	return setupCAInjection(mgr, *inject)
}
