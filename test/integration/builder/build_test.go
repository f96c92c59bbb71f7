package builder_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
)

// archDockerfile records what the build step's machine says it is.
func archDockerfile() string {
	return "FROM " + theBed.BaseImage + "\nRUN uname -m > /arch\n"
}

// failOnS390x fails its build step on s390x only.
func failOnS390x() string {
	return "FROM " + theBed.BaseImage + "\nRUN test \"$(uname -m)\" != s390x && uname -m > /arch\n"
}

// checkIndex checks that ref is an index of exactly the platforms want,
// each child's /arch layer saying what uname -m says on that platform.
func checkIndex(ctx context.Context, g Gomega, reg *bed.Registry, ref string, want []string) {
	img, err := reg.OpenImage(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var got []string
	for _, d := range index.Manifests {
		g.Expect(d.Platform).NotTo(BeNil())
		p := platform.FromOCI(*d.Platform)
		var wanted string
		for _, w := range want {
			if wp, _ := platform.Parse(w); platform.Matches(wp, p) {
				wanted = w
			}
		}
		g.Expect(wanted).NotTo(BeEmpty(), "index entry %s is not one of %v", p, want)
		got = append(got, wanted)
		arch, err := img.TopLayerFile(ctx, d.Digest, "/arch")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.TrimSpace(arch)).To(Equal(unameOf[wanted]), "/arch of the %s image", wanted)
	}
	g.Expect(got).To(ConsistOf(want))
}

// TestBuildFourPlatforms builds `RUN uname -m > /arch` for four platforms
// with `builder build`: the pushed index lists four images whose /arch
// layers say x86_64, aarch64, ppc64le and s390x, and the per-platform tags
// are gone.
func TestBuildFourPlatforms(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	out := theBed.Registry.Host + "/it/four:v1"
	log, code := runBuilder(t, nil, "build", "--platform", strings.Join(fourPlatforms, ","), "-t", out, writeContext(t, archDockerfile()))
	g.Expect(code).To(Equal(0), log)
	for _, p := range fourPlatforms {
		g.Expect(log).To(ContainSubstring("["+p+"] STEP 2/2: RUN uname -m > /arch"), "per-platform log prefix")
	}
	g.Expect(log).To(MatchRegexp(`Manifest list sha256:[0-9a-f]{64} pushed to ` + out))
	g.Expect(log).To(MatchRegexp(`(?m)^linux/s390x\s+Complete\s+sha256:[0-9a-f]{64}`))

	checkIndex(ctx, g, theBed.Registry, out, fourPlatforms)
	tags, err := theBed.Registry.Tags(ctx, "it/four")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(Equal([]string{"v1"}), "the per-platform tags are untagged")
}

// TestBuildAllowedToFail builds a Dockerfile that fails only on s390x:
// allowed to fail, the index lists the other three; not allowed, no index
// is pushed, and the per-platform tags are removed all the same.
func TestBuildAllowedToFail(t *testing.T) {
	ctxDir := writeContext(t, failOnS390x())

	t.Run("allowed", func(t *testing.T) {
		g := NewWithT(t)
		out := theBed.Registry.Host + "/it/allowed:v1"
		log, code := runBuilder(t, nil, "build", "--platform", strings.Join(fourPlatforms, ","),
			"--allow-fail", "linux/s390x", "-t", out, ctxDir)
		g.Expect(code).To(Equal(0), log)
		g.Expect(log).To(MatchRegexp(`(?m)^linux/s390x\s+Failed \(allowed\)`))
		g.Expect(log).To(ContainSubstring("linux/s390x: DockerBuildFailed: building: "))
		checkIndex(t.Context(), g, theBed.Registry, out, []string{"linux/amd64", "linux/arm64", "linux/ppc64le"})
		tags, err := theBed.Registry.Tags(t.Context(), "it/allowed")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(Equal([]string{"v1"}))
	})

	t.Run("not allowed", func(t *testing.T) {
		g := NewWithT(t)
		out := theBed.Registry.Host + "/it/required:v1"
		log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64,linux/s390x", "-t", out, ctxDir)
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("PlatformBuildFailed"))
		g.Expect(log).To(ContainSubstring("linux/s390x Failed (DockerBuildFailed"))
		g.Expect(log).NotTo(ContainSubstring("Manifest list sha256:"))
		tags, err := theBed.Registry.Tags(t.Context(), "it/required")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(BeEmpty(), "no index, and the amd64 tag untagged")
	})
}

// TestBaseImageWithoutThePlatform builds for a platform the base index does
// not have: the error names the image and the platforms it has.
func TestBaseImageWithoutThePlatform(t *testing.T) {
	g := NewWithT(t)
	log, code := runBuilder(t, nil, "build", "--platform", "linux/riscv64", writeContext(t, archDockerfile()))
	g.Expect(code).To(Equal(1), log)
	want := "base image " + theBed.BaseImage + " has no image for linux/riscv64; it has " + strings.Join(sortedBasePlatforms(), ", ")
	g.Expect(log).To(ContainSubstring(want))
	g.Expect(log).To(ContainSubstring("DockerBuildFailed"))
}

func sortedBasePlatforms() []string {
	ps := bed.BaseImagePlatforms()
	slices.Sort(ps)
	return ps
}

// TestBuildRunMounts gives a RUN step a directory of the machine: the step
// reads it, and the image does not carry it.
func TestBuildRunMounts(t *testing.T) {
	g := NewWithT(t)
	data := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(data, "hello"), []byte("from the volume\n"), 0o644)).To(Succeed())
	out := theBed.Registry.Host + "/it/volume:v1"
	ctxDir := writeContext(t, "FROM "+theBed.BaseImage+"\nRUN cat /mnt/data/hello > /out && ls /mnt/data > /listing\n")
	log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "-v", data+":/mnt/data:ro", "-t", out, ctxDir)
	g.Expect(code).To(Equal(0), log)
	img, err := theBed.Registry.OpenImage(t.Context(), out)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	got, err := img.TopLayerFile(t.Context(), index.Manifests[0].Digest, "/out")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("from the volume\n"))
	_, err = img.TopLayerFile(t.Context(), index.Manifests[0].Digest, "/mnt/data/hello")
	g.Expect(err).To(MatchError(ContainSubstring("no /mnt/data/hello in the top layer")))
}
