package builder_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"go.podman.io/image/v5/manifest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// imageOptDockerfile has three instructions that change the filesystem
// (the RUNs) and two that change only the config (ENV, LABEL).
func imageOptDockerfile() string {
	return "FROM " + theBed.BaseImage + "\nENV A=1\nRUN echo one > /one\nRUN echo two > /two\nLABEL step=4\nRUN echo three > /three\n"
}

// TestDockerBuildImageOptimizationPolicy builds one Dockerfile with each
// imageOptimizationPolicy through `builder docker-build` and counts the
// layers of the pushed image in the registry: None commits a layer per
// RUN on top of the base image's layers; SkipLayers and SkipLayersAndWarn
// squash the three into one layer holding every file the RUNs wrote, and
// SkipLayersAndWarn says so in the build log.
func TestDockerBuildImageOptimizationPolicy(t *testing.T) {
	ctx := t.Context()
	g := NewWithT(t)
	ns, err := theBed.CreateNamespace(ctx, "imageopt")
	g.Expect(err).NotTo(HaveOccurred())
	base := baseLayerCount(ctx, g)
	g.Expect(base).To(BeNumerically(">", 0))

	for i, tc := range []struct {
		policy buildv1.ImageOptimizationPolicy
		layers int
		top    []string // files the top layer holds
	}{
		{policy: buildv1.ImageOptimizationNone, layers: base + 3, top: []string{"/three"}},
		{policy: buildv1.ImageOptimizationSkipLayers, layers: base + 1, top: []string{"/one", "/two", "/three"}},
		{policy: buildv1.ImageOptimizationSkipLayersAndWarn, layers: base + 1, top: []string{"/one", "/two", "/three"}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			g := NewWithT(t)
			tag := strings.ToLower(string(tc.policy))
			output := theBed.Registry.Host + "/it/imageopt:" + tag
			b := newBuild(ns, "imageopt-"+tag, imageOptDockerfile(), output, nil, nil)
			policy := tc.policy
			b.Spec.Strategy.DockerStrategy.ImageOptimizationPolicy = &policy
			g.Expect(theBed.Client.Create(ctx, b)).To(Succeed())
			log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, ""), "KUBECONFIG=" + theBed.Kubeconfig}, "docker-build")
			g.Expect(code).To(Equal(0), log)
			const warning = "Warning: imageOptimizationPolicy SkipLayersAndWarn"
			if tc.policy == buildv1.ImageOptimizationSkipLayersAndWarn {
				g.Expect(log).To(ContainSubstring(warning))
			} else {
				g.Expect(log).NotTo(ContainSubstring(warning))
			}

			img, err := theBed.Registry.OpenImage(ctx, output)
			g.Expect(err).NotTo(HaveOccurred())
			defer img.Close()
			raw, mt, err := img.Manifest(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			m, err := manifest.FromBlob(raw, mt)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.LayerInfos()).To(HaveLen(tc.layers), "build %d (%s): %d base layers\n%s", i, tc.policy, base, log)
			d, err := theBed.Registry.ManifestDigest(ctx, "it/imageopt", tag)
			g.Expect(err).NotTo(HaveOccurred())
			for _, f := range tc.top {
				_, err := img.OnlyTopLayerFile(ctx, digestOf(d), f)
				g.Expect(err).NotTo(HaveOccurred(), "%s in the top layer", f)
			}
		})
	}
}

// baseLayerCount returns the layers of the bed's base image for this
// machine's architecture, read from the registry.
func baseLayerCount(ctx context.Context, g Gomega) int {
	img, err := theBed.Registry.OpenImage(ctx, theBed.BaseImage)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	name := theBed.BaseImage
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	for _, d := range index.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		child, err := theBed.Registry.OpenImage(ctx, name+"@"+d.Digest.String())
		g.Expect(err).NotTo(HaveOccurred())
		defer child.Close()
		raw, mt, err := child.Manifest(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		m, err := manifest.FromBlob(raw, mt)
		g.Expect(err).NotTo(HaveOccurred())
		return len(m.LayerInfos())
	}
	g.Expect(index.Manifests).To(BeEmpty(), "the base image has no linux/%s image", runtime.GOARCH)
	return 0
}
