package e2e

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/e2e/framework"
)

// BenchmarkOrchestrationOverhead measures what archway adds on top of the
// builds themselves for the four-platform build of TestFourPlatformBuild:
// the Build's wall time (creation to Complete) minus the longest platform
// pod's own run, broken down into fan-out (creation to all platform pods
// created), scheduling (to all bound), pod start (to all running), the
// last platform noticed (its builder's report or its pod's end, whichever
// comes first, to the manifest-list pod created: 0, as that pod is created
// with the platform pods and waits) and the manifest-list pod (the last
// platform finished to Build Complete). Goal: under 3 s in total. Run it with
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

// BenchmarkUnprivilegedBuild compares the four-platform build of
// TestFourPlatformBuild with build pods run unprivileged in user namespaces
// (build.podSecurity: Unprivileged, the default) against privileged ones in
// the host's user namespace (the opt-in, and archway's only mode before),
// on the same Dockerfile and base image: the Build's wall time (creation to
// Complete) and the longest platform pod's run. The two alternate within
// each iteration, so both see the same machine load. Run it with
//
//	go test -tags "..." -run '^$' -bench UnprivilegedBuild -benchtime 3x ./test/e2e/
func BenchmarkUnprivilegedBuild(b *testing.B) {
	modes := []string{"Privileged", "Unprivileged"}
	sums := map[string][2]float64{}
	defer func() {
		// Put the default back for whatever runs next.
		if err := env.RestartController(context.Background(), ""); err != nil {
			b.Error(err)
		}
	}()
	n := 0
	for b.Loop() {
		n++
		for _, mode := range modes {
			if err := env.RestartController(context.Background(), mode); err != nil {
				b.Fatal(err)
			}
			h := newHarness(b, strings.ToLower(mode))
			h.buildConfig(machineDockerfile(env.Bed.BaseImage), framework.Platforms, nil)
			h.startBuild()
			build := h.waitTerminal()
			if build.Status.Phase != buildv1.BuildPhaseComplete {
				b.Fatalf("%s build %s ended %s: %s", mode, build.Name, build.Status.Phase, build.Status.Message)
			}
			pod := h.pods()[buildv1.PlatformPodName(build.Name, "linux/arm64")]
			if pod == nil || ptr.Deref(pod.Spec.Containers[0].SecurityContext.Privileged, false) != (mode == "Privileged") {
				b.Fatalf("%s build: the arm64 pod is not %s", mode, mode)
			}
			o, err := h.tl.Overhead(build.Name, framework.Platforms)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("run %d %-12s: wall %.2fs, longest platform pod %.2fs", n, mode, o.Wall.Seconds(), o.LongestRun.Seconds())
			s := sums[mode]
			sums[mode] = [2]float64{s[0] + o.Wall.Seconds(), s[1] + o.LongestRun.Seconds()}
		}
	}
	for _, mode := range modes {
		s := sums[mode]
		b.Logf("%-12s mean over %d: wall %.2fs, longest platform pod %.2fs", mode, n, s[0]/float64(n), s[1]/float64(n))
		b.ReportMetric(s[0]/float64(n), strings.ToLower(mode)+"-wall-s")
	}
	if p := sums["Privileged"][0]; p > 0 {
		b.ReportMetric(sums["Unprivileged"][0]/p, "unprivileged/privileged")
	}
}
