package builder_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	g.Expect(err).To(MatchError(ContainSubstring("no /mnt/data/hello in the layers of")))
}

// TestBuildStopsOtherPlatforms: when a platform that is not allowed to fail
// fails, `builder build` stops the platforms still building at once, a RUN
// step in progress included, under either isolation. amd64's step marks
// that it started and sleeps for an hour; arm64's waits for that mark, then
// fails. The builder ends with amd64 Cancelled, its step's processes gone
// and nothing tagged.
func TestBuildStopsOtherPlatforms(t *testing.T) {
	for _, isolation := range []string{"chroot", "oci"} {
		t.Run(isolation, func(t *testing.T) {
			g := NewWithT(t)
			signal := t.TempDir()
			const sleeper = "sleep\x003171\x00" // amd64's step, and no other process
			t.Cleanup(func() { killAll(sleepersOf(sleeper)) })
			ctxDir := writeContext(t, "FROM "+theBed.BaseImage+"\n"+
				`RUN if [ "$(uname -m)" = x86_64 ]; then touch /signal/started; sleep 3171; `+
				`else while [ ! -e /signal/started ]; do sleep 0.1; done; exit 3; fi`+"\n")
			out := theBed.Registry.Host + "/it/failfast-" + isolation + ":v1"

			if _, err := builderBinary(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			// Without the stop, amd64's step sleeps for an hour.
			log, code := runBuilderWithin(t, bed.CaseTimeout, nil, "build", "--isolation", isolation,
				"--platform", "linux/amd64,linux/arm64", "-v", signal+":/signal", "-t", out, ctxDir)
			took := time.Since(start)
			g.Expect(code).To(Equal(1), log)
			g.Expect(log).To(ContainSubstring(isolation + " isolation)"))
			g.Expect(filepath.Join(signal, "started")).To(BeAnExistingFile(), "amd64's RUN step had started when arm64 failed")
			g.Expect(log).To(ContainSubstring("[linux/arm64] FAILED (DockerBuildFailed)"))
			g.Expect(log).To(ContainSubstring("Stopping the platforms still building: linux/arm64, which is not allowed to fail, failed"))
			g.Expect(log).To(MatchRegexp(`(?m)^linux/amd64\s+Cancelled\s`))
			g.Expect(log).To(ContainSubstring("linux/amd64: cancelled: linux/arm64, which is not allowed to fail, failed"))
			g.Expect(sleepersOf(sleeper)).To(BeEmpty(), "amd64's RUN step was killed")
			tags, err := theBed.Registry.Tags(t.Context(), "it/failfast-"+isolation)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tags).To(BeEmpty())
			t.Logf("builder build ended %.1fs after it started", took.Seconds())
		})
	}
}

// sleepersOf returns the live processes whose command line is cmdline
// (arguments each ended by a NUL).
func sleepersOf(cmdline string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(raw) != cmdline {
			continue
		}
		// A zombie has an empty command line: what is left is alive.
		out = append(out, pid)
	}
	return out
}

func killAll(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestBaseImageOnlyAnUnusedStageLacks builds for linux/amd64 a Dockerfile
// with a stage no target needs whose base has only linux/arm64, as
// multi-target Dockerfiles have: buildah skips the stage, so the build goes
// on (it says why) and builds. The target stage's own base lacking the
// platform still fails, naming the image (TestBaseImageWithoutThePlatform).
func TestBaseImageOnlyAnUnusedStageLacks(t *testing.T) {
	g := NewWithT(t)
	armOnly := theBed.Registry.Host + "/it/arm-only" + uniqueName() + ":v1"
	_, err := theBed.PushBasePlatform(t.Context(), theBed.Registry, armOnly, "linux/arm64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, "ARG BASE\nFROM "+armOnly+" AS unused\nRUN true\nFROM $BASE\nRUN echo built > /out\n")
	log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "--build-arg", "BASE="+theBed.BaseImage, ctxDir)
	g.Expect(code).To(Equal(0), log)
	g.Expect(log).To(MatchRegexp(`note: base image ` + regexp.QuoteMeta(armOnly) + ` is a single-platform image for linux/arm64\S*, not for linux/amd64.*; going on, since the target stage does not pull it`))

	// The same stage as the target fails before buildah runs.
	log, code = runBuilder(t, nil, "build", "--platform", "linux/amd64", "--build-arg", "BASE="+theBed.BaseImage,
		"--target", "unused", ctxDir)
	g.Expect(code).To(Equal(1), log)
	g.Expect(log).To(ContainSubstring("base image " + armOnly + " is a single-platform image for linux/arm64"))
	g.Expect(log).NotTo(ContainSubstring("note: "))
}
