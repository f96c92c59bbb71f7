package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestNeedsCleanup(t *testing.T) {
	fannedOut := func(w *buildWrapper) *buildWrapper {
		w.Annotations = map[string]string{buildv1.BuildPodNameAnnotation: podML}
		return w
	}
	tests := []struct {
		name         string
		build        *buildv1.Build
		manifestList bool
		want         bool
	}{
		{"failed after its pods were made", fannedOut(entries4(makeBuild("app").phase(failedP), failedP)).obj(), true, true},
		{"error after its pods were made", fannedOut(entries4(makeBuild("app").phase(errorP), errorP)).obj(), true, true},
		{"cancelled after its pods were made", fannedOut(entries4(makeBuild("app").phase(cancelledP), cancelledP)).obj(), true, true},
		{"complete: the manifest-list pod untagged", fannedOut(entries4(makeBuild("app").phase(completeP), completeP)).obj(), true, false},
		{"running: not ended", fannedOut(entries4(makeBuild("app").phase(runningP), runningP)).obj(), true, false},
		{"failed before any pod was made", entries4(makeBuild("app").phase(errorP), errorP).obj(), true, false},
		{"no manifest list: the platform tags are the outputs", fannedOut(entries4(makeBuild("app").phase(failedP), failedP)).obj(), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsCleanup(tt.build, tt.manifestList); got != tt.want {
				t.Errorf("NeedsCleanup = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecideCleanup(t *testing.T) {
	b := entries4(makeBuild("app").phase(failedP), failedP).obj()
	tests := []struct {
		name    string
		pods    map[string]*corev1.Pod
		create  bool
		replace bool
		waiting []string
	}{
		{
			name:   "every platform pod ended: create the manifest-list pod",
			pods:   podsOf(makePod(podAmd).exited(0, "", "").obj(), makePod(podArm).exited(137, "", "").obj(), makePod(podS390x).exited(1, "", "").obj()),
			create: true,
		},
		{
			name:   "every platform pod gone: create it",
			create: true,
		},
		{
			name:    "a deleted pod that still runs may still push: wait for it",
			pods:    podsOf(makePod(podAmd).running().deleting().obj(), makePod(podS390x).exited(1, "", "").obj()),
			waiting: []string{podAmd},
		},
		{
			name:    "pending and running pods: wait for each",
			pods:    podsOf(makePod(podPpc).obj(), makePod(podArm).running().obj(), makePod(podS390x).exited(1, "", "").obj()),
			waiting: []string{podArm, podPpc},
		},
		{
			name: "the pod that removes the tags exists: it removes them itself",
			pods: podsOf(removeTags(makePod(podML).exited(1, "", "").obj())),
		},
		{
			name: "the pod that removes the tags exists while a platform pod runs: nothing",
			pods: podsOf(removeTags(makePod(podML).running().obj()), makePod(podAmd).running().obj()),
		},
		{
			name:    "the manifest-list pod started with the platforms still waits: replaced, once it and the platform pods are gone",
			pods:    podsOf(makePod(podML).running().obj(), makePod(podAmd).running().obj()),
			replace: true,
			waiting: []string{podAmd, podML},
		},
		{
			name:    "the manifest-list pod started with the platforms ended (it removed nothing): replaced",
			pods:    podsOf(makePod(podML).exited(0, "", "").obj(), makePod(podAmd).exited(0, "", "").obj()),
			replace: true,
			waiting: []string{podML},
		},
		{
			name:    "the manifest-list pod started with the platforms being deleted: wait until it is gone",
			pods:    podsOf(makePod(podML).running().deleting().obj()),
			waiting: []string{podML},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideCleanup(b, four, tt.pods)
			if got.Create != tt.create || !slices.Equal(got.WaitingFor, tt.waiting) || (got.Replace != nil) != tt.replace {
				t.Errorf("DecideCleanup = create %v replace %v waiting %v, want create %v replace %v waiting %v",
					got.Create, got.Replace != nil, got.WaitingFor, tt.create, tt.replace, tt.waiting)
			}
			if got.Replace != nil && got.Replace.Name != podML {
				t.Errorf("replace %s, want %s", got.Replace.Name, podML)
			}
		})
	}
}

// removeTags makes pod the manifest-list pod started to remove the tags.
func removeTags(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.Containers = []corev1.Container{{Name: ManifestListContainerName, Command: []string{"builder", "manifest-list", RemoveTagsArg}}}
	return pod
}
