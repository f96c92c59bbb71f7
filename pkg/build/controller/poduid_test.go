package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestDecideRecordsPodUIDs: the UID of each platform's pod goes into its
// entry, and the UID of the pod the pod-name annotation names into
// status.podUID, once each pod exists, so that only those pods may write
// (the status-writers policy binds writers by UID, not by name).
func TestDecideRecordsPodUIDs(t *testing.T) {
	withUID := func(w *podWrapper, uid string) *podWrapper { w.UID = types.UID(uid); return w }
	named := func(b *buildv1.Build, pod string) *buildv1.Build {
		b.Annotations = map[string]string{buildv1.BuildPodNameAnnotation: pod}
		return b
	}
	for _, tc := range []struct {
		name      string
		build     *buildv1.Build
		pods      map[string]*podWrapper
		wantEntry map[string]string
		wantNamed string
	}{
		{
			name:      "new pods: Pending with their UIDs, and the manifest-list pod's",
			build:     named(makeBuild("app").platforms(amd, arm).entry(amd, buildv1.BuildPhaseNew, "").entry(arm, buildv1.BuildPhaseNew, "").obj(), podML),
			pods:      map[string]*podWrapper{podAmd: withUID(makePod(podAmd), "u-amd"), podArm: withUID(makePod(podArm), "u-arm"), podML: withUID(makePod(podML), "u-ml")},
			wantEntry: map[string]string{amd: "u-amd", arm: "u-arm"},
			wantNamed: "u-ml",
		},
		{
			name:      "a running entry without the UID gets it (a build from before)",
			build:     named(makeBuild("app").platforms(amd).entry(amd, buildv1.BuildPhaseRunning, "").obj(), podAmd),
			pods:      map[string]*podWrapper{podAmd: withUID(makePod(podAmd).running(), "u-amd")},
			wantEntry: map[string]string{amd: "u-amd"},
			wantNamed: "u-amd",
		},
		{
			name:  "a recorded UID is not written again",
			build: recorded(named(makeBuild("app").platforms(amd).entry(amd, buildv1.BuildPhaseRunning, "").obj(), podAmd), amd, "u-amd"),
			pods:  map[string]*podWrapper{podAmd: withUID(makePod(podAmd).running(), "u-amd")},
		},
		{
			name:      "classic: the pod's UID once it exists",
			build:     named(makeBuild("app").phase(buildv1.BuildPhasePending).obj(), "app-build"),
			pods:      map[string]*podWrapper{"app-build": withUID(makePod("app-build"), "u-classic")},
			wantNamed: "u-classic",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := podsOf()
			for name, p := range tc.pods {
				pods[name] = p.obj()
			}
			platforms := tc.build.Spec.Platforms
			plan := Decide(PlanInput{Build: tc.build, Platforms: platforms, ManifestList: len(platforms) > 1, Pods: pods})
			got := map[string]string{}
			for p, u := range plan.Entries {
				if u.PodUID != "" {
					got[p] = u.PodUID
				}
			}
			if len(got) != len(tc.wantEntry) {
				t.Errorf("entries' podUIDs %v, want %v", got, tc.wantEntry)
			}
			for p, uid := range tc.wantEntry {
				if got[p] != uid {
					t.Errorf("entry %s podUID %q, want %q", p, got[p], uid)
				}
			}
			if plan.PodUID != tc.wantNamed {
				t.Errorf("status.podUID %q, want %q", plan.PodUID, tc.wantNamed)
			}
		})
	}
}

func recorded(b *buildv1.Build, platform, uid string) *buildv1.Build {
	for i := range b.Status.Platforms {
		if b.Status.Platforms[i].Platform == platform {
			b.Status.Platforms[i].PodUID = uid
		}
	}
	b.Status.PodUID = uid
	return b
}
