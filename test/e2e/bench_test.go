package e2e

import (
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/e2e/framework"
)

// BenchmarkOrchestrationOverhead measures what archway adds on top of the
// builds themselves for the four-platform build of TestFourPlatformBuild:
// the Build's wall time (creation to Complete) minus the longest platform
// pod's own run, broken down into fan-out (creation to all platform pods
// created), scheduling (to all bound), pod start (to all running), the
// last platform noticed (its builder's report or its pod's end, whichever
// comes first, to the manifest-list pod created) and the manifest-list pod
// (created to Build Complete). Goal: under 3 s in total. Run it with
//
//	go test -tags "..." -run '^$' -bench OrchestrationOverhead -benchtime 1x ./test/e2e/
func BenchmarkOrchestrationOverhead(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		h := newHarness(b, "bench")
		h.buildConfig(machineDockerfile(env.Bed.BaseImage), framework.Platforms, nil)
		h.startBuild()
		build := h.waitTerminal()
		if build.Status.Phase != buildv1.BuildPhaseComplete {
			b.Fatalf("build %s ended %s: %s", build.Name, build.Status.Phase, build.Status.Message)
		}
		o, err := h.tl.Overhead(build.Name, framework.Platforms)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("run %d: overhead %.2fs = wall %.2fs - longest platform %.2fs; fan-out %.3fs, scheduling %.3fs, pod start %.3fs, last platform noticed %.3fs, manifest-list pod %.3fs (the rest, %.3fs, is the platforms finishing apart)",
			i, o.Total().Seconds(), o.Wall.Seconds(), o.LongestRun.Seconds(), o.FanOut.Seconds(), o.Scheduling.Seconds(),
			o.PodStart.Seconds(), o.Noticed.Seconds(), o.ManifestList.Seconds(),
			(o.Total() - o.FanOut - o.Scheduling - o.PodStart - o.Noticed - o.ManifestList).Seconds())
		b.ReportMetric(o.Total().Seconds(), "overhead-s")
		b.ReportMetric(o.FanOut.Seconds(), "fanout-s")
		b.ReportMetric(o.Scheduling.Seconds(), "scheduling-s")
		b.ReportMetric(o.PodStart.Seconds(), "podstart-s")
		b.ReportMetric(o.Noticed.Seconds(), "noticed-s")
		b.ReportMetric(o.ManifestList.Seconds(), "manifestlist-s")
		b.ReportMetric(o.Wall.Seconds(), "wall-s")
	}
}
