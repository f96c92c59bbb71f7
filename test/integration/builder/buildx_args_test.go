package builder_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"

	"github.com/archway-build/archway/pkg/platform"
)

// buildxAssetsDockerfile picks an asset from the context by buildx's
// platform args, as Dockerfiles written for `docker buildx` do, and records
// every platform arg.
const buildxAssetsDockerfile = `ARG BASE
FROM $BASE
ARG TARGETPLATFORM TARGETOS TARGETARCH TARGETVARIANT BUILDPLATFORM BUILDOS BUILDARCH BUILDVARIANT
COPY tool-${TARGETOS}-${TARGETARCH}${TARGETVARIANT:+-$TARGETVARIANT} /tool
RUN { cat /tool; echo "$TARGETPLATFORM|$TARGETOS|$TARGETARCH|$TARGETVARIANT|$BUILDPLATFORM|$BUILDOS|$BUILDARCH|$BUILDVARIANT"; } > /out
`

// TestBuildxPlatformArgs builds a Dockerfile that names its asset from
// TARGETOS, TARGETARCH and TARGETVARIANT for amd64, arm64 and arm/v7, each
// spelled two ways: every image holds the asset buildx would pick (arm64
// without a variant, arm with v7, amd64 without), and the TARGET* and BUILD*
// args have buildx's values. The context also holds the assets a v8 or v1
// variant would name, so a wrong spelling picks a wrong asset rather than
// failing.
func TestBuildxPlatformArgs(t *testing.T) {
	ctxDir := writeContext(t, buildxAssetsDockerfile)
	for name, content := range map[string]string{
		"tool-linux-amd64":    "amd64 tool",
		"tool-linux-arm64":    "arm64 tool",
		"tool-linux-arm-v7":   "arm/v7 tool",
		"tool-linux-arm64-v8": "wrong: arm64/v8 tool",
		"tool-linux-amd64-v1": "wrong: amd64/v1 tool",
	} {
		if err := os.WriteFile(filepath.Join(ctxDir, name), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The build machine's args, as buildx gives them on amd64, arm64,
	// ppc64le and s390x machines: no variant.
	build := runtime.GOOS + "/" + runtime.GOARCH + "|" + runtime.GOOS + "|" + runtime.GOARCH + "|"
	want := map[string]string{
		"linux/amd64":  "amd64 tool\nlinux/amd64|linux|amd64||" + build,
		"linux/arm64":  "arm64 tool\nlinux/arm64|linux|arm64||" + build,
		"linux/arm/v7": "arm/v7 tool\nlinux/arm/v7|linux|arm|v7|" + build,
	}
	for _, spelling := range [][]string{
		{"linux/amd64", "linux/arm64", "linux/arm/v7"},
		{"linux/amd64/v1", "linux/arm64/v8", "linux/arm"},
	} {
		t.Run(strings.Join(spelling, ","), func(t *testing.T) {
			g := NewWithT(t)
			repo := "it/buildx-" + strings.ReplaceAll(spelling[1], "/", "-")
			out := theBed.Registry.Host + "/" + repo + ":v1"
			log, code := runBuilder(t, nil, "build", "--platform", strings.Join(spelling, ","),
				"--build-arg", "BASE="+theBed.BaseImage, "-t", out, ctxDir)
			g.Expect(code).To(Equal(0), log)

			for _, f := range indexTopFiles(t, out, 3, "/out") {
				g.Expect(strings.TrimSpace(f.content)).To(Equal(want[f.platform]), "the %s image", f.platform)
			}
		})
	}
}

// TestBuildReachesEveryImagesRegistry builds Dockerfiles whose only images
// on the bed's loopback registry (reached over plain HTTP, as loopback
// registries are) are not bases of the target platform: a cross-compiling
// stage on $BUILDPLATFORM, as Dockerfiles written for buildx have, and an
// image COPY --from names. Both build for two
// platforms; the cross-compiling stage runs on the build machine's
// architecture for each target.
func TestBuildReachesEveryImagesRegistry(t *testing.T) {
	for name, tc := range map[string]struct {
		dockerfile, file string
		want             func(p string) string
	}{
		"FROM --platform": {
			dockerfile: "ARG BASE\nFROM --platform=$BUILDPLATFORM $BASE AS build\nARG TARGETARCH\nRUN echo \"$TARGETARCH $(uname -m)\" > /arch\n" +
				"FROM scratch\nCOPY --from=build /arch /arch\n",
			file: "/arch",
			want: func(p string) string {
				return map[string]string{"linux/amd64": "amd64", "linux/arm64": "arm64"}[p] + " " +
					map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
			},
		},
		"COPY --from an image": {
			dockerfile: "ARG BASE\nFROM scratch\nARG BASE\nCOPY --from=$BASE /bin/busybox /busybox\n",
			file:       "/busybox",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out := theBed.Registry.Host + "/it/unkeyed-" + uniqueName() + ":v1"
			log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64,linux/arm64",
				"--build-arg", "BASE="+theBed.BaseImage, "-t", out, writeContext(t, tc.dockerfile))
			g.Expect(code).To(Equal(0), log)

			for _, f := range indexTopFiles(t, out, 2, tc.file) {
				if tc.want != nil {
					g.Expect(strings.TrimSpace(f.content)).To(Equal(tc.want(f.platform)), "the %s image", f.platform)
				} else {
					g.Expect(f.content).NotTo(BeEmpty())
				}
			}
		})
	}
}

