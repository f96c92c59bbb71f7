package e2e

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestAllowedToFail: s390x fails but is allowed to: the Build is Complete,
// the index holds the three other platforms, and s390x's entry is Failed
// with the build's error.
func TestAllowedToFail(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "allowed")
	h.buildConfig(failOnS390x(env.Bed.BaseImage), framework.Platforms, []string{"linux/s390x"})
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)

	s390x := entries(b)["linux/s390x"]
	g.Expect(s390x.Phase).To(Equal(buildv1.BuildPhaseFailed))
	g.Expect(s390x.Reason).To(Equal(buildv1.StatusReasonDockerBuildFailed))
	g.Expect(s390x.Message).To(ContainSubstring("exit status 3"))

	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	want := map[string]string{}
	for _, p := range framework.Platforms[:3] {
		want[p] = framework.UnameOf[p]
	}
	g.Expect(machines).To(Equal(want))
	g.Expect(h.tags()).To(Equal([]string{"v1"}), "the per-platform tags are gone")
}

// TestRequiredPlatformFails: s390x fails and is required: the Build
// Fails, no index is pushed and the other platforms' tags are untagged.
func TestRequiredPlatformFails(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "required")
	h.buildConfig(failOnS390x(env.Bed.BaseImage), framework.Platforms, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseFailed), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	g.Expect(entries(b)["linux/s390x"].Phase).To(Equal(buildv1.BuildPhaseFailed))

	// The builds still running when s390x failed end (or finish); then the
	// manifest-list pod removes whatever they pushed.
	h.waitCleanup()
	g.Expect(h.tags()).To(BeEmpty(), "no index and no per-platform tags")
}

// TestRequiredFailureStopsOthers: every platform's RUN step is running
// (amd64, arm64 and ppc64le sleep for an hour) when s390x's, which is not
// allowed to fail, fails (the test ends its sleep; the step then exits 3).
// The controller fails the Build and deletes the other platforms' pods at
// once: their processes stop, their entries are Cancelled, and the
// manifest-list pod leaves no tag behind.
func TestRequiredFailureStopsOthers(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "stopothers")
	// Sleeps no other process has: 3172 on the platforms that succeed,
	// 3174 on s390x, which fails once it is cut short.
	h.buildConfig("FROM "+env.Bed.BaseImage+"\n"+
		`RUN if [ "$(uname -m)" = s390x ]; then sleep 3174; exit 3; fi; sleep 3172`+"\n", framework.Platforms, nil)
	h.startBuild()

	g.Eventually(func() []int { return []int{len(sleepersOf("sleep\x003172")), len(sleepersOf("sleep\x003174"))} }).
		WithContext(h.ctx).WithTimeout(bed.BuildTimeout).WithPolling(250*time.Millisecond).
		Should(Equal([]int{3, 1}), "every platform's RUN step is running")
	failed := time.Now()
	for _, pid := range sleepersOf("sleep\x003174") {
		g.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	}

	g.Eventually(func() []int { return sleepersOf("sleep\x003172") }).
		WithContext(h.ctx).WithTimeout(bed.LongTimeout).WithPolling(100*time.Millisecond).
		Should(BeEmpty(), "the other platforms' RUN steps are stopped")
	stopped := time.Since(failed)
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseFailed), "message: %s", b.Status.Message)
	for p, e := range entries(b) {
		if p == "linux/s390x" {
			g.Expect(e.Phase).To(Equal(buildv1.BuildPhaseFailed), "%s: %+v", p, e)
			continue
		}
		g.Expect(e.Phase).To(Equal(buildv1.BuildPhaseCancelled), "%s: %+v", p, e)
		g.Expect(e.Message).To(ContainSubstring("a platform not allowed to fail failed"))
	}
	g.Eventually(func() []string {
		var left []string
		for _, p := range framework.Platforms {
			left = append(left, processesOf(h.ns, buildv1.PlatformPodName(b.Name, p))...)
		}
		return left
	}).WithContext(h.ctx).WithTimeout(bed.LongTimeout).WithPolling(250*time.Millisecond).Should(BeEmpty(), "the builds' processes end")
	h.waitCleanup()
	g.Expect(h.tags()).To(BeEmpty(), "no index and no per-platform tags")
	t.Logf("the other platforms' RUN steps stopped %.2fs after s390x's was cut short", stopped.Seconds())
}

// sleepersOf lists the processes whose command line holds args
// (NUL-separated), as a step's `sleep N` shows, natively or under qemu.
func sleepersOf(args string) []int {
	var pids []int
	for _, pid := range allPIDs() {
		if strings.Contains(cmdline(pid), args+"\x00") {
			if n, err := strconv.Atoi(pid); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// TestCancel cancels a Build while its pods run, as OpenShift does
// (status.cancelled: true): the builds' processes stop, the Build is
// Cancelled and no index is pushed.
func TestCancel(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "cancel")
	// A sleep no other process has: its processes are the RUN steps.
	h.buildConfig("FROM "+env.Bed.BaseImage+"\nRUN sleep 317\n", framework.Platforms, nil)
	b := h.startBuild()

	g.Eventually(func() int { return len(sleepers()) }).WithContext(h.ctx).WithTimeout(bed.BuildTimeout).WithPolling(time.Second).
		Should(BeNumerically(">=", 4), "every platform's RUN step is running")
	for _, p := range framework.Platforms {
		pt, _ := h.tl.Pod(buildv1.PlatformPodName(b.Name, p))
		g.Expect(pt.Phase).To(Equal(corev1.PodRunning), "pod of %s", p)
	}

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"cancelled":true}}`))
	g.Expect(env.Bed.Client.Status().Patch(h.ctx, b, patch)).To(Succeed())
	b = h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseCancelled), "message: %s", b.Status.Message)

	g.Eventually(func() []string {
		var left []string
		for _, p := range framework.Platforms {
			left = append(left, processesOf(h.ns, buildv1.PlatformPodName(b.Name, p))...)
		}
		return append(left, sleepers()...)
	}).WithContext(h.ctx).WithTimeout(bed.LongTimeout).WithPolling(250*time.Millisecond).Should(BeEmpty(), "the builds' processes are stopped")
	h.waitCleanup()
	g.Expect(h.tags()).To(BeEmpty(), "no index and no per-platform tags")
}

// sleepers lists the processes running `sleep 317`.
func sleepers() []string {
	var pids []string
	for _, pid := range allPIDs() {
		if cmd := cmdline(pid); strings.Contains(cmd, "sleep\x00317") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestNoNodeForPlatform: a Build for a platform no node has fails at once
// (phase Error, OpenShift's phase for a build that could not run) with
// NodePlatformNotFound, and no pod is created.
func TestNoNodeForPlatform(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "nonode")
	h.buildConfig(machineDockerfile(env.Bed.BaseImage), []string{"linux/amd64", "linux/riscv64"}, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseError))
	g.Expect(b.Status.Reason).To(Equal(buildv1.StatusReasonNodePlatformNotFound))
	g.Expect(b.Status.Message).To(ContainSubstring("linux/riscv64"))
	g.Consistently(func() []string { return slices.Collect(maps.Keys(h.pods())) }).
		WithContext(context.Background()).WithTimeout(2 * time.Second).Should(BeEmpty())
	g.Expect(h.tl.PodNames()).To(BeEmpty())
}
