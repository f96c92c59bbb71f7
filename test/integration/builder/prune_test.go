package builder_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/cacheprune"
	archwayplugin "github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
	regremote "github.com/archway-build/archway/pkg/registry/remote"
)

// oldCacheTag is a step's cache key under which a test pushes an image
// created 30 days ago.
var oldCacheTag = strings.Repeat("0a", 32)

// pushImage pushes img to ref in the bed's registry.
func pushImage(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
}

// uniqueName is a suffix for repository names of one test run.
func uniqueName() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// imageCreated returns a small random image whose config says it was
// created at created.
func imageCreated(t *testing.T, created time.Time) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: created})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestPruneCache fills a platform's layer cache with a real build (its
// steps), adds an image created 30 days ago under a
// step's cache-key tag and the same image under a tag that is not a cache
// tag, and prunes with `builder prune-cache`: a dry run removes nothing and
// lists the old tag as one it would remove; --confirm removes exactly that
// tag; the next build still reuses every step (and a changed build arg only
// runs the step it changes); --keep-younger-than 0s removes every cache tag
// but the other one, and the next build runs every step again. Bad input
// changes nothing.
func TestPruneCache(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	base := reg.Host + "/it/prune-base:v1"
	_, err := theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, cacheDockerfile)
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("alpha\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "b.txt"), []byte("bravo\n"), 0o644)).To(Succeed())
	// Names of their own, so that a rerun (-count) starts empty.
	run := uniqueName()
	cacheBase := reg.Host + "/it/prune-app" + run + "-cache"
	cacheRepo, err := platform.CacheRepository(cacheBase, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	repoPath := strings.TrimPrefix(cacheRepo, reg.Host+"/")
	c := cacheBuild{t: t, ctxDir: ctxDir, marker: t.TempDir(), cache: cacheRepo, dest: reg.Host + "/it/prune-app" + run + ":v1"}
	args := map[string]string{"BASE": base}

	first := c.build(args, false)
	g.Expect(first.runs).To(Equal([]string{"a", "b", "greeting"}), first.log)
	old := imageCreated(t, time.Now().Add(-30*24*time.Hour))
	pushImage(t, cacheRepo+":"+oldCacheTag, old)
	pushImage(t, cacheRepo+":keep-me", old)
	tags := func() []string {
		got, err := reg.Tags(ctx, repoPath)
		g.Expect(err).NotTo(HaveOccurred())
		slices.Sort(got)
		return got
	}
	filled := tags()
	var fresh []string
	for _, tag := range filled {
		if cacheprune.IsCacheTag(tag) && tag != oldCacheTag {
			fresh = append(fresh, tag)
		}
	}
	g.Expect(len(fresh)).To(BeNumerically(">=", 6), "the build keeps its steps: %v", filled)

	prune := func(extra ...string) (string, int) {
		return runBuilder(t, nil, append([]string{"prune-cache", "--cache-repo", cacheBase, "--platform", "linux/amd64"}, extra...)...)
	}
	// Bad input is refused, and changes nothing.
	for _, bad := range [][]string{{"--keep-younger-than", "-1h", "--confirm"}, {"--keep-younger-than", "a week", "--confirm"},
		{"--platform", "linux/foo", "--confirm"}} {
		out, code := prune(bad...)
		g.Expect(code).NotTo(BeZero(), out)
		g.Expect(out).To(Or(ContainSubstring("negative: give a duration"), ContainSubstring("invalid argument"),
			ContainSubstring(`architecture "foo" is not`)), out)
		g.Expect(tags()).To(Equal(filled))
	}

	out, code := prune()
	g.Expect(code).To(BeZero(), out)
	g.Expect(out).To(MatchRegexp(`(?m)^`+cacheRepo+` +`+oldCacheTag+` +\S+ +would remove$`), out)
	g.Expect(out).To(MatchRegexp(`(?m)^`+cacheRepo+` +keep-me +- +kept: not a cache tag$`), out)
	g.Expect(out).To(ContainSubstring("Dry run: nothing was removed. 1 cache tags created more than 168h0m0s ago would be removed"))
	for _, tag := range fresh {
		g.Expect(out).To(MatchRegexp(`(?m)^`+cacheRepo+` +`+tag+` +\S+ +kept: younger than 168h0m0s$`), out)
	}
	g.Expect(tags()).To(Equal(filled), "a dry run removes nothing")

	out, code = runBuilder(t, nil, "prune-cache", "--cache-repo", cacheBase, "--platform", "linux/amd64", "--confirm", "-o", "json")
	g.Expect(code).To(BeZero(), out)
	g.Expect(out).To(ContainSubstring(`"action": "removed"`))
	g.Expect(tags()).To(Equal(append(slices.Clone(fresh), "keep-me")), "--confirm removes exactly the old cache tag")

	again := c.build(args, false)
	g.Expect(again.runs).To(BeEmpty(), "the kept steps are reused\n%s", again.log)
	g.Expect(again.diffIDs).To(Equal(first.diffIDs))
	greeting := c.build(map[string]string{"BASE": base, "GREETING": "bonjour"}, false)
	g.Expect(greeting.runs).To(Equal([]string{"greeting"}), "the kept steps before it are reused\n%s", greeting.log)

	before, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	out, code = prune("--keep-younger-than", "0s", "--confirm")
	g.Expect(code).To(BeZero(), out)
	after, err := reg.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	deletes := 0
	for _, r := range after[len(before):] {
		if r.Method == http.MethodDelete {
			deletes++
		}
	}
	fmt.Printf("prune-cache --keep-younger-than 0s --confirm: %d tags removed with %d registry requests (%d DELETE)\n",
		deletes, len(after)-len(before), deletes)
	g.Expect(out).To(ContainSubstring("kept: not a cache tag"))
	g.Expect(tags()).To(Equal([]string{"keep-me"}), "0s removes every cache tag and only those\n%s", out)
	cold := c.build(args, false)
	g.Expect(cold.runs).To(Equal([]string{"a", "b", "greeting"}), "a pruned cache builds every step again\n%s", cold.log)
	g.Expect(cold.diffIDs[:1]).To(Equal(first.diffIDs[:1]))
}

// TestPruneCacheHostile prunes repositories whose answers a registry could
// use against a prune: an index, an artifact and an image with a config
// over the limit under cache tags, all created long ago, are reported and
// left alone, next to an old image that is removed; through a proxy in front
// of the bed's registry, a tag list that never ends, one page of the tag
// list over the size limit, more tags than the limit and a manifest over
// the limit are each reported, and nothing of those repositories is
// removed, while the other repositories are pruned; a tag a build pushes
// again between the prune's read and its removal is kept.
func TestPruneCacheHostile(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	longAgo := time.Now().Add(-30 * 24 * time.Hour)
	planted := reg.Host + "/it/prune-hostile-cache-linux-amd64"
	tag := func(i int) string { return fmt.Sprintf("%064x", i) }

	pushImage(t, planted+":"+tag(1), imageCreated(t, longAgo))
	idx, err := random.Index(64, 1, 2)
	g.Expect(err).NotTo(HaveOccurred())
	r, _ := name.ParseReference(planted+":"+tag(2), name.Insecure)
	g.Expect(remote.WriteIndex(r, idx, remote.WithContext(ctx))).To(Succeed())
	pushImage(t, planted+":"+tag(3), mutate.ConfigMediaType(imageCreated(t, longAgo), ggcrtypes.MediaType("application/vnd.example.artifact+json")))
	big, err := mutate.Config(imageCreated(t, longAgo), v1.Config{Env: []string{"PAD=" + strings.Repeat("x", regremote.MaxConfigSize)}})
	g.Expect(err).NotTo(HaveOccurred())
	pushImage(t, planted+":result-"+tag(4), big)

	// The proxy forwards to the bed's registry but answers its own tag
	// lists and manifests for the hostile repositories.
	target, _ := url.Parse(reg.URL("/"))
	forward := httputil.NewSingleHostReverseProxy(target)
	var pages atomic.Int64
	longTag := strings.Repeat("t", 120)
	moved := reg.Host + "/it/prune-moved-cache-linux-amd64"
	pushImage(t, moved+":"+tag(5), imageCreated(t, longAgo))
	movedRef, err := name.ParseReference(moved+":"+tag(5), name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	var movedErr atomic.Pointer[error]
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Path
		switch {
		case p == "/v2/it/endless-cache-linux-amd64/tags/list":
			// Five thousand pages, more than any prune reads.
			n := pages.Add(1)
			if n < 5000 {
				w.Header().Set("Link", fmt.Sprintf(`</v2/it/endless-cache-linux-amd64/tags/list?page=%d>; rel="next"`, n))
			}
			_, _ = fmt.Fprintf(w, `{"name":"it/endless-cache-linux-amd64","tags":["%s"]}`, tag(int(n)))
		case p == "/v2/it/hugepage-cache-linux-amd64/tags/list":
			// One page over the size limit, with fewer tags than the
			// tag limit.
			_, _ = fmt.Fprint(w, `{"name":"it/hugepage-cache-linux-amd64","tags":[`)
			for i := range cacheprune.MaxTagListPageSize / 100 {
				if i > 0 {
					_, _ = fmt.Fprint(w, ",")
				}
				_, _ = fmt.Fprintf(w, `"%s%d"`, longTag, i)
			}
			_, _ = fmt.Fprint(w, `]}`)
		case strings.HasPrefix(p, "/v2/it/manytags-cache-linux-amd64/tags/list"):
			// Pages of 1,000 short tags, more in all than the tag limit.
			var page int
			_, _ = fmt.Sscan(req.URL.Query().Get("page"), &page)
			if page < cacheprune.MaxTags/1000+5 {
				w.Header().Set("Link", fmt.Sprintf(`</v2/it/manytags-cache-linux-amd64/tags/list?page=%d>; rel="next"`, page+1))
			}
			tags := make([]string, 1000)
			for i := range tags {
				tags[i] = fmt.Sprintf(`"v%d-%d"`, page, i)
			}
			_, _ = fmt.Fprintf(w, `{"name":"it/manytags-cache-linux-amd64","tags":[%s]}`, strings.Join(tags, ","))
		case p == "/v2/it/bigmanifest-cache-linux-amd64/tags/list":
			_, _ = fmt.Fprintf(w, `{"name":"it/bigmanifest-cache-linux-amd64","tags":["%s"]}`, tag(9))
		case strings.HasPrefix(p, "/v2/it/bigmanifest-cache-linux-amd64/manifests/"):
			w.Header().Set("Content-Type", string(ggcrtypes.OCIManifestSchema1))
			if req.Method == http.MethodHead {
				return
			}
			_, _ = fmt.Fprint(w, `{"schemaVersion":2,"mediaType":"`+string(ggcrtypes.OCIManifestSchema1)+`","annotations":{"pad":"`)
			_, _ = fmt.Fprint(w, strings.Repeat("x", regremote.MaxManifestSize+1))
			_, _ = fmt.Fprint(w, `"}}`)
		case req.Method == http.MethodHead && p == "/v2/it/prune-moved-cache-linux-amd64/manifests/"+tag(5):
			// A build pushes the step again between the prune's read
			// and its removal: the HEAD before the removal sees it.
			if err := remote.Write(movedRef, imageCreated(t, time.Now()), remote.WithContext(req.Context())); err != nil {
				movedErr.Store(&err)
			}
			forward.ServeHTTP(w, req)
		default:
			forward.ServeHTTP(w, req)
		}
	}))
	t.Cleanup(proxy.Close)
	host := strings.TrimPrefix(proxy.URL, "http://")

	results, err := cacheprune.Prune(ctx, []string{
		planted,
		host + "/it/endless-cache-linux-amd64",
		host + "/it/hugepage-cache-linux-amd64",
		host + "/it/manytags-cache-linux-amd64",
		host + "/it/bigmanifest-cache-linux-amd64",
		host + "/it/prune-moved-cache-linux-amd64",
	}, cacheprune.Options{Access: registry.Access{UserAgent: "archway-test"}, KeepYoungerThan: time.Hour, Confirm: true})
	g.Expect(err).NotTo(HaveOccurred())
	var table strings.Builder
	g.Expect(cacheprune.WriteTable(&table, results, time.Hour, true)).To(Succeed())
	t.Log(table.String())
	g.Expect(results).To(HaveLen(6))

	action := map[string]string{}
	for _, tg := range results[0].Tags {
		action[tg.Tag] = string(tg.Action) + ": " + tg.Reason
	}
	g.Expect(action).To(Equal(map[string]string{
		tag(1):             "removed: ",
		tag(2):             "kept: an image index (" + string(ggcrtypes.OCIImageIndex) + "), not a cache image: left alone",
		tag(3):             "kept: an artifact (config application/vnd.example.artifact+json), not a cache image: left alone",
		"result-" + tag(4): fmt.Sprintf("kept: its config has %d bytes, not 1 to %d: left alone", mustConfigSize(t, big), regremote.MaxConfigSize),
	}), table.String())
	left, err := reg.Tags(ctx, "it/prune-hostile-cache-linux-amd64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(ConsistOf(tag(2), tag(3), "result-"+tag(4)))

	g.Expect(results[1].Error).To(ContainSubstring(fmt.Sprintf("goes on for more than %d pages", cacheprune.MaxTagPages)))
	g.Expect(pages.Load()).To(BeNumerically("==", cacheprune.MaxTagPages), "reading stops at the limit")
	g.Expect(results[2].Error).To(ContainSubstring(fmt.Sprintf("tag list page has more than %d bytes", cacheprune.MaxTagListPageSize)))
	g.Expect(results[3].Error).To(ContainSubstring(fmt.Sprintf("lists more than %d tags", cacheprune.MaxTags)))
	g.Expect(results[4].Tags).To(HaveLen(1))
	g.Expect(results[4].Tags[0].Action).To(Equal(cacheprune.Kept))
	g.Expect(results[4].Tags[0].Reason).To(ContainSubstring(fmt.Sprintf("manifest has more than %d bytes", regremote.MaxManifestSize)))
	if p := movedErr.Load(); p != nil {
		t.Fatalf("pushing the step again: %v", *p)
	}
	g.Expect(results[5].Tags).To(ConsistOf(And(HaveField("Tag", tag(5)), HaveField("Action", cacheprune.Kept),
		HaveField("Reason", "pushed again while pruning"))))
	left, err = reg.Tags(ctx, "it/prune-moved-cache-linux-amd64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(ConsistOf(tag(5)), "the step pushed again is kept")
	g.Expect(cacheprune.Summarize(results).Err()).To(HaveOccurred(), "a repository that could not be listed is an error")
}

func mustConfigSize(t *testing.T, img v1.Image) int64 {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Config.Size
}

// plugin runs kubectl archway with args against the bed, in namespace ns.
func plugin(ctx context.Context, ns string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := archwayplugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(append(args, "--kubeconfig", theBed.Kubeconfig, "-n", ns))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// TestPluginPruneCache prunes a BuildConfig's layer caches with kubectl
// archway prune cache, read from the apiserver: its output's cache
// repository for spec.platforms (filled by a real build) and for a platform
// only a Build's status names, with an old image under a cache tag in each
// and a whole result of a real build in the first.
// A dry run lists both and removes nothing; --confirm removes exactly the
// old tags; a BuildConfig that sets no layer cache mode is pruned where the
// controller's default layer cache keeps it; one whose cache is Disabled is
// refused unless --repository names one; bad flags are refused and change
// nothing;
// --keep-younger-than 0s removes the result too, and the next build of its
// inputs builds and keeps its result again.
func TestPluginPruneCache(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	ns, err := theBed.CreateNamespace(ctx, "prune-plugin")
	g.Expect(err).NotTo(HaveOccurred())
	run := uniqueName()
	output := reg.Host + "/it/plugin-app" + run + ":v1"
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
	dockerfile := "FROM scratch\n"
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: &dockerfile}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType,
		DockerStrategy: &buildv1.DockerBuildStrategy{LayerCache: &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: output}
	bc.Spec.Platforms = []string{"linux/amd64"}
	g.Expect(theBed.Client.Create(ctx, bc)).To(Succeed())
	plain := bc.DeepCopy()
	plain.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "plain"}
	plain.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{}
	g.Expect(theBed.Client.Create(ctx, plain)).To(Succeed())
	off := bc.DeepCopy()
	off.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "off"}
	off.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{LayerCache: &buildv1.LayerCache{Mode: buildv1.LayerCacheDisabled}}
	g.Expect(theBed.Client.Create(ctx, off)).To(Succeed())
	// A Build of app that ran linux/arm64/v8 (the same cache as linux/arm64).
	b := newBuild(ns, "app-1", dockerfile, output, []string{"linux/arm64"}, nil)
	b.Labels = map[string]string{buildv1.BuildConfigLabel: "app"}
	g.Expect(theBed.Client.Create(ctx, b)).To(Succeed())
	g.Expect(applyControllerStatus(ctx, b, map[string]any{"platforms": []any{map[string]any{"platform": "linux/arm64/v8", "phase": "Complete"}}})).To(Succeed())
	// Another BuildConfig's Build names a platform that is not app's.
	other := newBuild(ns, "plain-1", dockerfile, output, []string{"linux/s390x"}, nil)
	other.Labels = map[string]string{buildv1.BuildConfigLabel: "plain"}
	g.Expect(theBed.Client.Create(ctx, other)).To(Succeed())
	g.Expect(applyControllerStatus(ctx, other, map[string]any{"platforms": []any{map[string]any{"platform": "linux/s390x", "phase": "Complete"}}})).To(Succeed())

	amd64Repo := reg.Host + "/it/plugin-app" + run + "-cache-linux-amd64"
	arm64Repo := reg.Host + "/it/plugin-app" + run + "-cache-linux-arm64"
	base := reg.Host + "/it/plugin-base:v1"
	_, err = theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, cacheDockerfile)
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("alpha\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "b.txt"), []byte("bravo\n"), 0o644)).To(Succeed())
	c := cacheBuild{t: t, ctxDir: ctxDir, marker: t.TempDir(), cache: amd64Repo, dest: output}
	g.Expect(c.build(map[string]string{"BASE": base}, false).runs).To(HaveLen(3))
	// A whole result in the same cache (a build without build volumes).
	resultDir := writeContext(t, "ARG BASE\nFROM $BASE\nCOPY a.txt /a.txt\n")
	g.Expect(os.WriteFile(filepath.Join(resultDir, "a.txt"), []byte("alpha\n"), 0o644)).To(Succeed())
	rb := resultBuild{t: t, ctxDir: resultDir, cache: amd64Repo, dest: reg.Host + "/it/plugin-result" + run + ":v1"}
	rb.build("linux/amd64", "app-1", map[string]string{"BASE": base}, false)
	g.Expect(resultTags(t, reg, strings.TrimPrefix(amd64Repo, reg.Host+"/"))).To(HaveLen(1))
	old := imageCreated(t, time.Now().Add(-30*24*time.Hour))
	pushImage(t, amd64Repo+":"+oldCacheTag, old)
	pushImage(t, arm64Repo+":"+oldCacheTag, old)
	pushImage(t, arm64Repo+":"+strings.Repeat("1b", 32), imageCreated(t, time.Now().Add(-time.Hour)))
	tags := func(repo string) []string {
		got, err := reg.Tags(ctx, strings.TrimPrefix(repo, reg.Host+"/"))
		g.Expect(err).NotTo(HaveOccurred())
		slices.Sort(got)
		return got
	}
	amd64Before, arm64Before := tags(amd64Repo), tags(arm64Repo)
	g.Expect(len(amd64Before)).To(BeNumerically(">=", 7))
	unchanged := func() {
		t.Helper()
		g.Expect(tags(amd64Repo)).To(Equal(amd64Before))
		g.Expect(tags(arm64Repo)).To(Equal(arm64Before))
		names, err := reg.Tags(ctx, "it/plugin-app"+run+"-cache-linux-s390x")
		g.Expect(err == nil && len(names) > 0).To(BeFalse(), "no s390x cache is touched or made")
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"prune", "cache", "app", "--keep-younger-than", "-5m", "--confirm"}, "--keep-younger-than -5m0s is negative: give a duration of 0 or more"},
		{[]string{"prune", "cache", "app", "--keep-younger-than", "soon", "--confirm"}, `invalid argument "soon" for "--keep-younger-than"`},
		{[]string{"prune", "cache", "app", "--platform", "linux/foo", "--confirm"}, `--platform: "linux/foo": architecture "foo" is not a Go/OCI architecture name`},
		{[]string{"prune", "cache", "app", "--repository", "Bad Repo", "--confirm"}, "--repository: cache repository"},
		{[]string{"prune", "cache", "ap", "--confirm"}, `buildconfig "ap" not found in namespace "` + ns + `"; its BuildConfigs: app, off, plain`},
		{[]string{"prune", "cache", "off", "--confirm"}, `buildconfig "off" has its layer cache off (spec.strategy.dockerStrategy.layerCache.mode is Disabled): name a cache repository with --repository`},
	} {
		out, err := plugin(ctx, ns, bad.args...)
		g.Expect(err).To(MatchError(ContainSubstring(bad.want)), "%v: %s", bad.args, out)
		unchanged()
	}

	out, err := plugin(ctx, ns, "prune", "cache", "app")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`(?m)^`+amd64Repo+` +`+oldCacheTag+` +\S+ +would remove$`), out)
	g.Expect(out).To(MatchRegexp(`(?m)^`+arm64Repo+` +`+oldCacheTag+` +\S+ +would remove$`), out)
	g.Expect(out).To(MatchRegexp(`(?m)^`+arm64Repo+` +`+strings.Repeat("1b", 32)+` +\S+ +kept: younger than 168h0m0s$`), out)
	g.Expect(out).To(ContainSubstring("Dry run: nothing was removed. 2 cache tags created more than 168h0m0s ago would be removed"))
	g.Expect(out).NotTo(ContainSubstring("s390x"))
	unchanged()

	// The BuildConfig that sets no layerCache.mode uses the controller's
	// default layer cache, next to its output (the same as app's here):
	// a dry run there, saying so.
	out, err = plugin(ctx, ns, "prune", "cache", "plain", "--platform", "linux/arm64")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`buildconfig "plain" sets no layerCache.mode, so its builds use the build controller's default layer cache: `+
		"pruning where that keeps it, "+reg.Host+"/it/plugin-app"+run+"-cache-<platform>"), out)
	g.Expect(out).To(MatchRegexp(`(?m)^`+arm64Repo+` +`+oldCacheTag+` +\S+ +would remove$`), out)
	g.Expect(out).NotTo(ContainSubstring(amd64Repo))
	unchanged()

	// With the repository named: a dry run over the platform given.
	out, err = plugin(ctx, ns, "prune", "cache", "plain", "--repository", reg.Host+"/it/plugin-app"+run+"-cache", "--platform", "linux/arm64", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var list struct {
		Kind  string                  `json:"kind"`
		Items []cacheprune.Repository `json:"items"`
	}
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed(), out)
	g.Expect(list.Kind).To(Equal("List"))
	results := list.Items
	g.Expect(results).To(HaveLen(1))
	g.Expect(results[0].Repository).To(Equal(arm64Repo))
	g.Expect(results[0].Tags).To(ContainElement(And(HaveField("Tag", oldCacheTag), HaveField("Action", cacheprune.WouldRemove))))
	unchanged()

	out, err = plugin(ctx, ns, "prune", "cache", "app", "--confirm")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Removed 2 cache tags created more than 168h0m0s ago"))
	g.Expect(tags(amd64Repo)).To(Equal(slices.DeleteFunc(slices.Clone(amd64Before), func(s string) bool { return s == oldCacheTag })))
	g.Expect(tags(arm64Repo)).To(Equal([]string{strings.Repeat("1b", 32)}))
	g.Expect(resultTags(t, reg, strings.TrimPrefix(amd64Repo, reg.Host+"/"))).To(HaveLen(1), "the fresh result is kept")

	// 0s removes the result too; the next build of its inputs builds.
	out, err = plugin(ctx, ns, "prune", "cache", "app", "--platform", "linux/amd64", "--keep-younger-than", "0s", "--confirm")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`(?m)^`+amd64Repo+` +result-[0-9a-f]{64} +\S+ +removed$`), out)
	g.Expect(reg.Tags(ctx, strings.TrimPrefix(amd64Repo, reg.Host+"/"))).To(BeEmpty())
	g.Expect(tags(arm64Repo)).To(Equal([]string{strings.Repeat("1b", 32)}), "--platform prunes only linux/amd64")
	again := rb.build("linux/amd64", "app-2", map[string]string{"BASE": base}, false)
	g.Expect(again.log).To(ContainSubstring("No earlier result of the same inputs in the layer cache"), again.log)
	g.Expect(resultTags(t, reg, strings.TrimPrefix(amd64Repo, reg.Host+"/"))).To(HaveLen(1), "and keeps its result again")
}

