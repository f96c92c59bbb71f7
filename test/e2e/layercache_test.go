package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestLayerCacheFourPlatforms builds a BuildConfig with a registry layer
// cache for four platforms twice, each platform's pod starting with an
// empty store: the first build's RUN step runs on every platform and the
// steps are pushed to each platform's cache repository next to the output;
// the second build runs no step at all (its logs say the whole result came
// from the cache repository, and never show a buildah step), gives the same
// /machine and layers per platform, and its images carry the second
// build's labels. It prints the
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
			pod := buildv1.PlatformPodName(b.Name, p)
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
		g.Expect(second.logs[p]).To(ContainSubstring("from the layer cache: an earlier build had the same inputs"),
			"the second build on %s reuses the first's result from the cache repository", p)
		g.Expect(second.logs[p]).NotTo(ContainSubstring("STEP 1/"), "the second build on %s runs no buildah step", p)
		g.Expect(second.logs[p]).NotTo(ContainSubstring("ran on "+framework.UnameOf[p]), "the second build on %s runs no RUN step", p)
	}
	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(framework.UnameOf))
	firstLayers := map[string][]string{}
	for _, e := range first.build.Status.Platforms {
		firstLayers[e.Platform], _ = imageLayersAndLabels(g, h, e.Output.ImageDigest)
	}
	for _, e := range second.build.Status.Platforms {
		layers, labels := imageLayersAndLabels(g, h, e.Output.ImageDigest)
		g.Expect(labels).To(HaveKeyWithValue("io.openshift.build.name", second.build.Name), "the %s image is labelled by the build that made it", e.Platform)
		g.Expect(layers).To(Equal(firstLayers[e.Platform]), "the second %s image has the first's layers", e.Platform)
	}

	fmt.Printf("layer cache, four-platform Build on the bed: first %.1fs, second %.1fs (wall, start to Complete)\n",
		first.wall.Seconds(), second.wall.Seconds())
	for _, p := range framework.Platforms {
		fmt.Printf("  %-14s build pod running %.1fs, then %.1fs\n", p, first.pods[p].Seconds(), second.pods[p].Seconds())
	}
}

// imageLayersAndLabels returns the layer digests and the labels of the
// image digest names in the harness's output repository.
func imageLayersAndLabels(g Gomega, h *harness, digest string) ([]string, map[string]string) {
	img, err := env.Bed.Registry.OpenImage(h.ctx, env.Bed.Registry.Host+"/"+h.repo+"@"+digest)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	raw, _, err := img.Manifest(h.ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	layers := make([]string, 0, len(m.Layers))
	for _, l := range m.Layers {
		layers = append(layers, l.Digest)
	}
	labels, err := img.Labels(h.ctx)
	g.Expect(err).NotTo(HaveOccurred())
	return layers, labels
}
