package builder_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/signature"

	"github.com/archway-build/archway/test/bed"
)

// reuseDockerfile's image depends on a copied file, a build arg and the
// base image.
const reuseDockerfile = `ARG BASE
FROM $BASE
COPY a.txt /a.txt
ARG GREETING=hello
RUN echo "$GREETING" > /greeting && uname -m > /arch
`

// TestBuildReusesResults builds the same two-platform Dockerfile again and
// again with one kept --work-dir: a build whose Dockerfile, context, build
// args and base image digests are all those of an earlier one runs no step
// and pushes the earlier images under the new tag (same digests), while a
// one-byte change in a copied file, a changed build arg, --no-cache and a
// base tag moved to another image each build anew.
func TestBuildReusesResults(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	platforms := []string{"linux/amd64", "linux/arm64"}
	base := reg.Host + "/it/reuse-base:latest"
	copyIndex(t, theBed.BaseImage, base)

	ctxDir := writeContext(t, reuseDockerfile)
	file := filepath.Join(ctxDir, "a.txt")
	g.Expect(os.WriteFile(file, []byte("one\n"), 0o644)).To(Succeed())
	work := t.TempDir()

	// build builds to tag and returns the output, whether every platform
	// was reused, and the index's image digests by platform.
	build := func(tag string, extra ...string) (string, bool, map[string]digest.Digest) {
		t.Helper()
		ref := reg.Host + "/it/reuse:" + tag
		args := append([]string{"build", "--platform", strings.Join(platforms, ","), "--build-arg", "BASE=" + base,
			"--work-dir", work, "-t", ref}, append(extra, ctxDir)...)
		log, code := runBuilder(t, nil, args...)
		g.Expect(code).To(Equal(0), log)
		checkIndex(ctx, g, reg, ref, platforms)
		img, err := reg.OpenImage(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		defer img.Close()
		index, _, err := img.Index(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		digests := map[string]digest.Digest{}
		for _, d := range index.Manifests {
			digests[d.Platform.Architecture] = d.Digest
		}
		reused := strings.Count(log, "Reusing image")
		if reused > 0 {
			g.Expect(reused).To(Equal(len(platforms)), log)
			g.Expect(log).NotTo(ContainSubstring("STEP "), "a reused build runs no step\n%s", log)
		} else {
			g.Expect(log).To(MatchRegexp(`STEP \d+/\d+: COPY a.txt`), log)
		}
		tags, err := reg.Tags(ctx, "it/reuse")
		g.Expect(err).NotTo(HaveOccurred())
		for _, tg := range tags {
			g.Expect(tg).NotTo(HavePrefix(tag+"-"), "per-platform tags are removed")
		}
		return log, reused > 0, digests
	}

	_, reused, first := build("v1")
	g.Expect(reused).To(BeFalse(), "the first build builds")

	log, reused, again := build("v2")
	g.Expect(reused).To(BeTrue(), "the same inputs again reuse the images\n%s", log)
	g.Expect(again).To(Equal(first), "and push the same images")

	g.Expect(os.WriteFile(file, []byte("onf\n"), 0o644)).To(Succeed())
	_, reused, changed := build("file-changed")
	g.Expect(reused).To(BeFalse(), "a one-byte change in a copied file builds again")
	g.Expect(changed).NotTo(Equal(first))

	g.Expect(os.WriteFile(file, []byte("one\n"), 0o644)).To(Succeed())
	_, reused, back := build("file-back")
	g.Expect(reused).To(BeTrue(), "the file as it was reuses the first images")
	g.Expect(back).To(Equal(first))

	_, reused, argChanged := build("arg-changed", "--build-arg", "GREETING=bye")
	g.Expect(reused).To(BeFalse(), "a changed build arg builds again")
	g.Expect(argChanged).NotTo(Equal(first))

	_, reused, _ = build("no-cache", "--no-cache")
	g.Expect(reused).To(BeFalse(), "--no-cache builds again")

	// The base tag now names another image (the first build's index).
	copyIndex(t, reg.Host+"/it/reuse:v1", base)
	_, reused, newBase := build("base-moved")
	g.Expect(reused).To(BeFalse(), "a base tag moved to another image builds again")
	g.Expect(newBase).NotTo(Equal(first))
}

// copyIndex copies the index src, with every image, to dest.
func copyIndex(t *testing.T, src, dest string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), bed.CaseTimeout)
	defer cancel()
	srcRef, err := docker.ParseReference("//" + src)
	if err != nil {
		t.Fatal(err)
	}
	destRef, err := docker.ParseReference("//" + dest)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := signature.NewPolicyContext(&signature.Policy{
		Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = policy.Destroy() }()
	if _, err := copy.Image(ctx, policy, destRef, srcRef, &copy.Options{
		ImageListSelection: copy.CopyAllImages,
		PreserveDigests:    true,
		SourceCtx:          theBed.Registry.SystemContext(),
		DestinationCtx:     theBed.Registry.SystemContext(),
	}); err != nil {
		t.Fatalf("copying %s to %s: %v", src, dest, err)
	}
}

// TestBuildContextChangedDuringBuild changes a copied file while a build
// runs, after the build digested its inputs and before its COPY reads the
// file: the image may hold the new content, so it must not be kept under
// the digest of the old, and a build of the old content afterwards builds.
func TestBuildContextChangedDuringBuild(t *testing.T) {
	g := NewWithT(t)
	ctxDir := writeContext(t, "ARG BASE\nFROM $BASE\nRUN sleep 3\nCOPY a.txt /a.txt\n")
	file := filepath.Join(ctxDir, "a.txt")
	g.Expect(os.WriteFile(file, []byte("old\n"), 0o644)).To(Succeed())
	work := t.TempDir()
	bin, err := builderBinary()
	g.Expect(err).NotTo(HaveOccurred())
	args := []string{"build", "--platform", "linux/amd64", "--build-arg", "BASE=" + theBed.BaseImage,
		"--work-dir", work, "-t", theBed.Registry.Host + "/it/reuse-race:v1", ctxDir}

	ctx, cancel := context.WithTimeout(t.Context(), bed.BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	g.Expect(cmd.Start()).To(Succeed())
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait(); _ = pw.Close() }()
	var log strings.Builder
	changed := false
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !changed && strings.Contains(sc.Text(), "RUN sleep 3") {
			// The step runs for three seconds; the COPY comes after it.
			g.Expect(os.WriteFile(file, []byte("new\n"), 0o644)).To(Succeed())
			changed = true
		}
	}
	g.Expect(<-waited).To(Succeed(), log.String())
	g.Expect(changed).To(BeTrue(), log.String())
	g.Expect(log.String()).To(ContainSubstring("The build context changed during the build"))

	g.Expect(os.WriteFile(file, []byte("old\n"), 0o644)).To(Succeed())
	args[len(args)-2] = theBed.Registry.Host + "/it/reuse-race:v2"
	out, code := runBuilder(t, nil, args...)
	g.Expect(code).To(Equal(0), out)
	g.Expect(out).NotTo(ContainSubstring("Reusing image"), "the image built while the file changed is not reused for the old content")
}

