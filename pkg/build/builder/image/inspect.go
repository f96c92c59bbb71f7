package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// Image is an image manifest in a registry, as a manifest list entry needs
// it.
type Image struct {
	// Reference is the image's pull spec by digest (repository@digest).
	Reference string
	// Digest is the manifest's digest.
	Digest string
	// MediaType is the manifest's media type (OCI or Docker schema 2).
	MediaType string
	// Size is the manifest's size in bytes.
	Size int64
	// Platform is the platform the image's config records.
	Platform ocispec.Platform
}

// Inspect reads the image manifest ref names (a tag or a digest) and its
// config from the registry: what a pushed image really is, whatever the
// build meant it to be. ref must name an image, not an index.
func (b *Builder) Inspect(ctx context.Context, ref string, auth registry.AuthFile) (Image, error) {
	sys, err := b.systemContext([]string{ref}, auth)
	if err != nil {
		return Image{}, err
	}
	return inspect(ctx, sys, ref)
}

func inspect(ctx context.Context, sys *types.SystemContext, ref string) (Image, error) {
	imgRef, err := docker.ParseReference("//" + ref)
	if err != nil {
		return Image{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	src, err := imgRef.NewImageSource(ctx, sys)
	if err != nil {
		return Image{}, fmt.Errorf("reading %s: %w", ref, err)
	}
	defer func() { _ = src.Close() }()
	raw, mediaType, err := src.GetManifest(ctx, nil)
	if err != nil {
		return Image{}, fmt.Errorf("reading the manifest of %s: %w", ref, err)
	}
	if manifest.MIMETypeIsMultiImage(mediaType) {
		return Image{}, fmt.Errorf("%s is an image index (%s), not an image", ref, mediaType)
	}
	dgst, err := manifest.Digest(raw)
	if err != nil {
		return Image{}, err
	}
	img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, nil))
	if err != nil {
		return Image{}, fmt.Errorf("reading %s: %w", ref, err)
	}
	config, err := img.OCIConfig(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("reading the config of %s: %w", ref, err)
	}
	name := imgRef.DockerReference().Name()
	return Image{
		Reference: name + "@" + dgst.String(),
		Digest:    dgst.String(),
		MediaType: mediaType,
		Size:      int64(len(raw)),
		Platform:  config.Platform,
	}, nil
}

// checkBaseImage fails with a *BaseImagePlatformError when ref, a base
// image, has no image for the target platform that sys chooses, the way
// the pull will choose it. It returns ref with the digest of the manifest
// chosen, or no digest and no error when the image cannot be read: the
// pull then reports why, in its own words. With readConfig it also reads
// the chosen image's config to tell whether it has ONBUILD triggers (a
// result key needs to know; an image chosen from an index costs two more
// requests), and returns no digest when that config cannot be read.
func checkBaseImage(ctx context.Context, sys *types.SystemContext, ref string, target platform.Platform, readConfig bool) (resolvedBase, error) {
	none := resolvedBase{Ref: ref}
	imgRef, err := docker.ParseReference("//" + ref)
	if err != nil {
		return none, nil
	}
	src, err := imgRef.NewImageSource(ctx, sys)
	if err != nil {
		return none, nil
	}
	defer func() { _ = src.Close() }()
	raw, mediaType, err := src.GetManifest(ctx, nil)
	if err != nil {
		return none, nil
	}
	if !manifest.MIMETypeIsMultiImage(mediaType) {
		dgst, err := manifest.Digest(raw)
		if err != nil {
			return none, nil
		}
		img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, nil))
		if err != nil {
			return none, nil
		}
		config, err := img.OCIConfig(ctx)
		if err != nil || config.OS == "" || config.Architecture == "" {
			return none, nil
		}
		have := platform.FromOCI(config.Platform)
		if !platform.Matches(target, have) {
			return none, &BaseImagePlatformError{Image: ref, Platform: target.String(), Available: []string{have.String()}, Single: true}
		}
		if !readConfig {
			return resolvedBase{Ref: ref, Digest: dgst.String()}, nil
		}
		return withOnBuild(ctx, img, resolvedBase{Ref: ref, Digest: dgst.String()}), nil
	}
	list, err := manifest.ListFromBlob(raw, mediaType)
	if err != nil {
		return none, nil
	}
	if chosen, err := list.ChooseInstance(sys); err == nil {
		found := resolvedBase{Ref: ref, Digest: chosen.String()}
		if !readConfig {
			return found, nil
		}
		img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, &chosen))
		if err != nil {
			return none, nil
		}
		return withOnBuild(ctx, img, found), nil
	}
	return none, &BaseImagePlatformError{Image: ref, Platform: target.String(), Available: indexPlatforms(list)}
}

// withOnBuild returns base with OnBuild set when img's config has ONBUILD
// triggers (which the OCI config has no field for: they are read from the
// config as stored), or without its digest when the config cannot be read.
func withOnBuild(ctx context.Context, img types.Image, base resolvedBase) resolvedBase {
	raw, err := img.ConfigBlob(ctx)
	if err != nil {
		return resolvedBase{Ref: base.Ref}
	}
	var config struct {
		Config struct {
			OnBuild []string `json:"OnBuild"`
		} `json:"config"`
	}
	if json.Unmarshal(raw, &config) != nil {
		return resolvedBase{Ref: base.Ref}
	}
	base.OnBuild = len(config.Config.OnBuild) > 0
	return base
}

// IsBaseImagePlatformError reports whether err says that a base image lacks
// the target platform.
func IsBaseImagePlatformError(err error) bool {
	var e *BaseImagePlatformError
	return errors.As(err, &e)
}
