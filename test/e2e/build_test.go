package e2e

import (
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestFourPlatformBuild builds a BuildConfig's git source for four
// platforms: each platform's pod runs on a node of its architecture,
// unprivileged in a user namespace of its own, the
// index in the registry has four children whose layers say the machine they
// were built for, the per-platform tags are gone, the Build is Complete with
// a digest per platform and its events, and `kubectl logs` of the arm64 pod
// shows that platform's build steps.
func TestFourPlatformBuild(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "four")
	h.buildConfig(machineDockerfile(env.Bed.BaseImage), framework.Platforms, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)

	pods := h.pods()
	for _, p := range framework.Platforms {
		pod := pods[buildv1.PlatformPodName(b.Name, p)]
		g.Expect(pod).NotTo(BeNil(), "pod of %s", p)
		g.Expect(nodeArch(t, h.ctx, pod.Spec.NodeName)).To(Equal(strings.TrimPrefix(p, "linux/")), "node of %s", p)
		g.Expect(pod.Spec.HostUsers).To(HaveValue(BeFalse()), "pod of %s runs in a user namespace", p)
		g.Expect(pod.Spec.Containers[0].SecurityContext.Privileged).To(HaveValue(BeFalse()), "pod of %s is not privileged", p)
	}
	// The runner ran each of them in a user namespace of its own (mapped
	// root), as a kubelet would.
	runnerLog, err := os.ReadFile(env.Bed.LogPath("pod-runner"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range framework.Platforms {
		g.Expect(string(runnerLog)).To(MatchRegexp(`pod %s/%s: container in a user namespace: ids 0-65535 are host ids [1-9]`, h.ns, buildv1.PlatformPodName(b.Name, p)))
	}

	got := entries(b)
	g.Expect(got).To(HaveLen(4))
	for _, p := range framework.Platforms {
		e := got[p]
		g.Expect(e.Phase).To(Equal(buildv1.BuildPhaseComplete), "entry of %s: %+v", p, e)
		g.Expect(e.Output).NotTo(BeNil(), "output of %s", p)
		g.Expect(e.Output.ImageDigest).To(HavePrefix("sha256:"), "digest of %s", p)
	}

	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(framework.UnameOf))
	g.Expect(h.tags()).To(Equal([]string{"v1"}), "the per-platform tags are gone")

	g.Eventually(h.events).WithContext(h.ctx).Should(ContainElements(buildv1.EventReasonBuildStarted, buildv1.EventReasonBuildCompleted))

	logs, err := env.Kubectl(h.ctx, "logs", "-n", h.ns, buildv1.PlatformPodName(b.Name, "linux/arm64"))
	g.Expect(err).NotTo(HaveOccurred(), logs)
	g.Expect(logs).To(ContainSubstring("RUN uname -m > /machine"))
	g.Expect(logs).To(ContainSubstring("linux/arm64"))

	if o, err := h.tl.Overhead(b.Name, framework.Platforms); err == nil {
		t.Logf("orchestration overhead %v (wall %v - longest platform %v): fan-out %v, scheduling %v, pod start %v, last platform noticed %v, manifest-list pod %v",
			o.Total(), o.Wall, o.LongestRun, o.FanOut, o.Scheduling, o.PodStart, o.Noticed, o.ManifestList)
	}
}
