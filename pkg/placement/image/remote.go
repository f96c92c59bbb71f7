package image

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	cimage "go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/registry"
)

// RemoteOptions configure how Remote reaches registries.
type RemoteOptions struct {
	// InsecureRegistries are hosts (host or host:port) reached over plain
	// HTTP or TLS without verification, like registries.conf's insecure
	// (registry.Access's rule: loopback registries always are).
	InsecureRegistries []string
	// RegistriesConfPath is a registries.conf for mirrors and insecure
	// registries; empty means containers/image's system default.
	RegistriesConfPath string
	// Timeout bounds one inspection or resolution; default 30s.
	Timeout time.Duration
	// UserAgent is sent to registries; default "archway-placement".
	UserAgent string
}

// Remote inspects images in their registries with containers/image. It
// keeps no state between calls.
type Remote struct {
	opts RemoteOptions
}

// NewRemote returns a Remote with opts.
func NewRemote(opts RemoteOptions) *Remote {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "archway-placement"
	}
	return &Remote{opts: opts}
}

var _ Registry = (*Remote)(nil)

// Architectures reads the manifest ref names: an index gives its entries'
// platforms, a single image its config's. The digest is the manifest's or
// index's. Each credential in auth is tried in turn.
func (r *Remote) Architectures(ctx context.Context, ref Reference, auth Auth) (Platforms, digest.Digest, error) {
	var platforms Platforms
	var dgst digest.Digest
	err := r.withAuth(ctx, ref.Name, auth, func(ctx context.Context, iref types.ImageReference, sys *types.SystemContext) error {
		src, err := iref.NewImageSource(ctx, sys)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		blob, mime, err := src.GetManifest(ctx, nil)
		if err != nil {
			return err
		}
		if dgst, err = manifest.Digest(blob); err != nil {
			return err
		}
		if mime == "" {
			mime = manifest.GuessMIMEType(blob)
		}
		if manifest.MIMETypeIsMultiImage(mime) {
			platforms, err = PlatformsFromIndex(blob, mime)
			return err
		}
		img, err := cimage.FromUnparsedImage(ctx, sys, cimage.UnparsedInstance(src, nil))
		if err != nil {
			return err
		}
		info, err := img.Inspect(ctx)
		if err != nil {
			return err
		}
		if isOperatorBundle(info.Labels) {
			platforms = Platforms{{OS: AnyArchitecture, Architecture: AnyArchitecture}}
			return nil
		}
		platforms = PlatformFromConfig(info.Os, info.Architecture)
		return nil
	})
	return platforms, dgst, err
}

// Digest resolves name to the digest of its manifest or index with one
// manifest HEAD.
func (r *Remote) Digest(ctx context.Context, name string, auth Auth) (digest.Digest, error) {
	var dgst digest.Digest
	err := r.withAuth(ctx, name, auth, func(ctx context.Context, iref types.ImageReference, sys *types.SystemContext) error {
		var err error
		dgst, err = docker.GetDigest(ctx, sys, iref)
		return err
	})
	return dgst, err
}

// withAuth runs do with each credential in auth until one succeeds, or
// anonymously when auth is empty, as a kubelet pulls.
func (r *Remote) withAuth(ctx context.Context, name string, auth Auth, do func(context.Context, types.ImageReference, *types.SystemContext) error) error {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return &ReferenceError{Err: fmt.Errorf("parsing image reference %q: %w", name, err)}
	}
	named = reference.TagNameOnly(named)
	iref, err := docker.NewReference(named)
	if err != nil {
		return &ReferenceError{Err: fmt.Errorf("image reference %q: %w", name, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	tries := auth
	if len(tries) == 0 {
		tries = Auth{{}}
	}
	var errs []error
	for _, cred := range tries {
		sys := r.systemContext(reference.Domain(named), cred)
		err := do(ctx, iref, sys)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

func (r *Remote) systemContext(host string, cred Credential) *types.SystemContext {
	access := registry.Access{
		// Explicit credentials, possibly empty: never the controller's own
		// auth files.
		Credential: &types.DockerAuthConfig{
			Username: cred.Username, Password: cred.Password, IdentityToken: cred.IdentityToken,
		},
		InsecureRegistries: r.opts.InsecureRegistries,
		RegistriesConfPath: r.opts.RegistriesConfPath,
		UserAgent:          r.opts.UserAgent,
	}
	return access.SystemContext(host)
}