// TestPruneCacheCredentials prunes a cache in the bed's htpasswd registry:
// without credentials the prune fails saying the registry requires some
// and removes nothing; with wrong ones it says they were refused; with the
// credentials in --authfile (builder) or REGISTRY_AUTH_FILE (kubectl
// archway, as podman finds them; --registry-config is the same file) it
// removes the old tag.
func TestPruneCacheCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.AuthRegistry
	run := uniqueName()
	cacheBase := reg.Host + "/it/prune-creds" + run + "-cache"
	cacheRepo := cacheBase + "-linux-amd64"
	ref, err := name.ParseReference(cacheRepo+":"+oldCacheTag, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	basic := &authn.Basic{Username: reg.Username, Password: reg.Password}
	g.Expect(remote.Write(ref, imageCreated(t, time.Now().Add(-30*24*time.Hour)), remote.WithContext(ctx), remote.WithAuth(basic))).To(Succeed())
	tags := func() []string {
		got, err := reg.Tags(ctx, strings.TrimPrefix(cacheRepo, reg.Host+"/"))
		g.Expect(err).NotTo(HaveOccurred())
		return got
	}
	g.Expect(tags()).To(Equal([]string{oldCacheTag}))

	// Nothing in the default places.
	env := []string{"REGISTRY_AUTH_FILE=", "HOME=" + t.TempDir(), "XDG_RUNTIME_DIR=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "DOCKER_CONFIG=" + t.TempDir()}
	args := []string{"prune-cache", "--cache-repo", cacheBase, "--platform", "linux/amd64", "--confirm"}
	out, code := runBuilder(t, env, args...)
	g.Expect(code).NotTo(BeZero(), out)
	g.Expect(out).To(ContainSubstring("listing its tags: registry " + reg.Host + " requires credentials, and none were found for it in the default credential files"))
	g.Expect(tags()).To(Equal([]string{oldCacheTag}))

	out, code = runBuilder(t, env, append(args, "--authfile", authFile(t, reg.Host, reg.Username, "wrong"))...)
	g.Expect(code).NotTo(BeZero(), out)
	g.Expect(out).To(ContainSubstring("the registry refused the credentials for " + reg.Host))
	g.Expect(tags()).To(Equal([]string{oldCacheTag}))

	out, code = runBuilder(t, env, append(args, "--keep-younger-than", "240h", "--authfile", authFile(t, reg.Host, reg.Username, reg.Password))...)
	g.Expect(code).To(BeZero(), out)
	g.Expect(out).To(ContainSubstring("Removed 1 cache tags created more than 240h0m0s ago"))
	g.Expect(reg.Tags(ctx, strings.TrimPrefix(cacheRepo, reg.Host+"/"))).To(BeEmpty())

	// kubectl archway finds the user's credentials in REGISTRY_AUTH_FILE.
	g.Expect(remote.Write(ref, imageCreated(t, time.Now().Add(-30*24*time.Hour)), remote.WithContext(ctx), remote.WithAuth(basic))).To(Succeed())
	ns, err := theBed.CreateNamespace(ctx, "prune-creds")
	g.Expect(err).NotTo(HaveOccurred())
	dockerfile := "FROM scratch\n"
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: &dockerfile}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{
		LayerCache: &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry, Repository: cacheBase}}}
	bc.Spec.Platforms = []string{"linux/amd64"}
	g.Expect(theBed.Client.Create(ctx, bc)).To(Succeed())
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	out, err = plugin(ctx, ns, "prune", "cache", "app", "--confirm")
	g.Expect(err).To(MatchError(ContainSubstring("could not be listed")), out)
	g.Expect(out).To(ContainSubstring("requires credentials, and none were found for it in the default credential files"))
	g.Expect(tags()).To(Equal([]string{oldCacheTag}))
	t.Setenv("REGISTRY_AUTH_FILE", authFile(t, reg.Host, reg.Username, "wrong"))
	out, err = plugin(ctx, ns, "prune", "cache", "app", "--confirm")
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("the registry refused the credentials for " + reg.Host))
	g.Expect(tags()).To(Equal([]string{oldCacheTag}))
	t.Setenv("REGISTRY_AUTH_FILE", authFile(t, reg.Host, reg.Username, reg.Password))
	out, err = plugin(ctx, ns, "prune", "cache", "app", "--confirm")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Removed 1 cache tags"))
	g.Expect(reg.Tags(ctx, strings.TrimPrefix(cacheRepo, reg.Host+"/"))).To(BeEmpty())
}
