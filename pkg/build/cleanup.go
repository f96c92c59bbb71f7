package build

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// Cleanup is what a multi-platform Build that ended without a manifest list
// (Failed, Error or Cancelled) still owes its output repository: the
// per-platform tags its platform pods may have pushed are removed by the
// manifest-list pod, which untags them when it finds the Build ended.
//
// The pod is created only once every platform pod has ended (terminated, or
// deleted and gone): a platform pod still running when the Build failed may
// finish its push after any earlier removal, and nothing would remove its
// tag then. Once no platform pod runs, nothing can push again.
type Cleanup struct {
	// Create asks for the manifest-list pod now.
	Create bool
	// WaitingFor are the platform pods that have not ended yet, sorted.
	WaitingFor []string
}

// NeedsCleanup reports whether b is a Build that ended without a manifest
// list after its platform pods were created, and whose manifest-list pod
// has not been created: the only Builds DecideCleanup is asked about. It
// looks at the Build alone, so that the controller reads no pods for the
// many Builds that need nothing.
func NeedsCleanup(b *buildv1.Build, manifestList bool) bool {
	switch b.Status.Phase {
	case buildv1.BuildPhaseFailed, buildv1.BuildPhaseError, buildv1.BuildPhaseCancelled:
	default:
		return false
	}
	// The pod-name annotation names the manifest-list pod from the moment
	// the platform pods are created: without it no pod ever pushed.
	return manifestList && b.Annotations[buildv1.BuildPodNameAnnotation] == ManifestListPodName(b.Name)
}

// DecideCleanup says whether to create the manifest-list pod of an ended
// Build that NeedsCleanup, given its platforms and its pods by name: not
// when the manifest-list pod exists (it removes the tags itself, and runs
// only after every platform ended), not while a platform pod has not ended,
// else yes.
func DecideCleanup(b *buildv1.Build, platforms []string, pods map[string]*corev1.Pod) Cleanup {
	if _, ok := pods[ManifestListPodName(b.Name)]; ok {
		return Cleanup{}
	}
	var waiting []string
	for _, p := range platforms {
		if pod, ok := pods[PlatformPodName(b.Name, p)]; ok && !podTerminal(pod) {
			waiting = append(waiting, pod.Name)
		}
	}
	slices.Sort(waiting)
	return Cleanup{Create: len(waiting) == 0, WaitingFor: waiting}
}
