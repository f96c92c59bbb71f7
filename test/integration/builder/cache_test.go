package builder_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"

	"github.com/archway-build/archway/pkg/build/imagebuild"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// cacheDockerfile appends a line naming each RUN step to /mnt/marker/runs
// when the step runs, so a test counts the steps a build ran.
const cacheDockerfile = `ARG BASE
FROM $BASE
COPY a.txt /a.txt
RUN echo a >> /mnt/marker/runs && cat /a.txt > /one
COPY b.txt /b.txt
RUN echo b >> /mnt/marker/runs && cat /b.txt > /two
ARG GREETING=hello
RUN echo greeting >> /mnt/marker/runs && echo "$GREETING" > /three
ARG VERSION=1 DEST=/d1
ENV VERSION=$VERSION
COPY a.txt $DEST/a.txt
`

// cacheBuild is one build of a cache test: a fresh store, as every build
// pod starts with, and the registry cache.
type cacheBuild struct {
	t      *testing.T
	ctxDir string
	marker string
	cache  string // the platform's cache repository
	dest   string
}

type cacheResult struct {
	runs    []string // the RUN steps that ran
	diffIDs []digest.Digest
	env     []string
	top     string // what the last step wrote where DEST points
	log     string
	took    time.Duration
}

func (c cacheBuild) build(args map[string]string, noCache bool) cacheResult {
	dest := "/d1"
	if d, ok := args["DEST"]; ok {
		dest = d
	}
	t := c.t
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	runs := filepath.Join(c.marker, "runs")
	g.Expect(os.WriteFile(runs, nil, 0o644)).To(Succeed())
	b, err := imagebuild.New(imagebuild.Config{WorkDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = b.Close() }()
	amd64, _ := platform.Parse("linux/amd64")
	var log strings.Builder
	start := time.Now()
	out, err := b.BuildAndPush(ctx, imagebuild.Request{
		ContextDir: c.ctxDir, Platform: amd64, Args: args, NoCache: noCache,
		RunMounts: []string{c.marker + ":/mnt/marker"},
		Cache:     &imagebuild.Cache{Repository: c.cache}, Out: &log,
	}, c.dest, noAuth)
	took := time.Since(start)
	g.Expect(err).NotTo(HaveOccurred(), log.String())
	data, err := os.ReadFile(runs)
	g.Expect(err).NotTo(HaveOccurred())
	img, err := theBed.Registry.OpenImage(ctx, digestReferenceOf(c.dest, out.Image.Digest))
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	cfg, err := img.Config(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	top, err := img.TopLayerFile(ctx, digest.Digest(out.Image.Digest), dest+"/a.txt")
	g.Expect(err).NotTo(HaveOccurred(), "the last COPY writes to %s", dest)
	return cacheResult{runs: strings.Fields(string(data)), diffIDs: cfg.RootFS.DiffIDs, env: cfg.Config.Env, top: top,
		log: log.String(), took: took}
}

func digestReferenceOf(ref, d string) string {
	repo, _, _ := strings.Cut(ref, ":")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo = ref[:i]
	}
	return repo + "@" + d
}

// TestRegistryLayerCache builds one Dockerfile again and again, each time
// in a fresh store as a build pod does, with a layer cache in the bed's
// registry, and counts the RUN steps that ran: a second build runs none and
// gives the same layers; a one-byte change in a copied file runs the steps
// from that COPY on and reuses the ones before; a changed build arg runs
// the steps from the first RUN that sees it; a changed ARG behind an ENV
// or a COPY destination gives the new value or place (those rebuild every
// step); a base image tag moved to another digest runs every
// step; noCache runs every step.
func TestRegistryLayerCache(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/cache-base:v1"
	_, err := theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())

	ctxDir := writeContext(t, cacheDockerfile)
	write := func(name, content string) {
		g.Expect(os.WriteFile(filepath.Join(ctxDir, name), []byte(content), 0o644)).To(Succeed())
	}
	write("a.txt", "alpha\n")
	write("b.txt", "bravo\n")
	cacheRepo, err := platform.CacheRepository(reg.Host+"/it/cache-app-cache", "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	c := cacheBuild{t: t, ctxDir: ctxDir, marker: t.TempDir(), cache: cacheRepo, dest: reg.Host + "/it/cache-app:v1"}
	args := map[string]string{"BASE": base}

	first := c.build(args, false)
	g.Expect(first.runs).To(Equal([]string{"a", "b", "greeting"}), first.log)
	g.Expect(first.diffIDs).To(HaveLen(7), "the base's layer and one per COPY and RUN")
	tags, err := reg.Tags(ctx, strings.TrimPrefix(cacheRepo, reg.Host+"/"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).NotTo(BeEmpty(), "the steps are pushed to the platform's cache repository")

	second := c.build(args, false)
	g.Expect(second.runs).To(BeEmpty(), "a second build runs no step\n%s", second.log)
	g.Expect(second.diffIDs).To(Equal(first.diffIDs), "and gives the same layers")
	g.Expect(second.env).To(ContainElement("VERSION=1"))
	fmt.Printf("registry layer cache, linux/amd64, fresh store each time: first build %.2fs, second %.2fs\n",
		first.took.Seconds(), second.took.Seconds())

	write("b.txt", "bravO\n")
	changed := c.build(args, false)
	g.Expect(changed.runs).To(Equal([]string{"b", "greeting"}), "a one-byte change in b.txt runs the steps from COPY b.txt on\n%s", changed.log)
	g.Expect(changed.diffIDs[:3]).To(Equal(first.diffIDs[:3]), "the base, COPY a.txt and its RUN are reused")
	g.Expect(changed.diffIDs[3]).NotTo(Equal(first.diffIDs[3]), "COPY b.txt is new")
	write("b.txt", "bravo\n")

	greeting := c.build(map[string]string{"BASE": base, "GREETING": "bonjour"}, false)
	g.Expect(greeting.runs).To(Equal([]string{"greeting"}), "a changed GREETING runs the RUN that sees it\n%s", greeting.log)
	g.Expect(greeting.diffIDs[:5]).To(Equal(first.diffIDs[:5]))

	version := c.build(map[string]string{"BASE": base, "VERSION": "2"}, false)
	g.Expect(version.env).To(ContainElement("VERSION=2"), "an ENV set from a changed ARG has the new value\n%s", version.log)
	dest := c.build(map[string]string{"BASE": base, "DEST": "/d2"}, false)
	g.Expect(dest.top).To(Equal("alpha\n"), "a COPY to a changed ARG's directory writes there")

	noCache := c.build(args, true)
	g.Expect(noCache.runs).To(Equal([]string{"a", "b", "greeting"}), "noCache runs every step\n%s", noCache.log)

	// The base tag moves to another image (the base with a file added):
	// every step runs again.
	nb, err := imagebuild.New(imagebuild.Config{WorkDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = nb.Close() }()
	amd64, _ := platform.Parse("linux/amd64")
	var log strings.Builder
	_, err = nb.BuildAndPush(ctx, imagebuild.Request{
		ContextDir: writeContext(t, "FROM "+base+"\nRUN echo 2 > /base-version\n"), Platform: amd64, Out: &log,
	}, base, noAuth)
	g.Expect(err).NotTo(HaveOccurred(), log.String())
	moved := c.build(args, false)
	g.Expect(moved.runs).To(Equal([]string{"a", "b", "greeting"}), "a moved base runs every step\n%s", moved.log)
	g.Expect(moved.diffIDs).To(HaveLen(8))
}

// TestLayerCacheCredentials keeps the layer cache in the htpasswd registry
// while base images come from the open one with credentials of their own
// (a build pod's pull secret): the cache is reached with the cache's
// credentials (the push secret), and a second build in a fresh store
// reuses its steps. With the pull secret's credentials alone the cache push
// is refused and the build fails saying so.
func TestLayerCacheCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.AuthRegistry
	push := authFile(t, reg.Host, reg.Username, reg.Password)
	pull := authFile(t, "registry.example.com", "someone", "else")
	pushAuth, err := registry.FindAuthFile(push)
	g.Expect(err).NotTo(HaveOccurred())
	pullAuth, err := registry.FindAuthFile(pull)
	g.Expect(err).NotTo(HaveOccurred())
	cacheRepo, err := platform.CacheRepository(reg.Host+"/it/creds-cache", "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, "FROM "+theBed.BaseImage+"\nRUN echo ran >> /mnt/marker/runs && uname -m > /arch\n")
	marker := t.TempDir()
	amd64, _ := platform.Parse("linux/amd64")

	build := func(cacheAuth registry.AuthFile) (string, string, error) {
		g.Expect(os.WriteFile(filepath.Join(marker, "runs"), nil, 0o644)).To(Succeed())
		b, err := imagebuild.New(imagebuild.Config{WorkDir: t.TempDir()})
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = b.Close() }()
		var log strings.Builder
		_, err = b.Build(ctx, imagebuild.Request{
			ContextDir: ctxDir, Platform: amd64, PullAuth: pullAuth, Out: &log,
			RunMounts: []string{marker + ":/mnt/marker"},
			Cache:     &imagebuild.Cache{Repository: cacheRepo, Auth: cacheAuth},
		})
		runs, rerr := os.ReadFile(filepath.Join(marker, "runs"))
		g.Expect(rerr).NotTo(HaveOccurred())
		return string(runs), log.String(), err
	}

	runs, log, err := build(pullAuth)
	g.Expect(err).To(MatchError(ContainSubstring("failed pushing cache to")), log)
	g.Expect(strings.ToLower(err.Error())).To(Or(ContainSubstring("unauthorized"), ContainSubstring("authentication required")))
	g.Expect(runs).To(Equal("ran\n"))

	runs, log, err = build(pushAuth)
	g.Expect(err).NotTo(HaveOccurred(), log)
	g.Expect(runs).To(Equal("ran\n"))
	tags, err := reg.Tags(ctx, strings.TrimPrefix(cacheRepo, reg.Host+"/"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).NotTo(BeEmpty())

	runs, log, err = build(pushAuth)
	g.Expect(err).NotTo(HaveOccurred(), log)
	g.Expect(runs).To(BeEmpty(), "the second build reuses the cached step\n%s", log)
}

// TestBuildLayerCaches runs `builder build` for two platforms twice, with
// a RUN step that writes to a mounted marker file: with a kept --work-dir
// the second build runs no step (the store keeps each step's image); with
// --cache-repo and a fresh work directory each time, as a build pod has,
// the second build runs no step either, each platform's steps coming from
// its own cache repository.
func TestBuildLayerCaches(t *testing.T) {
	ctxDir := writeContext(t, "FROM "+theBed.BaseImage+"\nRUN uname -m >> /mnt/marker/runs && echo one > /one\nRUN uname -m >> /mnt/marker/runs && uname -m > /arch\n")
	platforms := "linux/amd64,linux/arm64"
	marker := t.TempDir()
	if _, err := builderBinary(); err != nil { // built before the timed runs
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) (string, time.Duration) {
		t.Helper()
		g := NewWithT(t)
		runs := filepath.Join(marker, "runs")
		g.Expect(os.WriteFile(runs, nil, 0o644)).To(Succeed())
		start := time.Now()
		log, code := runBuilder(t, nil, append([]string{"build", "--platform", platforms, "-v", marker + ":/mnt/marker"}, append(args, ctxDir)...)...)
		took := time.Since(start)
		g.Expect(code).To(Equal(0), log)
		data, err := os.ReadFile(runs)
		g.Expect(err).NotTo(HaveOccurred())
		lines := strings.Fields(string(data))
		slices.Sort(lines)
		return strings.Join(lines, " "), took
	}

	t.Run("kept work directory", func(t *testing.T) {
		g := NewWithT(t)
		work := t.TempDir()
		runs, first := run(t, "--work-dir", work)
		g.Expect(runs).To(Equal("aarch64 aarch64 x86_64 x86_64"))
		runs, second := run(t, "--work-dir", work)
		g.Expect(runs).To(BeEmpty(), "the second build with the same --work-dir runs no step")
		fmt.Printf("builder build --work-dir, %s: first %.2fs, second %.2fs\n", platforms, first.Seconds(), second.Seconds())
	})

	t.Run("registry cache", func(t *testing.T) {
		g := NewWithT(t)
		reg := theBed.Registry
		out := reg.Host + "/it/flags:v1"
		runs, first := run(t, "--cache-repo", reg.Host+"/it/flags-cache", "-t", out)
		g.Expect(runs).To(Equal("aarch64 aarch64 x86_64 x86_64"))
		runs, second := run(t, "--cache-repo", reg.Host+"/it/flags-cache", "-t", out)
		g.Expect(runs).To(BeEmpty(), "the second build in a fresh work directory runs no step")
		for _, p := range []string{"linux-amd64", "linux-arm64"} {
			tags, err := reg.Tags(t.Context(), "it/flags-cache-"+p)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tags).To(HaveLen(2), "one cached image per step in %s's repository", p)
		}
		checkIndex(t.Context(), g, reg, out, []string{"linux/amd64", "linux/arm64"})
		fmt.Printf("builder build --cache-repo, fresh work directory, %s: first %.2fs, second %.2fs\n", platforms, first.Seconds(), second.Seconds())
	})
}
