package image

import (
	"context"
	"fmt"
	"slices"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	lplatform "go.podman.io/common/libimage/platform"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"

	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// PlatformImage is the image an image reference gives for one platform, and
// its config: what a build that starts FROM it starts from.
type PlatformImage struct {
	// Reference is the image by digest (repository@digest): the
	// platform's child when ref names an index.
	Reference string
	// Config is the image's config (labels, user, working directory,
	// environment).
	Config ocispec.ImageConfig
}

// PlatformConfig reads the image ref (a role's, as errors name it: builder
// image) gives for target from its registry
// (through the cluster's mirrors, with auth), as a pull for target would
// choose it: a source-to-image build reads its builder image's labels so.
// A registry the cluster blocks fails with a *registry.BlockedError; an
// image without target fails with a *BaseImagePlatformError.
func (b *Builder) PlatformConfig(ctx context.Context, role, ref string, target platform.Platform, auth registry.AuthFile) (PlatformImage, error) {
	sys, err := b.systemContext([]string{ref}, auth)
	if err != nil {
		return PlatformImage{}, err
	}
	if err := registry.CheckBlocked(sys, ref, false); err != nil {
		return PlatformImage{}, err
	}
	spelled := target.Normalize()
	sys.OSChoice, sys.ArchitectureChoice, sys.VariantChoice = lplatform.Normalize(spelled.OS, spelled.Architecture, spelled.Variant)
	imgRef, err := docker.ParseReference("//" + ref)
	if err != nil {
		return PlatformImage{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	src, err := imgRef.NewImageSource(ctx, sys)
	if err != nil {
		return PlatformImage{}, contextErr(ctx, fmt.Errorf("reading %s: %w", ref, err))
	}
	defer func() { _ = src.Close() }()
	raw, mediaType, err := src.GetManifest(ctx, nil)
	if err != nil {
		return PlatformImage{}, contextErr(ctx, fmt.Errorf("reading the manifest of %s: %w", ref, err))
	}
	dgst, err := manifest.Digest(raw)
	if err != nil {
		return PlatformImage{}, err
	}
	if manifest.MIMETypeIsMultiImage(mediaType) {
		list, err := manifest.ListFromBlob(raw, mediaType)
		if err != nil {
			return PlatformImage{}, fmt.Errorf("reading the index %s: %w", ref, err)
		}
		if dgst, err = list.ChooseInstance(sys); err != nil {
			return PlatformImage{}, &BaseImagePlatformError{Image: ref, Platform: target.String(), Available: indexPlatforms(list), Role: role}
		}
	}
	img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, &dgst))
	if err != nil {
		return PlatformImage{}, contextErr(ctx, fmt.Errorf("reading %s: %w", ref, err))
	}
	config, err := img.OCIConfig(ctx)
	if err != nil {
		return PlatformImage{}, contextErr(ctx, fmt.Errorf("reading the config of %s: %w", ref, err))
	}
	if have := platform.FromOCI(config.Platform); config.Architecture != "" && !platform.Matches(target, have) {
		return PlatformImage{}, &BaseImagePlatformError{Image: ref, Platform: target.String(), Available: []string{have.String()}, Single: true, Role: role}
	}
	return PlatformImage{Reference: imgRef.DockerReference().Name() + "@" + dgst.String(), Config: config.Config}, nil
}

// indexPlatforms lists the platforms of an index's images, sorted, without
// the attestation manifests buildkit pushes (platform unknown/unknown).
func indexPlatforms(list manifest.List) []string {
	var available []string
	for _, d := range list.Instances() {
		inst, err := list.Instance(d)
		if err != nil || inst.ReadOnly.Platform == nil {
			continue
		}
		p := platform.FromOCI(*inst.ReadOnly.Platform)
		if p.OS == "unknown" || p.Architecture == "unknown" {
			continue
		}
		available = append(available, p.String())
	}
	slices.Sort(available)
	return slices.Compact(available)
}
