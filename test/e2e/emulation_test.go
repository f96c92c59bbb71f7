package e2e

import (
	"context"
	"os"
	"os/exec"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/emulation"
	"github.com/archway-build/archway/test/bed"
)

// emulationConfig lets linux/arm/v7, which no bed node has, be built under
// emulation on amd64 nodes.
const emulationConfig = `  emulation:
    platforms:
    - platform: linux/arm/v7
      hostArchitectures: [amd64]
`

// TestEmulation: linux/arm/v7 has no node on the bed (its base image has
// the platform). emulation-setup, the binfmt DaemonSet's program, reads
// this machine's qemu handlers and labels the amd64 node. Without the
// opt-in in build-controller's config a Build for linux/amd64 and
// linux/arm/v7 fails with NodePlatformNotFound and starts no pod; with it,
// the arm/v7 pod runs on the amd64 node (selecting the label), its status
// entry and an event say it was emulated on amd64, and the image it pushed
// says armv7l from `uname -m` in a RUN step.
func TestEmulation(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout+bed.CaseTimeout)
	defer cancel()
	const hostNode = "node-amd64-1"

	setup, err := bed.GoBuild(ctx, t.TempDir(), "./cmd/emulation-setup")
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, setup, "--once", "--node-name="+hostNode, "--binfmt-dir="+emulation.BinfmtDir)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Bed.Kubeconfig)
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "emulation-setup: %s", out)
	t.Cleanup(func() {
		if err := emulation.Clear(context.Background(), env.Bed.Client, hostNode); err != nil {
			t.Errorf("removing the emulation labels: %v", err)
		}
	})
	n := &corev1.Node{}
	g.Expect(env.Bed.Client.Get(ctx, client.ObjectKey{Name: hostNode}, n)).To(Succeed())
	g.Expect(n.Labels).To(HaveKeyWithValue(controller.EmulationLabel("arm"), "true"), "emulation-setup said: %s", out)
	g.Expect(n.Labels).NotTo(HaveKey(controller.EmulationLabel("amd64")), "never the node's own architecture")

	platforms := []string{"linux/amd64", "linux/arm/v7"}

	// Without the opt-in, the labelled node changes nothing.
	h := newHarness(t, "noemu")
	h.buildConfig(machineDockerfile(env.Bed.BaseImage), platforms, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseError), "message: %s", b.Status.Message)
	g.Expect(b.Status.Reason).To(Equal(buildv1.StatusReasonNodePlatformNotFound))
	g.Expect(b.Status.Message).To(ContainSubstring("linux/arm/v7"))
	g.Expect(h.pods()).To(BeEmpty())
	g.Expect(entries(b)["linux/arm/v7"].EmulatedOn).To(BeEmpty())

	// With it.
	g.Expect(env.RestartControllerWithBuildConfig(ctx, emulationConfig)).To(Succeed())
	t.Cleanup(func() {
		if err := env.RestartControllerWithBuildConfig(context.Background(), ""); err != nil {
			t.Errorf("restarting build-controller with the suite's config: %v", err)
		}
	})
	h = newHarness(t, "emu")
	h.buildConfig(machineDockerfile(env.Bed.BaseImage), platforms, nil)
	h.startBuild()
	b = h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	g.Expect(entries(b)["linux/arm/v7"].EmulatedOn).To(Equal("amd64"))
	g.Expect(entries(b)["linux/amd64"].EmulatedOn).To(BeEmpty())
	// kubectl archway describe says which platform ran under emulation.
	described, err := h.plugin(env.Bed.Kubeconfig, "describe", "build", b.Name)
	g.Expect(err).NotTo(HaveOccurred(), described)
	g.Expect(described).To(MatchRegexp(`(?m)^\s*PLATFORM\s+PHASE\s+REASON\s+NODE\s+EMULATED ON\s`), described)
	g.Expect(described).To(MatchRegexp(`(?m)^\s*linux/arm/v7\s+Complete\s+-\s+\S+\s+amd64\s`), described)
	g.Expect(described).To(MatchRegexp(`(?m)^\s*linux/amd64\s+Complete\s+-\s+\S+\s+-\s`), described)

	armPod := buildv1.PlatformPodName(b.Name, "linux/arm/v7")
	pod := &corev1.Pod{}
	g.Expect(env.Bed.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: armPod}, pod)).To(Succeed())
	g.Expect(pod.Spec.NodeSelector).To(HaveKeyWithValue(corev1.LabelArchStable, "amd64"))
	g.Expect(pod.Spec.NodeSelector).To(HaveKeyWithValue(controller.EmulationLabel("arm"), "true"))
	g.Expect(nodeArch(t, ctx, pod.Spec.NodeName)).To(Equal("amd64"))
	g.Expect(h.events()).To(ContainElement(buildv1.EventReasonPlatformEmulated))

	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(map[string]string{"linux/amd64": "x86_64", "linux/arm": "armv7l"}))
}
