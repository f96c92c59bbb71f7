package buildconfig

import (
	"reflect"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func bc(policy buildv1.BuildRunPolicy, lastVersion int64, triggers ...buildv1.BuildTriggerType) *buildv1.BuildConfig {
	c := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	c.Spec.RunPolicy = policy
	c.Status.LastVersion = lastVersion
	for _, t := range triggers {
		c.Spec.Triggers = append(c.Spec.Triggers, buildv1.BuildTriggerPolicy{Type: t})
	}
	return c
}

func b(n int, phase buildv1.BuildPhase) buildv1.Build {
	return buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "app-" + strconv.Itoa(n),
			Labels:      map[string]string{buildv1.BuildConfigLabel: "app"},
			Annotations: map[string]string{buildv1.BuildNumberAnnotation: strconv.Itoa(n), buildv1.BuildConfigAnnotation: "app"},
		},
		Status: buildv1.BuildStatus{Phase: phase},
	}
}

func TestDecide(t *testing.T) {
	const (
		nw       = buildv1.BuildPhaseNew
		running  = buildv1.BuildPhaseRunning
		complete = buildv1.BuildPhaseComplete
		failed   = buildv1.BuildPhaseFailed
		errored  = buildv1.BuildPhaseError
		canc     = buildv1.BuildPhaseCancelled
	)
	started := b(4, nw)
	started.Status.Platforms = []buildv1.BuildStatusPlatform{{Platform: "linux/amd64"}}
	cases := []struct {
		name   string
		bc     *buildv1.BuildConfig
		builds []buildv1.Build
		want   Plan
	}{
		{"config change starts build 1", bc("", 0, buildv1.ConfigChangeBuildTriggerType), nil, Plan{StartConfigChange: true}},
		{"config change starts nothing once a build exists", bc("", 0, buildv1.ConfigChangeBuildTriggerType), []buildv1.Build{b(1, nw)}, Plan{LastVersion: ptr.To[int64](1)}},
		{"config change starts nothing after lastVersion 1", bc("", 1, buildv1.ConfigChangeBuildTriggerType), nil, Plan{}},
		{"no config change trigger", bc("", 0, buildv1.GenericWebHookBuildTriggerType), nil, Plan{}},
		{"lastVersion raised to the newest build", bc("", 2), []buildv1.Build{b(1, complete), b(5, running)}, Plan{LastVersion: ptr.To[int64](5)}},
		{"lastVersion never lowered", bc("", 9), []buildv1.Build{b(5, running)}, Plan{}},
		{"serial latest only cancels the older queued", bc(buildv1.BuildRunPolicySerialLatestOnly, 4),
			[]buildv1.Build{b(1, running), b(2, nw), b(3, nw), b(4, nw)}, Plan{Cancel: []string{"app-2", "app-3"}}},
		{"serial latest only leaves a started build", bc(buildv1.BuildRunPolicySerialLatestOnly, 5),
			[]buildv1.Build{started, b(5, nw)}, Plan{}},
		{"serial keeps the queue", bc(buildv1.BuildRunPolicySerial, 4), []buildv1.Build{b(1, running), b(2, nw), b(3, nw)}, Plan{}},
		{"history: default 5 of each", bc("", 12), []buildv1.Build{
			b(1, complete), b(2, failed), b(3, complete), b(4, complete), b(5, errored), b(6, complete),
			b(7, complete), b(8, canc), b(9, complete), b(10, failed), b(11, failed), b(12, failed)},
			Plan{Delete: []string{"app-1", "app-2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.bc, tc.builds)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDecideHistoryLimits(t *testing.T) {
	c := bc("", 6)
	c.Spec.SuccessfulBuildsHistoryLimit = ptr.To[int32](1)
	c.Spec.FailedBuildsHistoryLimit = ptr.To[int32](0)
	got := Decide(c, []buildv1.Build{b(3, buildv1.BuildPhaseComplete), b(1, buildv1.BuildPhaseComplete), b(2, buildv1.BuildPhaseFailed), b(6, buildv1.BuildPhaseRunning)})
	if want := []string{"app-1", "app-2"}; !reflect.DeepEqual(got.Delete, want) {
		t.Errorf("Delete = %v, want %v (oldest first; running builds never)", got.Delete, want)
	}
}
