package builder_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"

	"github.com/archway-build/archway/pkg/build/imagebuild"
	"github.com/archway-build/archway/pkg/platform"
)

// TestCachedResultIgnoreFileByDockerfile builds two Dockerfiles of the same
// content in one context with a layer cache: buildah picks the ignore file
// by the Dockerfile's name, and a.Dockerfile.dockerignore leaves d/x out of
// a's image. b's build must not reuse a's result: it builds, and its COPY
// layer (with d/x) is another.
func TestCachedResultIgnoreFileByDockerfile(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/ignore-base:v1"
	_, err := theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := t.TempDir()
	for name, content := range map[string]string{
		"a.Dockerfile":              "ARG BASE\nFROM $BASE\nCOPY d /d\n",
		"b.Dockerfile":              "ARG BASE\nFROM $BASE\nCOPY d /d\n",
		"a.Dockerfile.dockerignore": "d/x\n",
		"d/x":                       "x\n",
		"d/y":                       "y\n",
	} {
		p := filepath.Join(ctxDir, name)
		g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	cacheRepo, err := platform.CacheRepository(reg.Host+"/it/ignore-app-cache", "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	args := map[string]string{"BASE": base}
	a := resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/ignore-app:a", dockerfile: "a.Dockerfile"}
	first := a.build("linux/amd64", "a", args, false)
	g.Expect(builtSteps(first.log)).To(BeTrue(), first.log)
	g.Expect(resultTags(t, reg, cacheRepo)).To(HaveLen(1))
	again := a.build("linux/amd64", "a2", args, false)
	g.Expect(builtSteps(again.log)).To(BeFalse(), "the same Dockerfile reuses its result\n%s", again.log)

	b := a
	b.dockerfile, b.dest = "b.Dockerfile", reg.Host+"/it/ignore-app:b"
	other := b.build("linux/amd64", "b", args, false)
	g.Expect(builtSteps(other.log)).To(BeTrue(), "b.Dockerfile has no ignore file: a's result (without d/x) is not its\n%s", other.log)
	g.Expect(other.layers).To(HaveLen(2))
	g.Expect(other.layers[1]).NotTo(Equal(first.layers[1]), "b's COPY has d/x")
}

// TestCachedResultOnBuildBase builds from a base whose config has ONBUILD
// triggers (they run in the build and may read any file of the context),
// as a single image and as the image an index chooses: the build has no
// result key, so nothing is looked up or kept in the cache repository.
func TestCachedResultOnBuildBase(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/onbuild-plain:v1"
	_, err := theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	// ONBUILD is kept in the Docker format's config.
	single := reg.Host + "/it/onbuild-base:single"
	b, err := imagebuild.New(imagebuild.Config{WorkDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = b.Close() }()
	amd64, _ := platform.Parse("linux/amd64")
	var log strings.Builder
	_, err = b.BuildAndPush(ctx, imagebuild.Request{
		ContextDir: writeContext(t, "FROM "+base+"\nONBUILD COPY . /app\n"), Platform: amd64, Out: &log,
		Format: imagebuild.FormatDocker,
	}, single, noAuth)
	g.Expect(err).NotTo(HaveOccurred(), log.String())

	// The same image as an index's linux/amd64 entry.
	index := reg.Host + "/it/onbuild-base:index"
	ref, err := name.ParseReference(single, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	img, err := remote.Image(ref, remote.WithContext(ctx))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Config.OnBuild).To(Equal([]string{"COPY . /app"}), "the base has the trigger")
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, ggcrtypes.DockerManifestList),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	idxRef, err := name.ParseReference(index, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.WriteIndex(idxRef, idx, remote.WithContext(ctx))).To(Succeed())

	for _, from := range []string{single, index} {
		ctxDir := writeContext(t, "ARG BASE\nFROM $BASE\nCOPY a.txt /a.txt\n")
		g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("a\n"), 0o644)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(ctxDir, "main.go"), []byte("package main\n"), 0o644)).To(Succeed())
		cacheRepo, err := platform.CacheRepository(reg.Host+"/it/onbuild-app-cache-"+from[strings.LastIndex(from, ":")+1:], "linux/amd64")
		g.Expect(err).NotTo(HaveOccurred())
		c := resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/onbuild-app:v1", format: imagebuild.FormatDocker}
		out := c.build("linux/amd64", "first", map[string]string{"BASE": from}, false)
		g.Expect(builtSteps(out.log)).To(BeTrue(), out.log)
		g.Expect(out.log).NotTo(ContainSubstring("No earlier result"), "%s: a build from a base with ONBUILD is not looked up\n%s", from, out.log)
		g.Expect(resultTags(t, reg, cacheRepo)).To(BeEmpty(), "%s: nor kept", from)
	}
}

// TestCachedResultForged puts its own result with the variant left out of
// the config under the result tag of a linux/arm/v7 build: an image that
// would run there, but not the one buildah built. The build does not use
// it, says why, and builds. (Layers with URLs or of non-distributable
// types, which a push leaves out, are refused by the bed's registry
// itself; TestCheckCachedLayers covers them.)
func TestCachedResultForged(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/forged-base:v1"
	g.Expect(reg.CopyIndex(ctx, theBed.BaseImage, base, nil)).To(Succeed())
	ctxDir := writeContext(t, "ARG BASE\nFROM $BASE\nCOPY a.txt /a.txt\n")
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("a\n"), 0o644)).To(Succeed())
	cacheRepo, err := platform.CacheRepository(reg.Host+"/it/forged-cache", "linux/arm/v7")
	g.Expect(err).NotTo(HaveOccurred())
	c := resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/forged:v1"}
	args := map[string]string{"BASE": base}
	first := c.build("linux/arm/v7", "first", args, false)
	g.Expect(builtSteps(first.log)).To(BeTrue(), first.log)
	g.Expect(first.config.Variant).To(Equal("v7"), "buildah records the variant")
	tags := resultTags(t, reg, cacheRepo)
	g.Expect(tags).To(HaveLen(1))
	tag, err := name.NewTag(cacheRepo+":"+tags[0], name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	orig, err := remote.Image(tag, remote.WithContext(ctx))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := orig.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	cfg = cfg.DeepCopy()
	cfg.Variant = ""
	forged, err := mutate.ConfigFile(orig, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(tag, forged, remote.WithContext(ctx))).To(Succeed())
	out := c.build("linux/arm/v7", "again", args, false)
	g.Expect(out.log).To(ContainSubstring(`records platform "linux/arm", not the target linux/arm/v7`), out.log)
	g.Expect(builtSteps(out.log)).To(BeTrue(), "the forged image is not used\n%s", out.log)
	g.Expect(out.layers).To(Equal(first.layers))
}
