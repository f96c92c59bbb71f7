package controller

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func numbered(n int, policy buildv1.BuildRunPolicy, phase buildv1.BuildPhase) buildv1.Build {
	return buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "app-" + strconv.Itoa(n),
			Labels:      map[string]string{buildv1.BuildConfigLabel: "app", buildv1.BuildRunPolicyLabel: string(policy)},
			Annotations: map[string]string{buildv1.BuildNumberAnnotation: strconv.Itoa(n)},
		},
		Status: buildv1.BuildStatus{Phase: phase},
	}
}

func TestWaitForTurn(t *testing.T) {
	const (
		serial   = buildv1.BuildRunPolicySerial
		latest   = buildv1.BuildRunPolicySerialLatestOnly
		parallel = buildv1.BuildRunPolicyParallel
		nw       = buildv1.BuildPhaseNew
		running  = buildv1.BuildPhaseRunning
		pending  = buildv1.BuildPhasePending
		complete = buildv1.BuildPhaseComplete
		failed   = buildv1.BuildPhaseFailed
	)
	handMade := numbered(2, serial, nw)
	delete(handMade.Labels, buildv1.BuildConfigLabel)
	cases := []struct {
		name     string
		build    buildv1.Build
		siblings []buildv1.Build
		want     bool
	}{
		{"serial, alone", numbered(1, serial, nw), nil, false},
		{"serial, earlier running", numbered(2, serial, nw), []buildv1.Build{numbered(1, serial, running)}, true},
		{"serial, earlier still new", numbered(3, serial, nw), []buildv1.Build{numbered(1, serial, complete), numbered(2, serial, nw)}, true},
		{"serial, earlier ended", numbered(3, serial, nw), []buildv1.Build{numbered(1, serial, complete), numbered(2, serial, failed)}, false},
		{"serial, only later ones", numbered(1, serial, nw), []buildv1.Build{numbered(2, serial, nw), numbered(3, serial, nw)}, false},
		{"parallel never waits", numbered(2, parallel, nw), []buildv1.Build{numbered(1, parallel, running)}, false},
		{"no policy label never waits", func() buildv1.Build { b := numbered(2, "", nw); return b }(), []buildv1.Build{numbered(1, serial, running)}, false},
		{"hand-made build never waits", handMade, []buildv1.Build{numbered(1, serial, running)}, false},
		{"latest-only, earlier pending", numbered(2, latest, nw), []buildv1.Build{numbered(1, latest, pending)}, true},
		{"latest-only, earlier queued is skipped", numbered(3, latest, nw), []buildv1.Build{numbered(1, latest, complete), numbered(2, latest, nw)}, false},
		{"latest-only, a newer one is queued", numbered(2, latest, nw), []buildv1.Build{numbered(3, latest, nw)}, true},
		{"latest-only, earlier started but still New", numbered(2, latest, nw), []buildv1.Build{func() buildv1.Build {
			b := numbered(1, latest, nw)
			b.Status.Platforms = []buildv1.BuildStatusPlatform{{Platform: "linux/amd64"}}
			return b
		}()}, true},
		{"latest-only, a newer one ended", numbered(2, latest, nw), []buildv1.Build{numbered(3, latest, complete)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			siblings := append([]buildv1.Build{tc.build}, tc.siblings...) // itself among them, as a list returns it
			got, why := WaitForTurn(&tc.build, siblings)
			if got != tc.want {
				t.Errorf("WaitForTurn = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}
