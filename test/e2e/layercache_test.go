package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestLayerCacheFourPlatforms builds a BuildConfig with a registry layer
// cache for four platforms twice, each platform's pod starting with an
// empty store: the first build's RUN step runs on every platform and the
// steps are pushed to each platform's cache repository next to the output;
// the second build runs no RUN step (its logs say the step came from the
// cache, and never show what the RUN prints), gives the same /machine per
// platform, and its images carry the second build's labels. It prints the
// two builds' times and each platform's build pod time.
func TestLayerCacheFourPlatforms(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "cache")
	bc := h.buildConfig("FROM "+env.Bed.BaseImage+"\nRUN echo \"ran on $(uname -m)\" && uname -m > /machine\n", framework.Platforms, nil)
	bc.Spec.Strategy.DockerStrategy.LayerCache = &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}
	g.Expect(env.Bed.Client.Update(h.ctx, bc)).To(Succeed())

	type run struct {
		wall  time.Duration
		pods  map[string]time.Duration
		build *buildv1.Build
		logs  map[string]string
	}
	buildOnce := func(n int64) run {
		t.Helper()
		h.watchBuild(instantiate.Name(bc.Name, n))
		start := time.Now()
		b, err := framework.StartBuild(h.ctx, env.Bed.Client, h.bc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Name).To(Equal(h.b.Name))
		b = h.waitTerminal()
		r := run{wall: time.Since(start), pods: map[string]time.Duration{}, build: b, logs: map[string]string{}}
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
		for _, p := range framework.Platforms {
			pod := build.PlatformPodName(b.Name, p)
			if times, ok := h.tl.Pod(pod); ok && !times.Running.IsZero() && !times.Finished.IsZero() {
				r.pods[p] = times.Finished.Sub(times.Running)
			}
			logs, err := env.Kubectl(h.ctx, "logs", "-n", h.ns, pod)
			g.Expect(err).NotTo(HaveOccurred(), logs)
			r.logs[p] = logs
		}
		return r
	}

	first := buildOnce(1)
	for _, p := range framework.Platforms {
		g.Expect(first.logs[p]).To(ContainSubstring("ran on "+framework.UnameOf[p]), "the first build runs the RUN step on %s", p)
		repo := h.repo + "-cache-" + strings.ReplaceAll(p, "/", "-")
		g.Expect(first.logs[p]).To(ContainSubstring("Layer cache: " + env.Bed.Registry.Host + "/" + repo))
		tags, err := env.Bed.Registry.Tags(h.ctx, repo)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).NotTo(BeEmpty(), "%s's steps are in its own cache repository", p)
	}

	second := buildOnce(2)
	for _, p := range framework.Platforms {
		g.Expect(second.logs[p]).To(ContainSubstring("Cache pulled from remote"), "the second build on %s takes the step from the registry", p)
		g.Expect(second.logs[p]).NotTo(ContainSubstring("ran on "+framework.UnameOf[p]), "the second build on %s runs no RUN step", p)
	}
	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(framework.UnameOf))
	for _, e := range second.build.Status.Platforms {
		img, err := env.Bed.Registry.OpenImage(h.ctx, env.Bed.Registry.Host+"/"+h.repo+"@"+e.Output.ImageDigest)
		g.Expect(err).NotTo(HaveOccurred())
		labels, err := img.Labels(h.ctx)
		img.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(labels).To(HaveKeyWithValue("io.openshift.build.name", second.build.Name), "the %s image is labelled by the build that made it", e.Platform)
	}

	fmt.Printf("layer cache, four-platform Build on the bed: first %.1fs, second %.1fs (wall, start to Complete)\n",
		first.wall.Seconds(), second.wall.Seconds())
	for _, p := range framework.Platforms {
		fmt.Printf("  %-14s build pod running %.1fs, then %.1fs\n", p, first.pods[p].Seconds(), second.pods[p].Seconds())
	}
}
