package podcontroller

import (
	"context"
	"fmt"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/platform"
)

// Indexes of the controller's cache of Builds: the repository a completed
// Build pushed to, and that repository with the digest it pushed.
const (
	buildOutputRepositoryIndex = "placement.archway.dev/output-repository"
	buildOutputDigestIndex     = "placement.archway.dev/output-repository-digest"
)

// builtImages answers for images that archway Builds pushed, from the
// Builds' status instead of the registry: a Build that completed records
// the digest it pushed (status.output.to.imageDigest, the index's for a
// multi-platform build) and the platform of each image in it
// (status.platforms[].output). A pod's image is answered so when a completed
// Build of the pod's own namespace pushed that digest to that repository:
// a digest reference needs no registry call at all, a tag one manifest HEAD
// (or none while the tag's resolution is fresh), and neither the manifest
// nor the config is read.
//
// Only Builds of the pod's namespace are trusted. A Build's status is
// written by its own pods (a ValidatingAdmissionPolicy holds them to it),
// by build-controller, and by whoever may update builds/status in its
// namespace; such a user could write any digest and platforms there. Were
// Builds of other namespaces trusted, a tenant could forge one naming the
// digest another namespace's pods run and send those pods to the wrong
// architecture. Confined to its namespace, a forged status steers only
// that namespace's own pods, whose placement its tenants decide anyway.
type builtImages struct {
	// builds reads the cache of Builds narrowed by builtOutput and indexed
	// by buildOutputRepositoryIndex and buildOutputDigestIndex.
	builds client.Reader
	// resolver resolves a tag to its digest (one manifest HEAD at most).
	resolver digestResolver
}

// digestResolver resolves a reference to its digest without reading the
// manifest (image.Cache).
type digestResolver interface {
	Digest(ctx context.Context, ref image.Reference, auth image.Auth) (digest.Digest, error)
}

// platforms returns the platforms of ref from a completed Build of
// namespace ns, and whether one answered. A reference that does not parse,
// or that no completed Build of ns pushed to, is left to the inspector
// (false, no error); an error resolving a tag is returned.
func (b *builtImages) platforms(ctx context.Context, ns string, ref image.Reference, auth image.Auth) (image.Platforms, bool, error) {
	named, err := reference.ParseNormalizedNamed(ref.Name)
	if err != nil {
		return nil, false, nil
	}
	repo := named.Name()
	// Which repositories Builds push to is known without the registry: a
	// tag is resolved only for those, so other images cost nothing more.
	var builds buildv1.BuildList
	if err := b.builds.List(ctx, &builds, client.InNamespace(ns), client.MatchingFields{buildOutputRepositoryIndex: repo}); err != nil {
		return nil, false, err
	}
	if len(builds.Items) == 0 {
		return nil, false, nil
	}
	d, err := b.resolver.Digest(ctx, ref, auth)
	if err != nil {
		return nil, false, err
	}
	if err := b.builds.List(ctx, &builds, client.InNamespace(ns), client.MatchingFields{buildOutputDigestIndex: repo + "@" + d.String()}); err != nil {
		return nil, false, err
	}
	for i := range builds.Items {
		if ps := buildPlatforms(&builds.Items[i]); len(ps) > 0 {
			return ps, true, nil
		}
	}
	return nil, false, nil
}

// buildPlatforms are the platforms of a completed Build's images, nil when
// its status does not say (a single-platform build records none).
func buildPlatforms(b *buildv1.Build) image.Platforms {
	if b.Status.Phase != buildv1.BuildPhaseComplete {
		return nil
	}
	var ps image.Platforms
	for _, e := range b.Status.Platforms {
		if e.Phase != buildv1.BuildPhaseComplete || e.Output == nil {
			continue
		}
		p := platform.Platform{OS: e.Output.OS, Architecture: e.Output.Architecture}
		if p.OS == "" || p.Architecture == "" {
			parsed, err := platform.Parse(e.Platform)
			if err != nil {
				continue
			}
			p = platform.Platform{OS: parsed.OS, Architecture: parsed.Architecture}
		}
		ps = append(ps, p)
	}
	return ps
}

// buildOutput is the repository and digest a completed Build pushed, empty
// when it has not completed or pushed to no image reference.
func buildOutput(b *buildv1.Build) (repo string, d digest.Digest) {
	if b.Status.Phase != buildv1.BuildPhaseComplete || b.Status.Output.To == nil ||
		b.Spec.Output.To == nil || b.Spec.Output.To.Kind != "DockerImage" {
		return "", ""
	}
	d, err := digest.Parse(b.Status.Output.To.ImageDigest)
	if err != nil {
		return "", ""
	}
	named, err := reference.ParseNormalizedNamed(b.Spec.Output.To.Name)
	if err != nil {
		return "", ""
	}
	return named.Name(), d
}

// indexBuildOutputRepository and indexBuildOutputDigest index the cache.
func indexBuildOutputRepository(obj client.Object) []string {
	if b, ok := obj.(*buildv1.Build); ok {
		if repo, _ := buildOutput(b); repo != "" {
			return []string{repo}
		}
	}
	return nil
}

func indexBuildOutputDigest(obj client.Object) []string {
	if b, ok := obj.(*buildv1.Build); ok {
		if repo, d := buildOutput(b); repo != "" {
			return []string{repo + "@" + d.String()}
		}
	}
	return nil
}

// builtOutput is the cache transform of Builds: a completed Build keeps
// what builtImages reads (its output reference, phase, digest and its
// completed platforms' OS and architecture), any other Build its key
// alone, so the controller's memory does not grow with what Builds carry
// (logs, stages, conditions, sources).
func builtOutput(obj any) (any, error) {
	b, ok := obj.(*buildv1.Build)
	if !ok {
		return obj, nil
	}
	out := &buildv1.Build{TypeMeta: b.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: b.Name, Namespace: b.Namespace, UID: b.UID, ResourceVersion: b.ResourceVersion,
	}}
	if repo, d := buildOutput(b); repo != "" {
		out.Spec.Output.To = &corev1.ObjectReference{Kind: b.Spec.Output.To.Kind, Name: b.Spec.Output.To.Name}
		out.Status.Phase = b.Status.Phase
		out.Status.Output.To = &buildv1.BuildStatusOutputTo{ImageDigest: d.String()}
		for _, e := range b.Status.Platforms {
			if e.Phase != buildv1.BuildPhaseComplete || e.Output == nil {
				continue
			}
			out.Status.Platforms = append(out.Status.Platforms, buildv1.BuildStatusPlatform{
				Platform: e.Platform, Phase: e.Phase,
				Output: &buildv1.BuildStatusPlatformOutput{OS: e.Output.OS, Architecture: e.Output.Architecture},
			})
		}
	}
	return out, nil
}

// describeBuilt is the log line of an image answered from a Build.
func describeBuilt(img string, ps image.Platforms) string {
	return fmt.Sprintf("%s: platforms %v from the status of the Build that pushed it", img, ps)
}