// crossDockerfile cross-compiles as Dockerfiles written for buildx do: a
// stage on the build machine's platform ($BUILDPLATFORM) makes each
// target's file, which the target's image copies.
const crossDockerfile = `ARG BASE
ARG TOOLCHAIN
FROM --platform=$BUILDPLATFORM $TOOLCHAIN AS build
ARG TARGETARCH
COPY a.txt /a.txt
RUN t=first; if [ -e /out ]; then t=moved; fi; { cat /a.txt; echo "$TARGETARCH $(uname -m) $t"; } > /out
FROM $BASE
COPY --from=build /out /out
`

// TestBuildReusesCrossCompiledResults builds crossDockerfile again with one
// kept --work-dir: the stage's image is keyed by its digest for the build
// machine's platform, so the same inputs reuse every platform's image,
// while the toolchain tag moved to another image builds again.
func TestBuildReusesCrossCompiledResults(t *testing.T) {
	g := NewWithT(t)
	reg := theBed.Registry
	platforms := []string{"linux/amd64", "linux/arm64"}
	run := uniqueName()
	base, toolchain := reg.Host+"/it/cross-base"+run+":latest", reg.Host+"/it/cross-toolchain"+run+":latest"
	copyIndex(t, theBed.BaseImage, base)
	copyIndex(t, theBed.BaseImage, toolchain)
	ctxDir := writeContext(t, crossDockerfile)
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("one\n"), 0o644)).To(Succeed())
	work := t.TempDir()
	machine := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]

	// build builds to tag with the toolchain said, and returns whether
	// every platform was reused and the images' digests.
	build := func(tag, toolchainSays string) (bool, map[string]digest.Digest) {
		t.Helper()
		ref := reg.Host + "/it/cross" + run + ":" + tag
		log, code := runBuilder(t, nil, "build", "--platform", strings.Join(platforms, ","), "--build-arg", "BASE="+base,
			"--build-arg", "TOOLCHAIN="+toolchain, "--work-dir", work, "-t", ref, ctxDir)
		g.Expect(code).To(Equal(0), log)
		digests := map[string]digest.Digest{}
		for _, f := range indexTopFiles(t, ref, len(platforms), "/out") {
			digests[f.arch] = f.digest
			g.Expect(f.content).To(Equal("one\n"+f.arch+" "+machine+" "+toolchainSays+"\n"),
				"the stage ran on the build machine for %s, with the toolchain the tag names", f.arch)
		}
		reused := strings.Count(log, "Reusing image")
		g.Expect(reused).To(Or(Equal(0), Equal(len(platforms))), log)
		return reused > 0, digests
	}

	reused, first := build("v1", "first")
	g.Expect(reused).To(BeFalse(), "the first build builds")
	reused, again := build("v2", "first")
	g.Expect(reused).To(BeTrue(), "the same inputs reuse every platform's image")
	g.Expect(again).To(Equal(first))

	// The toolchain tag now names another image (the first build's index,
	// which has an /out).
	copyIndex(t, reg.Host+"/it/cross"+run+":v1", toolchain)
	reused, moved := build("toolchain-moved", "moved")
	g.Expect(reused).To(BeFalse(), "a toolchain tag moved to another image builds again")
	g.Expect(moved).NotTo(Equal(first))
}

