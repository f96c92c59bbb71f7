package e2e

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// amd64Base is the bed's base image's linux/amd64 child by digest: a
// single-platform base that has no arm64.
func amd64Base(t *testing.T, h *harness) string {
	t.Helper()
	img, err := env.Bed.Registry.OpenImage(h.ctx, env.Bed.BaseImage)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	index, _, err := img.Index(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	repo := strings.TrimSuffix(env.Bed.BaseImage, ":latest")
	for _, m := range index.Manifests {
		if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == "amd64" {
			return repo + "@" + m.Digest.String()
		}
	}
	t.Fatalf("the bed's base image %s has no linux/amd64", env.Bed.BaseImage)
	return ""
}

// fromBuildConfig creates the case's BuildConfig with
// dockerStrategy.from.
func (h *harness) fromBuildConfig(from string, platforms, allowedToFail []string) {
	h.t.Helper()
	// The Dockerfile's own FROM is replaced by from in the pods.
	bc := h.buildConfigSpec(machineDockerfile(env.Bed.BaseImage), platforms, allowedToFail)
	bc.Spec.Strategy.DockerStrategy.From = &corev1.ObjectReference{Kind: "DockerImage", Name: from}
	h.create(bc)
}

// TestBaseImageMissingPlatform: dockerStrategy.from names a single-platform
// amd64 image and the Build asks for linux/amd64 and linux/arm64: the
// controller reads the base's platforms before any pod and fails the Build
// at once, naming the missing platform and the one the base has; no pod is
// ever created.
func TestBaseImageMissingPlatform(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "basemissing")
	base := amd64Base(t, h)
	h.fromBuildConfig(base, []string{"linux/amd64", "linux/arm64"}, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseFailed), "message: %s", b.Status.Message)
	g.Expect(b.Status.Reason).To(Equal(buildv1.StatusReasonBaseImagePlatformNotFound))
	g.Expect(b.Status.Message).To(ContainSubstring("base image " + base + " has no linux/arm64 (it has linux/amd64)"))
	g.Expect(entries(b)["linux/arm64"].Reason).To(Equal(buildv1.StatusReasonBaseImagePlatformNotFound))
	g.Expect(h.pods()).To(BeEmpty())
	g.Expect(h.tl.PodNames()).To(BeEmpty(), "no pod was ever created")
}

// TestBaseImageMissingPlatformAllowedToFail: the same base, with arm64
// allowed to fail: arm64 fails with the base's reason and never gets a
// pod; amd64 builds and the Build completes.
func TestBaseImageMissingPlatformAllowedToFail(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "baseallowed")
	base := amd64Base(t, h)
	h.fromBuildConfig(base, []string{"linux/amd64", "linux/arm64"}, []string{"linux/arm64"})
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	arm := entries(b)["linux/arm64"]
	g.Expect(arm.Phase).To(Equal(buildv1.BuildPhaseFailed))
	g.Expect(arm.Reason).To(Equal(buildv1.StatusReasonBaseImagePlatformNotFound))
	g.Expect(arm.Message).To(ContainSubstring("has no linux/arm64 (it has linux/amd64)"))
	g.Expect(h.tl.PodNames()).NotTo(ContainElement(buildv1.PlatformPodName(b.Name, "linux/arm64")), "arm64 never had a pod")
	g.Expect(h.tl.PodNames()).To(ContainElement(buildv1.PlatformPodName(b.Name, "linux/amd64")))
	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(map[string]string{"linux/amd64": "x86_64"}))
}

// TestBaseImageUnreachable: from names an image on a registry that does
// not answer (a closed loopback port): the check before the fan-out
// decides nothing, an event says so, and the platforms' pods are created
// (and fail pulling it, in their own words).
func TestBaseImageUnreachable(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "baseunreachable")
	h.fromBuildConfig("127.0.0.1:1/nothing/here:v1", []string{"linux/amd64", "linux/arm64"}, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(h.events()).To(ContainElement(buildv1.EventReasonBaseImageCheckSkipped))
	g.Expect(b.Status.Reason).NotTo(Equal(buildv1.StatusReasonBaseImagePlatformNotFound))
	g.Expect(h.tl.PodNames()).To(ContainElement(buildv1.PlatformPodName(b.Name, "linux/amd64")), "the build went on to its pods")
}
