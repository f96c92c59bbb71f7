package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// ConfigureCache narrows the manager's cache to what the Build controller
// reads, so that its memory follows the Builds, not the cluster: pods
// carrying the openshift.io/build.name label only, without their managed
// fields, and Nodes trimmed to what platform resolution reads (TrimNode).
// Builds keep their managed fields: status writes extract the controller's
// own fields from them. The pod selector holds for every reader of the
// manager's cache: a component that needs other pods uses a cache of its
// own (as placement does).
func ConfigureCache(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.Node{}] = cache.ByObject{Transform: TrimNode}
	o.ByObject[&corev1.Pod{}] = cache.ByObject{Label: buildPodSelector(), Transform: cache.TransformStripManagedFields()}
}

// buildPodSelector selects every build's pods.
func buildPodSelector() labels.Selector {
	req, err := labels.NewRequirement(buildv1.BuildLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	return labels.NewSelector().Add(*req)
}
