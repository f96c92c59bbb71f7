package builder_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// origin is where the Dockerfiles say their base is: a registry no
// machine reaches (the .invalid domain never resolves), as a public
// registry is out of reach from an air-gapped cluster.
const origin = "origin.archway.invalid/team"

// TestDockerBuildPullsThroughMirrors: a build pod handed the cluster's
// registry configuration ($ARCHWAY_REGISTRIES_CONF) pulls a base whose
// FROM names its original location from the mirror the configuration
// names, by tag through a tag mirror (ImageTagMirrorSet) and by digest
// through a digest mirror (ImageDigestMirrorSet), which serves no tag; a
// blocked registry is refused with a message saying what to do. Without
// the configuration the same build fails pulling from the original
// location.
func TestDockerBuildPullsThroughMirrors(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mirror := theBed.Registry.Host + "/mirrored"
	g.Expect(theBed.Registry.CopyIndex(ctx, theBed.BaseImage, mirror+"/base:1", nil)).To(Succeed())
	dgst, err := theBed.Registry.ManifestDigest(ctx, "mirrored/base", "1")
	g.Expect(err).NotTo(HaveOccurred())
	conf := func(pull string, blocked bool) string {
		return fmt.Sprintf("[[registry]]\nlocation = %q\nblocked = %v\n[[registry.mirror]]\nlocation = %q\npull-from-mirror = %q\n",
			origin, blocked, mirror, pull)
	}
	build := func(t *testing.T, from, registries string) (string, int) {
		b := newBuild("mirrors", "mirrors-1", "FROM "+from+"\nLABEL built=1\n", "", []string{"linux/amd64"}, nil)
		env := []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, "linux/amd64")}
		if registries != "" {
			env = append(env, buildv1.RegistriesConfEnv+"="+registries)
		}
		return runBuilder(t, env, "docker-build", "--no-report")
	}
	byTag, byDigest := origin+"/base:1", origin+"/base@"+dgst

	t.Run("without the configuration the original location is pulled from", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, byTag, "")
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("origin.archway.invalid"))
		g.Expect(log).To(ContainSubstring("DockerBuildFailed"))
	})
	t.Run("a tag mirror serves the tag", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, byTag, conf("tag-only", false))
		g.Expect(code).To(Equal(0), log)
	})
	t.Run("a digest mirror serves the digest", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, byDigest, conf("digest-only", false))
		g.Expect(code).To(Equal(0), log)
	})
	t.Run("a digest mirror serves no tag", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, byTag, conf("digest-only", false))
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("origin.archway.invalid"))
	})
	t.Run("a blocked registry is refused", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, byTag, conf("digest-only", true))
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("registry " + origin + " is blocked by the cluster's registry configuration"))
		g.Expect(log).To(ContainSubstring("name the image by digest"))
		g.Expect(log).To(ContainSubstring("PullBuilderImageFailed"))
		// The digest is served by the mirror, blocked source or not.
		log, code = build(t, byDigest, conf("digest-only", true))
		g.Expect(code).To(Equal(0), log)
		g.Expect(strings.Count(log, "blocked")).To(BeZero(), log)
	})
}

// TestDockerBuildAllowedRegistries: a build pod handed the image config's
// allowedRegistries ($ARCHWAY_ALLOWED_REGISTRIES) reads bases only from
// them, mirrors or not, as OpenShift's nodes do by policy.json: a FROM
// of a Dockerfile that only the build pod reads (build-controller cannot
// check it before the pod) on a registry left out is refused with a
// message saying what to do, even when a mirror serves it; allowed, the
// same FROM builds through the mirror.
func TestDockerBuildAllowedRegistries(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mirror := theBed.Registry.Host + "/allowed-mirror"
	g.Expect(theBed.Registry.CopyIndex(ctx, theBed.BaseImage, mirror+"/base:1", nil)).To(Succeed())
	conf := fmt.Sprintf("[[registry]]\nlocation = %q\n[[registry.mirror]]\nlocation = %q\npull-from-mirror = \"tag-only\"\n", origin, mirror)
	build := func(t *testing.T, from, allowed string) (string, int) {
		b := newBuild("allowed", "allowed-1", "FROM "+from+"\nLABEL built=1\n", "", []string{"linux/amd64"}, nil)
		env := []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, "linux/amd64"), buildv1.RegistriesConfEnv + "=" + conf}
		if allowed != "" {
			env = append(env, buildv1.AllowedRegistriesEnv+"="+allowed)
		}
		return runBuilder(t, env, "docker-build", "--no-report")
	}

	t.Run("a registry left out is refused, mirror or not", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, origin+"/base:1", theBed.Registry.Host+", *.example.com")
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("registry origin.archway.invalid is not among the allowed registries"))
		g.Expect(log).To(ContainSubstring("PullBuilderImageFailed"))
	})
	t.Run("the bed's registry left out is refused", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, theBed.BaseImage, "quay.io")
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("is not among the allowed registries"))
	})
	t.Run("an allowed registry is read through its mirror", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, origin+"/base:1", "quay.io, origin.archway.invalid/team")
		g.Expect(code).To(Equal(0), log)
	})
	t.Run("without the list every registry is read", func(t *testing.T) {
		g := NewWithT(t)
		log, code := build(t, theBed.BaseImage, "")
		g.Expect(code).To(Equal(0), log)
	})
}
