package controller

import (
	"testing"

	. "github.com/onsi/gomega"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

func TestResolveLayerCache(t *testing.T) {
	const repo = "registry.example.com/team/app-cache"
	registry := configv1alpha1.LayerCacheConfig{Mode: buildv1.LayerCacheRegistry}
	disabled := configv1alpha1.LayerCacheConfig{Mode: buildv1.LayerCacheDisabled}
	for _, tc := range []struct {
		name string
		own  *buildv1.LayerCache
		cfg  configv1alpha1.LayerCacheConfig
		want *buildv1.LayerCache
	}{
		{name: "neither says: off"},
		{name: "config default on", cfg: registry, want: &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}},
		{name: "config default off", cfg: disabled},
		{name: "the build turns it on", own: &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}, cfg: disabled,
			want: &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}},
		{name: "the build turns it off", own: &buildv1.LayerCache{Mode: buildv1.LayerCacheDisabled}, cfg: registry},
		{name: "the build names a repository, mode from the config", own: &buildv1.LayerCache{Repository: repo}, cfg: registry,
			want: &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry, Repository: repo}},
		{name: "a repository without a mode is off by default", own: &buildv1.LayerCache{Repository: repo}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(ResolveLayerCache(tc.own, tc.cfg)).To(Equal(tc.want))
		})
	}
}

// TestBuildPodLayerCache: the Build a platform's pod reads carries the
// resolved layer cache, so the builder decides from it alone.
func TestBuildPodLayerCache(t *testing.T) {
	four := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	on := testConfig(func(c *configv1alpha1.BuildControllerConfig) { c.LayerCache.Mode = buildv1.LayerCacheRegistry })
	g := NewWithT(t)

	pod, err := PodPlan{Config: on, Platforms: four}.BuildPod(makeBuild("app").obj(), "linux/arm64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podBuild(t, pod).Spec.Strategy.DockerStrategy.LayerCache).To(Equal(&buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}))

	off := makeBuild("app").obj()
	off.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{LayerCache: &buildv1.LayerCache{Mode: buildv1.LayerCacheDisabled}}
	pod, err = PodPlan{Config: on, Platforms: four}.BuildPod(off, "linux/arm64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podBuild(t, pod).Spec.Strategy.DockerStrategy.LayerCache).To(BeNil())

	pod, err = PodPlan{Config: testConfig(), Platforms: four}.BuildPod(makeBuild("app").obj(), "linux/arm64")
	g.Expect(err).NotTo(HaveOccurred())
	if ds := podBuild(t, pod).Spec.Strategy.DockerStrategy; ds != nil {
		g.Expect(ds.LayerCache).To(BeNil(), "off unless configured")
	}
}
