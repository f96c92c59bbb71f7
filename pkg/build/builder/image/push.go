package image

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.podman.io/buildah"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/pkg/compression"
	"go.podman.io/storage/pkg/archive"

	"github.com/archway-build/archway/pkg/registry"
)

// Pushed is an image pushed to a registry.
type Pushed struct {
	// Reference is the pull spec pushed to (repository:tag).
	Reference string
	// Digest is the manifest digest the registry stored, "sha256:...".
	Digest string
	// Duration is how long the push took.
	Duration time.Duration
}

// Push pushes the image imageID from the builder's store to dest, a
// registry reference with a tag, with the credentials of auth, compressing
// layers with gzip. The digest is the one of the manifest the registry
// received: pushing from a store recompresses layers, so no digest known
// before the push is the pushed image's. A failure is a *StageError with
// StagePush.
func (b *Builder) Push(ctx context.Context, imageID, dest string, format Format, auth registry.AuthFile, out io.Writer) (Pushed, error) {
	start := time.Now()
	if out == nil {
		out = io.Discard
	}
	ref, err := docker.ParseReference("//" + dest)
	if err != nil {
		return Pushed{}, &StageError{Stage: StagePush, Err: fmt.Errorf("output image reference %q: %w", dest, err)}
	}
	sys, err := b.systemContext([]string{dest}, auth)
	if err != nil {
		return Pushed{}, &StageError{Stage: StagePush, Err: err}
	}
	gzip := compression.Gzip
	_, dgst, err := buildah.Push(ctx, imageID, ref, buildah.PushOptions{
		Compression:         archive.Gzip,
		CompressionFormat:   &gzip,
		SignaturePolicyPath: b.policyPath,
		ReportWriter:        out,
		Store:               b.store,
		SystemContext:       sys,
		ManifestType:        manifestType(format),
		MaxRetries:          2,
		RetryDelay:          2 * time.Second,
	})
	if err != nil {
		return Pushed{}, &StageError{Stage: StagePush, Err: fmt.Errorf("pushing to %s: %w", dest, contextErr(ctx, err))}
	}
	return Pushed{Reference: dest, Digest: dgst.String(), Duration: time.Since(start)}, nil
}
