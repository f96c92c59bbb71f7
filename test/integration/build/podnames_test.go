package build

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestPodNamesDoNotCollide runs, side by side in one namespace, Build app
// for linux/amd64 and linux/arm64 and the classic Builds whose names end
// like app's platform pods: app-linux-amd64, whose pod was app's amd64 pod's
// name (app-linux-amd64-build) before names were made collision-free, and
// app-build-linux-amd64. Every Build gets all its pods, each owned by it;
// none fails with BuildPodExists.
func TestPodNamesDoNotCollide(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "podnames")
	h.cfg = testConfig(nil)
	h.ctrl = startController(t, h.ns, h.cfg)
	classics := []string{"app-linux-amd64", "app-build-linux-amd64"}
	for _, name := range classics {
		b := h.buildObj(name)
		b.Spec.NodeSelector = buildv1.OptionalNodeSelector{corev1.LabelArchStable: "amd64"}
		h.create(b)
		h.waitPodNames(buildv1.ClassicPodName(name))
	}
	h.create(h.buildObj("app", amd64, arm64))
	wantPlatformPods(amd64, arm64).do(h)
	for _, name := range append(classics, "app") {
		h.build = name
		b := h.get()
		if b.Status.Phase.IsTerminal() {
			t.Errorf("Build %s ended: %s %s", name, b.Status.Reason, b.Status.Message)
		}
		for _, e := range b.Status.Platforms {
			if e.Reason == buildv1.StatusReasonCannotCreateBuildPod || e.Reason == buildv1.StatusReasonBuildPodExists {
				t.Errorf("Build %s platform %s: %s %s", name, e.Platform, e.Reason, e.Message)
			}
		}
		for podName, pod := range h.pods() {
			if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != b.UID {
				t.Errorf("pod %s, labelled for Build %s, is not owned by it", podName, name)
			}
		}
	}
}
