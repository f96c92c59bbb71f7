package operator

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/archway-build/archway/pkg/placement"
)

// EventCRDOwnedByOLM is the Warning event on the ClusterPodPlacementConfig
// CRD when the operator refuses to run placement on a CRD OLM installed.
const EventCRDOwnedByOLM = "CRDOwnedByOLM"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// newCRDMetadata is the CRD's metadata, as the operator's cache holds it.
func newCRDMetadata() *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdGVK)
	return crd
}

// refuseOLMCRD reports whether the operator must leave placement alone:
// the ClusterPodPlacementConfig CRD is OLM's (the multiarch tuning
// operator's) and the administrator did not adopt it
// (placement.CRDRefusal). Then it starts nothing, stops nothing and
// writes nothing to the config, which is another operator's: it records a
// Warning event on the CRD that says what to do, once per version of the
// CRD.
func (r *reconciler) refuseOLMCRD(ctx context.Context) (bool, error) {
	crd := newCRDMetadata()
	err := r.cache.Get(ctx, types.NamespacedName{Name: placement.ClusterPodPlacementConfigCRDName}, crd)
	if apierrors.IsNotFound(err) {
		r.refused = ""
		return false, nil
	}
	if err != nil {
		return false, err
	}
	why := placement.CRDRefusal(crd)
	if why == "" {
		if r.refused != "" {
			log.FromContext(ctx).Info("the ClusterPodPlacementConfig CRD may be used now", "crd", crd.Name)
		}
		r.refused = ""
		return false, nil
	}
	// Once per version of the CRD: its status updates or the config's do
	// not repeat the event, a relabelling does.
	if seen := crd.ResourceVersion + " " + why; seen != r.refused {
		log.FromContext(ctx).Info("not running placement: " + why)
		crd.SetGroupVersionKind(crdGVK) // the event's reference
		r.recorder.Eventf(crd, nil, corev1.EventTypeWarning, EventCRDOwnedByOLM, "Refuse", "%s", why)
		r.refused = seen
	}
	return true, nil
}