// TestBuildReusesResultsWithMounts builds Dockerfiles whose RUN step has
// mounts, as Dockerfiles written for buildx have, again with one kept
// --work-dir: a cache's content is a cache, keyed by nothing (as BuildKit
// and buildah's layer cache take it), and a bind mount of the context is
// keyed by every file of its source, those the ignore file leaves out
// included (buildah binds the context as it is). So the same inputs reuse
// every platform's image, and a one-byte change in the file the step reads,
// copied or bind-mounted, ignored or not, builds again with the new content.
// A secret mount builds every time.
func TestBuildReusesResultsWithMounts(t *testing.T) {
	for _, tc := range []struct {
		name, run, ignore string
		unkeyed           bool // the build reads what no key sees: it builds every time
	}{
		{name: "cache and tmpfs",
			run: "COPY in.txt /in\nRUN --mount=type=cache,target=/cache --mount=type=tmpfs,target=/scratch cat /in > /out && touch /cache/stamp /scratch/x"},
		{name: "bind of an ignored file of the context", ignore: "in.txt\n",
			run: "RUN --mount=type=bind,source=in.txt,target=/in cat /in > /out"},
		{name: "bind of the whole context",
			run: "RUN --mount=type=bind,target=/ctx --mount=type=cache,target=/cache cat /ctx/in.txt > /out"},
		{name: "bind from a stage",
			run: "COPY in.txt /in\nFROM $BASE\nRUN --mount=type=bind,from=0,source=/in,target=/in cat /in > /out"},
		{name: "a secret", unkeyed: true,
			run: "COPY in.txt /in\nRUN --mount=type=secret,id=token cat /in > /out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := theBed.Registry
			platforms := []string{"linux/amd64", "linux/arm64"}
			run := uniqueName()
			ctxDir := writeContext(t, "ARG BASE\nFROM $BASE\n"+tc.run+"\n")
			g.Expect(os.WriteFile(filepath.Join(ctxDir, "in.txt"), []byte("one\n"), 0o644)).To(Succeed())
			if tc.ignore != "" {
				g.Expect(os.WriteFile(filepath.Join(ctxDir, ".dockerignore"), []byte(tc.ignore), 0o644)).To(Succeed())
			}
			work := t.TempDir()
			build := func(tag, want string) bool {
				t.Helper()
				ref := reg.Host + "/it/mounts" + run + ":" + tag
				log, code := runBuilder(t, nil, "build", "--platform", strings.Join(platforms, ","),
					"--build-arg", "BASE="+theBed.BaseImage, "--work-dir", work, "-t", ref, ctxDir)
				g.Expect(code).To(Equal(0), log)
				for _, f := range indexTopFiles(t, ref, len(platforms), "/out") {
					g.Expect(f.content).To(Equal(want))
				}
				reused := strings.Count(log, "Reusing image")
				g.Expect(reused).To(Or(Equal(0), Equal(len(platforms))), log)
				return reused > 0
			}
			g.Expect(build("v1", "one\n")).To(BeFalse(), "the first build builds")
			g.Expect(build("v2", "one\n")).To(Equal(!tc.unkeyed), "the same inputs again")
			g.Expect(os.WriteFile(filepath.Join(ctxDir, "in.txt"), []byte("onf\n"), 0o644)).To(Succeed())
			g.Expect(build("changed", "onf\n")).To(BeFalse(), "a one-byte change in the file the step reads builds again")
		})
	}
}
