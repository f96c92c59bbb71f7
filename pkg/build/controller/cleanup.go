package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildv1ac "github.com/archway-build/archway/pkg/apis/build/v1/applyconfiguration/build/v1"
)

// Cleanup is what a multi-platform Build that ended without a manifest list
// (Failed, Error or Cancelled) still owes its output repository: the
// per-platform tags its platform pods may have pushed are removed by a
// manifest-list pod started with RemoveTagsArg, which untags them.
//
// That pod is created only once every platform pod has ended (terminated,
// or deleted and gone): a platform pod still running when the Build failed
// may finish its push after any earlier removal, and nothing would remove
// its tag then. Once no platform pod runs, nothing can push again. The
// manifest-list pod started with the platform pods, which removes nothing
// when the Build ends without a manifest list, holds the name: it is
// deleted, and the new pod made once it is gone.
type Cleanup struct {
	// Create asks for the manifest-list pod that removes the tags now.
	Create bool
	// Replace is the manifest-list pod started with the platform pods, to
	// delete (nil: none, or already being deleted).
	Replace *corev1.Pod
	// WaitingFor are the pods that have not ended (or gone) yet, sorted.
	WaitingFor []string
}

// NeedsCleanup reports whether b is a Build that ended without a manifest
// list after its platform pods were created: the only Builds DecideCleanup
// is asked about. It looks at the Build alone, so that the controller reads
// no pods for the many Builds that need nothing.
func NeedsCleanup(b *buildv1.Build, manifestList bool) bool {
	switch b.Status.Phase {
	case buildv1.BuildPhaseFailed, buildv1.BuildPhaseError, buildv1.BuildPhaseCancelled:
	default:
		return false
	}
	// The pod-name annotation names the manifest-list pod from the moment
	// the platform pods are created: without it no pod ever pushed.
	return manifestList && b.Annotations[buildv1.BuildPodNameAnnotation] == buildv1.ManifestListPodName(b.Name)
}

// DecideCleanup says whether to create the manifest-list pod that removes
// the tags of an ended Build that NeedsCleanup, given its platforms and its
// pods by name: not when that pod exists (it removes the tags itself), not
// while a platform pod has not ended, not while the manifest-list pod
// started with the platform pods exists (Replace asks to delete it), else
// yes.
func DecideCleanup(b *buildv1.Build, platforms []string, pods map[string]*corev1.Pod) Cleanup {
	var c Cleanup
	if ml, ok := pods[buildv1.ManifestListPodName(b.Name)]; ok {
		if RemovesTags(ml) {
			return Cleanup{}
		}
		if ml.DeletionTimestamp == nil {
			c.Replace = ml
		}
		c.WaitingFor = append(c.WaitingFor, ml.Name)
	}
	for _, p := range platforms {
		if pod, ok := pods[buildv1.PlatformPodName(b.Name, p)]; ok && !podTerminal(pod) {
			c.WaitingFor = append(c.WaitingFor, pod.Name)
		}
	}
	slices.Sort(c.WaitingFor)
	c.Create = len(c.WaitingFor) == 0
	return c
}

// RemovesTags reports whether pod is a manifest-list pod started, after
// its Build ended, to remove the per-platform tags (RemoveTagsArg).
func RemovesTags(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if slices.Contains(c.Command, RemoveTagsArg) || slices.Contains(c.Args, RemoveTagsArg) {
			return true
		}
	}
	return false
}

// TagsConditionApply is the status apply (under CleanupFieldManager) that
// sets an ended Build's PlatformTagsRemoved condition, with podUID, when
// set, the pod that removes the tags (it writes its outcome only once its
// UID is in status.podUID); nil when the Build already says so.
func TagsConditionApply(b *buildv1.Build, status metav1.ConditionStatus, reason, msg, podUID string, now metav1.Time) *buildv1ac.BuildApplyConfiguration {
	transition := now
	for _, c := range b.Status.Conditions {
		if c.Type != buildv1.BuildConditionPlatformTagsRemoved {
			continue
		}
		if string(c.Status) == string(status) && c.Reason == reason && c.Message == msg && (podUID == "" || b.Status.PodUID == podUID) {
			return nil
		}
		if string(c.Status) == string(status) && !c.LastTransitionTime.IsZero() {
			transition = c.LastTransitionTime
		}
	}
	st := buildv1ac.BuildStatus().WithConditions(buildv1ac.BuildCondition().
		WithType(buildv1.BuildConditionPlatformTagsRemoved).WithStatus(corev1.ConditionStatus(status)).WithReason(reason).
		WithMessage(msg).WithLastUpdateTime(now).WithLastTransitionTime(transition))
	// status.podUID is sent with every apply once this manager has written
	// it: server-side apply removes a field its manager stops sending.
	if podUID == "" {
		podUID = b.Status.PodUID
	}
	if podUID != "" {
		st.WithPodUID(podUID)
	}
	return buildv1ac.Build(b.Name, b.Namespace).WithStatus(st)
}
