package builder_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
	"github.com/archway-build/archway/test/bed"
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
	b, err := image.New(image.Config{WorkDir: t.TempDir(), Disposable: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = b.Close() }()
	amd64, _ := platform.Parse("linux/amd64")
	var log strings.Builder
	start := time.Now()
	out, err := b.BuildAndPush(ctx, image.Request{
		ContextDir: c.ctxDir, Platform: amd64, Args: args, NoCache: noCache,
		RunMounts: []string{c.marker + ":/mnt/marker"},
		Cache:     &image.Cache{Repository: c.cache}, Out: &log,
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
	moveBaseTag(t, base)
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
		b, err := image.New(image.Config{WorkDir: t.TempDir()})
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = b.Close() }()
		var log strings.Builder
		_, err = b.Build(ctx, image.Request{
			ContextDir: ctxDir, Platform: amd64, PullAuth: pullAuth, Out: &log,
			RunMounts: []string{marker + ":/mnt/marker"},
			Cache:     &image.Cache{Repository: cacheRepo, Auth: cacheAuth},
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

// resultDockerfile reads nothing the result key cannot see: no RUN mount.
const resultDockerfile = `ARG BASE
FROM $BASE
COPY a.txt /a.txt
ARG GREETING=hello
RUN echo "$GREETING" > /greeting && cat /a.txt >> /greeting
`

// resultBuild is one build of a result reuse test: a fresh store, as
// every build pod starts with, and the layer cache in the bed's registry.
type resultBuild struct {
	t      *testing.T
	ctxDir string
	cache  string // the platform's cache repository
	dest   string
	format image.Format
	// dockerfile is the Dockerfile's path in ctxDir; default: Dockerfile.
	dockerfile string
}

type resultOutcome struct {
	log       string
	mediaType string
	digest    string
	layers    []digest.Digest // the output manifest's layer digests
	labels    map[string]string
	config    *ocispec.Image
}

func (c resultBuild) build(target string, buildName string, args map[string]string, noCache bool) resultOutcome {
	t := c.t
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	b, err := image.New(image.Config{WorkDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = b.Close() }()
	p, err := platform.Parse(target)
	g.Expect(err).NotTo(HaveOccurred())
	var log strings.Builder
	out, err := b.BuildAndPush(ctx, image.Request{
		ContextDir: c.ctxDir, Dockerfile: c.dockerfile, Platform: p, Args: args, NoCache: noCache,
		Labels: map[string]string{"io.openshift.build.name": buildName},
		Cache:  &image.Cache{Repository: c.cache}, Out: &log, Format: c.format,
	}, c.dest, noAuth)
	g.Expect(err).NotTo(HaveOccurred(), log.String())
	g.Expect(out.Pushed.Digest).To(Equal(out.Image.Digest))
	img, err := theBed.Registry.OpenImage(ctx, digestReferenceOf(c.dest, out.Image.Digest))
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	raw, mediaType, err := img.Manifest(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var m ocispec.Manifest
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	var layers []digest.Digest
	for _, l := range m.Layers {
		layers = append(layers, l.Digest)
	}
	cfg, err := img.Config(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	return resultOutcome{log: log.String(), mediaType: mediaType, digest: out.Image.Digest, layers: layers, labels: cfg.Config.Labels, config: cfg}
}

// resultTags returns the cached result tags of repo.
func resultTags(t *testing.T, reg *bed.Registry, repo string) []string {
	t.Helper()
	tags, err := reg.Tags(t.Context(), strings.TrimPrefix(repo, reg.Host+"/"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tag := range tags {
		if strings.HasPrefix(tag, "result-") {
			out = append(out, tag)
		}
	}
	return out
}

// moveBaseTag points the tag base (an amd64 image in the bed's registry)
// at another image: the base with a layer added, built and pushed by a
// builder of its own.
func moveBaseTag(t *testing.T, base string) {
	t.Helper()
	b, err := image.New(image.Config{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	amd64, _ := platform.Parse("linux/amd64")
	var log strings.Builder
	if _, err := b.BuildAndPush(t.Context(), image.Request{
		ContextDir: writeContext(t, "FROM "+base+"\nRUN echo 2 > /base-version\n"), Platform: amd64, Out: &log,
	}, base, noAuth); err != nil {
		t.Fatalf("moving the tag %s: %v\n%s", base, err, log.String())
	}
}

// builtSteps says whether a build's log shows buildah running steps.
func builtSteps(log string) bool { return strings.Contains(log, "STEP 1/") }

// TestCachedResults builds a Dockerfile whose inputs can all be digested
// with a layer cache, each time in a fresh store as a build pod does: the
// first build runs its steps, pushes its unlabelled result to the cache
// repository under a result tag and its labelled image to the output,
// uploading each blob once (the result and the output mount the layers
// the steps pushed); a second build of the same inputs with another build name runs no step,
// pulls no layer through the builder (the registry mounts them from the
// cache repository) and pushes the same layers with its own name in the
// labels. A one-byte change of the copied file, a changed build arg, a
// moved base tag and noCache each build again.
func TestCachedResults(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/result-base:v1"
	_, err := theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, resultDockerfile)
	write := func(content string) {
		g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte(content), 0o644)).To(Succeed())
	}
	write("alpha\n")
	cacheRepo, err := platform.CacheRepository(reg.Host+"/it/result-app-cache", "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	c := resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/result-app:v1"}
	args := map[string]string{"BASE": base}

	start := time.Now()
	beforeFirst, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	first := c.build("linux/amd64", "first", args, false)
	firstTook := time.Since(start)
	afterFirst, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	uploads := map[string]int{}
	for _, r := range afterFirst[len(beforeFirst):] {
		if _, q, ok := strings.Cut(r.Path, "digest="); ok && r.Method == "PUT" && strings.Contains(r.Path, "/blobs/uploads/") {
			uploads[q]++
		}
	}
	g.Expect(uploads).NotTo(BeEmpty())
	for d, n := range uploads {
		g.Expect(n).To(Equal(1), "blob %s is uploaded once (the result and the output mount what the steps pushed)", d)
	}
	g.Expect(builtSteps(first.log)).To(BeTrue(), first.log)
	g.Expect(first.log).To(ContainSubstring("No earlier result of the same inputs in the layer cache"))
	g.Expect(first.labels).To(HaveKeyWithValue("io.openshift.build.name", "first"))
	g.Expect(first.config.History[len(first.config.History)-1].CreatedBy).To(HavePrefix("LABEL "))
	g.Expect(first.config.History[len(first.config.History)-1].EmptyLayer).To(BeTrue())
	tags := resultTags(t, reg, cacheRepo)
	g.Expect(tags).To(HaveLen(1), "the unlabelled result is kept in the cache repository")
	g.Expect(first.log).To(ContainSubstring("Kept the result as " + cacheRepo + ":" + tags[0]))
	cached, err := reg.OpenImage(ctx, cacheRepo+":"+tags[0])
	g.Expect(err).NotTo(HaveOccurred())
	cachedLabels, err := cached.Labels(ctx)
	cached.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cachedLabels).NotTo(HaveKey("io.openshift.build.name"), "the cached result has no build's labels")

	before, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	start = time.Now()
	second := c.build("linux/amd64", "second", args, false)
	secondTook := time.Since(start)
	g.Expect(builtSteps(second.log)).To(BeFalse(), "a second build of the same inputs runs no step\n%s", second.log)
	g.Expect(second.log).To(ContainSubstring("from the layer cache: an earlier build had the same inputs"))
	g.Expect(second.layers).To(Equal(first.layers), "and pushes the first build's layers")
	g.Expect(second.labels).To(HaveKeyWithValue("io.openshift.build.name", "second"), "labelled by the second build")
	g.Expect(second.digest).NotTo(Equal(first.digest))
	after, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range after[len(before):] {
		for _, l := range first.layers {
			if r.Method == "GET" && strings.HasSuffix(r.Path, "/blobs/"+l.String()) {
				t.Errorf("the second build downloaded layer %s: %s %s", l, r.Method, r.Path)
			}
		}
	}
	g.Expect(resultTags(t, reg, cacheRepo)).To(Equal(tags), "a reused result adds no tag")
	fmt.Printf("cached results, linux/amd64, fresh store each time: first build %.2fs, second %.2fs\n",
		firstTook.Seconds(), secondTook.Seconds())

	write("alphA\n")
	changed := c.build("linux/amd64", "changed", args, false)
	g.Expect(builtSteps(changed.log)).To(BeTrue(), "a one-byte change in a.txt builds again\n%s", changed.log)
	g.Expect(changed.layers[0]).To(Equal(first.layers[0]), "the base layer is the same")
	g.Expect(changed.layers[1]).NotTo(Equal(first.layers[1]), "COPY a.txt is new")
	write("alpha\n")

	greeting := c.build("linux/amd64", "greeting", map[string]string{"BASE": base, "GREETING": "bonjour"}, false)
	g.Expect(builtSteps(greeting.log)).To(BeTrue(), "a changed build arg builds again\n%s", greeting.log)
	g.Expect(greeting.layers[:2]).To(Equal(first.layers[:2]), "from the RUN that sees it: the steps before come from the layer cache")
	g.Expect(greeting.layers[2]).NotTo(Equal(first.layers[2]))

	noCache := c.build("linux/amd64", "nocache", args, true)
	g.Expect(builtSteps(noCache.log)).To(BeTrue(), "noCache builds again\n%s", noCache.log)
	g.Expect(noCache.log).NotTo(ContainSubstring("from the layer cache: an earlier build"))
	g.Expect(noCache.log).To(ContainSubstring("Kept the result as "+cacheRepo+":"+tags[0]), "and refreshes the cached result")

	// The base tag moves to another image (the base with a file added).
	moveBaseTag(t, base)
	moved := c.build("linux/amd64", "moved", args, false)
	g.Expect(builtSteps(moved.log)).To(BeTrue(), "a moved base builds again\n%s", moved.log)
	g.Expect(moved.layers).To(HaveLen(4))
}

// TestCachedResultOtherPlatform puts an image of another platform, of the
// build's format and otherwise well formed, under the result tag of a
// build's inputs: the build does not use it, says why, and builds. Nor
// does it use an image of its platform in another manifest format.
func TestCachedResultOtherPlatform(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/result-poison-base:v1"
	g.Expect(reg.CopyIndex(ctx, theBed.BaseImage, base, nil)).To(Succeed())
	ctxDir := writeContext(t, resultDockerfile)
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("alpha\n"), 0o644)).To(Succeed())
	args := map[string]string{"BASE": base}
	repo := func(p string) string {
		r, err := platform.CacheRepository(reg.Host+"/it/result-poison-cache", p)
		g.Expect(err).NotTo(HaveOccurred())
		return r
	}
	dest := reg.Host + "/it/result-poison:v1"

	// The linux/amd64 build's result tag, from a first build.
	amd64 := resultBuild{t: t, ctxDir: ctxDir, cache: repo("linux/amd64"), dest: dest}
	first := amd64.build("linux/amd64", "first", args, false)
	g.Expect(builtSteps(first.log)).To(BeTrue())
	tags := resultTags(t, reg, amd64.cache)
	g.Expect(tags).To(HaveLen(1))
	// The linux/arm64 build of the same inputs, whose result replaces it.
	arm64 := resultBuild{t: t, ctxDir: ctxDir, cache: repo("linux/arm64"), dest: dest}
	arm := arm64.build("linux/arm64", "arm", args, false)
	g.Expect(builtSteps(arm.log)).To(BeTrue())
	armTags := resultTags(t, reg, arm64.cache)
	g.Expect(armTags).To(HaveLen(1))
	g.Expect(armTags).NotTo(Equal(tags), "the platform is in the key")
	g.Expect(reg.CopyIndex(ctx, arm64.cache+":"+armTags[0], amd64.cache+":"+tags[0], nil)).To(Succeed())

	again := amd64.build("linux/amd64", "again", args, false)
	g.Expect(again.log).To(ContainSubstring(`records platform "linux/arm64/v8", not the target linux/amd64`), again.log)
	g.Expect(builtSteps(again.log)).To(BeTrue(), "the build does not use another platform's image\n%s", again.log)
	g.Expect(again.config.Architecture).To(Equal("amd64"))
	g.Expect(again.layers).To(Equal(first.layers))

	// A Docker-format result of the same platform under the OCI build's
	// tag: not used either.
	docker := resultBuild{t: t, ctxDir: ctxDir, cache: reg.Host + "/it/result-poison-docker-cache", dest: dest, format: image.FormatDocker}
	d := docker.build("linux/amd64", "docker", args, false)
	g.Expect(d.mediaType).To(Equal("application/vnd.docker.distribution.manifest.v2+json"))
	dockerTags := resultTags(t, reg, docker.cache)
	g.Expect(dockerTags).To(HaveLen(1))
	g.Expect(dockerTags).NotTo(Equal(tags), "the format is in the key")
	g.Expect(reg.CopyIndex(ctx, docker.cache+":"+dockerTags[0], amd64.cache+":"+tags[0], nil)).To(Succeed())
	oci := amd64.build("linux/amd64", "oci", args, false)
	g.Expect(oci.log).To(ContainSubstring("not the build's application/vnd.oci.image.manifest.v1+json"), oci.log)
	g.Expect(oci.mediaType).To(Equal("application/vnd.oci.image.manifest.v1+json"))
}

// TestCachedCrossCompiledResults builds crossDockerfile for linux/arm64
// with a registry layer cache, as build pods do, each time with a new
// store: the second build takes the whole result from the cache
// repository (its cross-compiling stage is keyed by its image's digest for
// the build machine's platform), and the toolchain tag moved to another
// image builds again.
func TestCachedCrossCompiledResults(t *testing.T) {
	g := NewWithT(t)
	reg := theBed.Registry
	run := uniqueName()
	base, toolchain := reg.Host+"/it/cached-cross-base"+run+":v1", reg.Host+"/it/cached-cross-toolchain"+run+":v1"
	copyIndex(t, theBed.BaseImage, base)
	copyIndex(t, theBed.BaseImage, toolchain)
	ctxDir := writeContext(t, crossDockerfile)
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("one\n"), 0o644)).To(Succeed())
	cacheRepo, err := platform.CacheRepository(reg.Host+"/it/cached-cross"+run+"-cache", "linux/arm64")
	g.Expect(err).NotTo(HaveOccurred())
	c := resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/cached-cross" + run + ":v1"}
	args := map[string]string{"BASE": base, "TOOLCHAIN": toolchain}

	first := c.build("linux/arm64", "first", args, false)
	g.Expect(builtSteps(first.log)).To(BeTrue(), first.log)
	second := c.build("linux/arm64", "second", args, false)
	g.Expect(builtSteps(second.log)).To(BeFalse(), "the same inputs run no step\n%s", second.log)
	g.Expect(second.log).To(ContainSubstring("from the layer cache: an earlier build had the same inputs"))
	g.Expect(second.layers).To(Equal(first.layers))

	// The toolchain tag now names another index of both platforms, whose
	// images have an /out.
	other := reg.Host + "/it/cached-cross-other" + run + ":v1"
	log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64,linux/arm64", "--build-arg", "BASE="+base,
		"-t", other, writeContext(t, "ARG BASE\nFROM $BASE\nRUN touch /out\n"))
	g.Expect(code).To(Equal(0), log)
	copyIndex(t, other, toolchain)
	moved := c.build("linux/arm64", "moved", args, false)
	g.Expect(builtSteps(moved.log)).To(BeTrue(), "a moved toolchain tag builds again\n%s", moved.log)
	g.Expect(moved.layers).NotTo(Equal(first.layers))
}