// TestBuildTarget builds one stage of a multi-stage Dockerfile by name, as
// docker buildx build --target does, for two platforms: each image is that
// stage's. With a kept --work-dir the same build again is reused, while
// another target builds (the target is keyed).
func TestBuildTarget(t *testing.T) {
	g := NewWithT(t)
	ctxDir := writeContext(t, "ARG BASE\nFROM $BASE AS base\nRUN echo base > /which\n"+
		"FROM base AS test\nRUN echo test > /which\nFROM base AS prod\nRUN echo prod > /which\n")
	work := t.TempDir()
	run := uniqueName()
	build := func(tag, target, want string) string {
		t.Helper()
		out := theBed.Registry.Host + "/it/target" + run + ":" + tag
		args := []string{"build", "--platform", "linux/amd64,linux/arm64", "--build-arg", "BASE=" + theBed.BaseImage,
			"--work-dir", work, "-t", out}
		if target != "" {
			args = append(args, "--target", target)
		}
		log, code := runBuilder(t, nil, append(args, ctxDir)...)
		g.Expect(code).To(Equal(0), log)
		for _, f := range indexTopFiles(t, out, 2, "/which") {
			g.Expect(f.content).To(Equal(want+"\n"), "the %s image of target %q", f.arch, target)
		}
		return log
	}
	g.Expect(build("test", "test", "test")).NotTo(ContainSubstring("Reusing image"))
	g.Expect(build("test-again", "test", "test")).To(ContainSubstring("Reusing image"))
	g.Expect(build("prod", "", "prod")).NotTo(ContainSubstring("Reusing image"), "the last stage is another target")
	g.Expect(build("base", "base", "base")).NotTo(ContainSubstring("Reusing image"))

	log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "--build-arg", "BASE="+theBed.BaseImage,
		"--target", "nope", ctxDir)
	g.Expect(code).NotTo(Equal(0), log)
	g.Expect(log).To(ContainSubstring("nope"), "the error names the missing target")
}

// TestBuildSecrets builds a Dockerfile that reads secrets through RUN
// --mount=type=secret, as Dockerfiles written for buildx do, from a file
// and from an environment variable given with --secret: the step reads
// them, the image holds neither, and with a kept --work-dir the build is
// never reused (a secret's content is keyed by nothing). A required secret
// not given fails the build, and a wrong --secret is refused before any
// build starts.
func TestBuildSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ctxDir := writeContext(t, "ARG BASE\nFROM $BASE\n"+
		"RUN --mount=type=secret,id=token,required=true --mount=type=secret,id=key,env=KEY "+
		"{ wc -c < /run/secrets/token; echo \"${#KEY}\"; ls /run/secrets; } > /out\n")
	token := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(token, []byte("s3cr3t-token"), 0o600)).To(Succeed())
	work := t.TempDir()
	out := theBed.Registry.Host + "/it/secrets" + uniqueName() + ":v1"
	env := []string{"ARCHWAY_TEST_KEY=0123456789"}
	args := []string{"build", "--platform", "linux/amd64,linux/arm64", "--build-arg", "BASE=" + theBed.BaseImage,
		"--work-dir", work, "--secret", "id=token,src=" + token, "--secret", "id=key,env=ARCHWAY_TEST_KEY", "-t", out, ctxDir}
	for range 2 {
		log, code := runBuilder(t, env, args...)
		g.Expect(code).To(Equal(0), log)
		g.Expect(log).NotTo(ContainSubstring("Reusing image"), "a build reading secrets is never reused")
		g.Expect(log).NotTo(ContainSubstring("s3cr3t-token"))
	}
	img, err := theBed.Registry.OpenImage(ctx, out)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.Manifests).To(HaveLen(2))
	for _, d := range index.Manifests {
		got, err := img.TopLayerFile(ctx, d.Digest, "/out")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Fields(got)).To(Equal([]string{"12", "10", "token"}), "the step read both; only the file one is a file")
		_, err = img.TopLayerFile(ctx, d.Digest, "/run/secrets/token")
		g.Expect(err).To(HaveOccurred(), "the secret is not in the image")
	}

	log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "--build-arg", "BASE="+theBed.BaseImage, ctxDir)
	g.Expect(code).NotTo(Equal(0), log)
	g.Expect(log).To(ContainSubstring("token"), "a required secret not given fails, naming it")
	for _, bad := range []struct{ secret, want string }{
		{"src=" + token, "--secret: "},
		{"id=token,src=" + filepath.Join(t.TempDir(), "missing"), "no such file or directory"},
		{"id=token,src=" + t.TempDir(), "is not a regular file"},
		{"id=token,kind=file", "--secret: "},
	} {
		log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "--secret", bad.secret, ctxDir)
		g.Expect(code).NotTo(Equal(0), log)
		g.Expect(log).To(ContainSubstring(bad.want), bad.secret)
		g.Expect(log).NotTo(ContainSubstring("STEP"), "refused before any build")
	}
}

// topFile is a file of the top layer of an index's image.
type topFile struct {
	platform string // the image's, normalized (linux/arm64)
	arch     string
	digest   digest.Digest
	content  string
}

// indexTopFiles opens the index ref, checks that it holds n images, and
// reads path from each image's top layer.
func indexTopFiles(t testing.TB, ref string, n int, path string) []topFile {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	img, err := theBed.Registry.OpenImage(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.Manifests).To(HaveLen(n))
	files := make([]topFile, 0, n)
	for _, d := range index.Manifests {
		got, err := img.TopLayerFile(ctx, d.Digest, path)
		g.Expect(err).NotTo(HaveOccurred())
		files = append(files, topFile{platform: platform.FromOCI(*d.Platform).Normalize().String(),
			arch: d.Platform.Architecture, digest: d.Digest, content: got})
	}
	return files
}
