package build

import (
	"testing"
	"time"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
)

// TestProgressWrites checks that the controller batches writes of a
// Build's progress alone (status.platformsSummary): a platform that ends
// within the progress interval of the controller's last write is not
// written by itself, but with the next change of anything else (here the
// manifest list's outcome) or once the interval has passed.
func TestProgressWrites(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, interval time.Duration) *harness {
		h := newHarness(t, "progress")
		h.cfg = testConfig(nil)
		h.ctrl = startControllerOptions(t, h.ns, h.cfg, nil, buildcontroller.Options{ProgressInterval: interval})
		for _, s := range []step{
			createBuild(nil, fourPlatforms...),
			wantPlatformPods(fourPlatforms...),
			startPlatforms(fourPlatforms...),
			wantPhase(buildv1.BuildPhaseRunning, ""),
		} {
			s.do(h)
			if t.Failed() {
				t.Fatalf("after step %q: %s", s.name, describeBuild(h))
			}
		}
		return h
	}

	t.Run("within the interval, counts wait for the next other change", func(t *testing.T) {
		h := run(t, time.Hour)
		for i, p := range []string{amd64, arm64, ppc64le} {
			h.succeedPlatform(p)
			// The controller has acted on the Build with this platform
			// Complete: it wrote no count.
			h.waitHandled()
			b := h.get()
			if e := entries(b)[p]; e.Phase != buildv1.BuildPhaseComplete {
				t.Fatalf("after %d platforms: entry %s = %+v", i+1, p, e)
			}
			if b.Status.PlatformsSummary != "0/4" {
				t.Fatalf("after %d platforms ended within the interval: platformsSummary %q, want 0/4 until another change", i+1, b.Status.PlatformsSummary)
			}
		}
		succeed(s390x).do(h)
		wantManifestListPod(fourPlatforms...).do(h)
		finishManifestList(0, "").do(h)
		b := h.waitPhase(buildv1.BuildPhaseComplete, "")
		if b.Status.PlatformsSummary != "4/4" {
			t.Errorf("Complete with platformsSummary %q, want 4/4", b.Status.PlatformsSummary)
		}
	})

	t.Run("a count is written once the interval has passed", func(t *testing.T) {
		h := run(t, 200*time.Millisecond)
		h.succeedPlatform(amd64)
		h.waitBuild("platformsSummary 1/4", func(b *buildv1.Build) bool { return b.Status.PlatformsSummary == "1/4" })
		h.succeedPlatform(arm64)
		h.waitBuild("platformsSummary 2/4", func(b *buildv1.Build) bool { return b.Status.PlatformsSummary == "2/4" })
	})
}
