package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestAwaitPushSecret(t *testing.T) {
	const missing = `spec.output.pushSecret names Secret "push", which does not exist`
	cases := []struct {
		name      string
		phase     buildv1.BuildPhase
		pods      map[string]*corev1.Pod
		planPhase buildv1.BuildPhase
		want      buildv1.BuildPhase
	}{
		{"no pod yet: the Build stays New", buildv1.BuildPhaseNew, nil, buildv1.BuildPhasePending, buildv1.BuildPhaseNew},
		{"a Build never started becomes New", "", nil, buildv1.BuildPhasePending, buildv1.BuildPhaseNew},
		{"with pods: the plan's phase holds", buildv1.BuildPhaseRunning,
			map[string]*corev1.Pod{"app-build-linux-amd64": {}}, buildv1.BuildPhaseRunning, buildv1.BuildPhaseRunning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := PlanInput{Build: &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Name: "app"},
				Status: buildv1.BuildStatus{Phase: tc.phase}}, Pods: tc.pods}
			plan := Plan{Phase: tc.planPhase, CreatePods: []string{"linux/arm64"}, CreateManifestList: true, DeletePods: []string{"old"}}
			got := awaitPushSecret(in, plan, missing)
			if len(got.CreatePods) != 0 || got.CreateManifestList {
				t.Errorf("creates %v (manifest list %v), want none", got.CreatePods, got.CreateManifestList)
			}
			if got.Phase != tc.want {
				t.Errorf("phase %q, want %q", got.Phase, tc.want)
			}
			if got.Reason != buildv1.StatusReasonMissingPushSecret || got.Message != missing {
				t.Errorf("reason %q message %q, want %q %q", got.Reason, got.Message, buildv1.StatusReasonMissingPushSecret, missing)
			}
			if len(got.DeletePods) != 1 {
				t.Errorf("deletes %v, want the plan's", got.DeletePods)
			}
		})
	}
}
