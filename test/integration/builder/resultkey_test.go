package builder_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/archway-build/archway/pkg/build/builder/image"
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
	b, err := image.New(image.Config{WorkDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = b.Close() }()
	amd64, _ := platform.Parse("linux/amd64")
	var log strings.Builder
	_, err = b.BuildAndPush(ctx, image.Request{
		ContextDir: writeContext(t, "FROM "+base+"\nONBUILD COPY . /app\n"), Platform: amd64, Out: &log,
		Format: image.FormatDocker,
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
		c := resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/onbuild-app:v1", format: image.FormatDocker}
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

// TestResultPinsBaseDigest builds with --work-dir's result reuse from a base
// tag whose image the store already has, after the tag moved to another
// image: the key names the registry's new digest, and the build must use
// that image (pinned by digest), not the store's old one under the tag.
// The pinned build's config and history are those of an unpinned build
// of the same Dockerfile (RUN mounts make a build unkeyed and unpinned).
func TestResultPinsBaseDigest(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/pin-base:v1"
	_, err := theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, "ARG BASE\nFROM $BASE\nCOPY a.txt /a.txt\n")
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("a\n"), 0o644)).To(Succeed())
	amd64, _ := platform.Parse("linux/amd64")
	work := t.TempDir()
	build := func(workDir, dest string, mounts []string) (image.Output, string) {
		t.Helper()
		b, err := image.New(image.Config{WorkDir: workDir})
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = b.Close() }()
		var log strings.Builder
		out, err := b.BuildAndPush(ctx, image.Request{
			ContextDir: ctxDir, Platform: amd64, Args: map[string]string{"BASE": base}, Out: &log,
			ReuseResults: true, Layers: true, RunMounts: mounts,
		}, dest, noAuth)
		g.Expect(err).NotTo(HaveOccurred(), log.String())
		return out, log.String()
	}
	layersOf := func(ref string) ([]string, *ocispec.Image, map[string]string) {
		t.Helper()
		img, err := reg.OpenImage(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		defer img.Close()
		raw, _, err := img.Manifest(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		var m struct {
			Layers      []struct{ Digest string }
			Annotations map[string]string
		}
		g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
		var layers []string
		for _, l := range m.Layers {
			layers = append(layers, l.Digest)
		}
		cfg, err := img.Config(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		return layers, cfg, m.Annotations
	}
	dest := reg.Host + "/it/pin-app"
	first, _ := build(work, dest+":1", nil)
	firstLayers, _, _ := layersOf(digestReferenceOf(dest+":1", first.Image.Digest))
	g.Expect(firstLayers).To(HaveLen(2))

	// The tag moves to the base with a layer added.
	moveBaseTag(t, base)

	second, secondLog := build(work, dest+":2", nil)
	g.Expect(second.Build.Reused).To(BeFalse(), secondLog)
	secondLayers, secondConfig, secondAnn := layersOf(digestReferenceOf(dest+":2", second.Image.Digest))
	g.Expect(secondLayers).To(HaveLen(3), "built from the moved tag's image, not the store's old one\n%s", secondLog)
	third, thirdLog := build(work, dest+":3", nil)
	g.Expect(third.Build.Reused).To(BeTrue(), thirdLog)
	g.Expect(third.Image.Digest).To(Equal(second.Image.Digest))

	unpinned, unpinnedLog := build(t.TempDir(), dest+":unpinned", []string{t.TempDir() + ":/mnt/unused"})
	g.Expect(unpinnedLog).NotTo(ContainSubstring("@sha256:"), "not pinned")
	g.Expect(secondLog).To(ContainSubstring("FROM "+reg.Host+"/it/pin-base@sha256:"), "pinned")
	unpinnedLayers, unpinnedConfig, unpinnedAnn := layersOf(digestReferenceOf(dest+":unpinned", unpinned.Image.Digest))
	g.Expect(unpinnedLayers).To(HaveLen(3))
	g.Expect(unpinnedLayers[:2]).To(Equal(secondLayers[:2]), "the same base layers")
	createdBy := func(c *ocispec.Image) []string {
		var out []string
		for _, h := range c.History {
			out = append(out, h.CreatedBy)
		}
		return out
	}
	g.Expect(createdBy(secondConfig)).To(Equal(createdBy(unpinnedConfig)), "the same history")
	g.Expect(secondConfig.Config).To(Equal(unpinnedConfig.Config), "the same config")
	g.Expect(secondConfig.RootFS.DiffIDs[:2]).To(Equal(unpinnedConfig.RootFS.DiffIDs[:2]))
	g.Expect(secondAnn["org.opencontainers.image.base.digest"]).To(Equal(unpinnedAnn["org.opencontainers.image.base.digest"]))
	fmt.Printf("pinned base annotations %v, unpinned %v\n", secondAnn, unpinnedAnn)
}

// TestCachedResultTagRefused builds with a layer cache reached through a
// proxy that refuses every result tag's manifest, as a registry keeping
// tags immutable refuses a second write: the build warns that the result
// is not kept and still pushes its labelled image to the output, writing
// the output's tag once (never with the image unlabelled).
func TestCachedResultTagRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	target, err := url.Parse(reg.URL("/"))
	g.Expect(err).NotTo(HaveOccurred())
	forward := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/result-") {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"errors":[{"code":"TAG_INVALID","message":"the tag is immutable"}]}`)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	proxyHost := strings.TrimPrefix(proxy.URL, "http://")

	base := reg.Host + "/it/refused-base:v1"
	_, err = theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, "ARG BASE\nFROM $BASE\nCOPY a.txt /a.txt\n")
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("a\n"), 0o644)).To(Succeed())
	cacheRepo, err := platform.CacheRepository(proxyHost+"/it/refused-cache", "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	c := resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/refused:v1"}
	before, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	out := c.build("linux/amd64", "refused", map[string]string{"BASE": base}, false)
	after, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	puts := 0
	for _, r := range after[len(before):] {
		if r.Method == http.MethodPut && r.Path == "/v2/it/refused/manifests/v1" {
			puts++
		}
	}
	g.Expect(puts).To(Equal(1), "the output's tag is written once, labelled: it never names the image without its labels")
	last := out.config.History[len(out.config.History)-1]
	g.Expect(last.CreatedBy).To(HavePrefix("LABEL "))
	g.Expect(last.EmptyLayer).To(BeTrue())
	g.Expect(refused.Load()).To(BeNumerically(">", 0), "the result tag was refused")
	g.Expect(out.log).To(ContainSubstring("Warning: the result is not kept in the layer cache"), out.log)
	g.Expect(out.labels).To(HaveKeyWithValue("io.openshift.build.name", "refused"), "the output is pushed, labelled")
	g.Expect(out.layers).To(HaveLen(2))
}
