package image

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	cimage "go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/pkg/registry"
)

// RemoteOptions configure how Remote reaches registries.
type RemoteOptions struct {
	// InsecureRegistries are hosts (host or host:port) reached over plain
	// HTTP or TLS without verification, like registries.conf's insecure
	// (registry.Access's rule: loopback registries always are).
	InsecureRegistries []string
	// RegistriesConfPath is a registries.conf for mirrors and insecure
	// registries; empty means containers/image's system default. Ignored
	// when Registries is set.
	RegistriesConfPath string
	// CertDir holds registry CA certificates, <CertDir>/<host[:port]>/*.crt
	// (registry.Access.CertDir); empty: containers/image's defaults.
	// Ignored when Registries is set (its CAs apply).
	CertDir string
	// Registries, when set, is the watched registry configuration (mirrors,
	// blocked and insecure registries, CAs), read afresh for every call.
	// Registries are then seen as a node sees them: a loopback registry is
	// verified like any other, and InsecureRegistries (already part of the
	// configuration) apply through it, to the registry and not its mirrors.
	Registries *registries.Store
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
// platforms, a single image its config's, and an operator bundle (by its
// config's labels, an index's first image's) every platform. The digest is
// the manifest's or index's. Each credential in auth is tried in turn.
func (r *Remote) Architectures(ctx context.Context, ref Reference, auth Auth) (Platforms, digest.Digest, error) {
	var platforms Platforms
	var dgst digest.Digest
	err := r.withAuth(ctx, ref.Name, auth, func(ctx context.Context, t target) error {
		// containers/image tries the mirrors, then the source, itself.
		sys := t.sys
		src, err := t.ref.NewImageSource(ctx, sys)
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
		// The config of the image, or of an index's first image: an
		// operator bundle runs anywhere, whatever platforms it lists (the
		// multiarch tuning operator reads an index's first image too).
		var instance *digest.Digest
		if manifest.MIMETypeIsMultiImage(mime) {
			if platforms, err = PlatformsFromIndex(blob, mime); err != nil {
				return err
			}
			first, err := firstImage(blob, mime)
			if err != nil || first == "" {
				return err
			}
			instance = &first
		}
		img, err := cimage.FromUnparsedImage(ctx, sys, cimage.UnparsedInstance(src, instance))
		if err != nil {
			return err
		}
		info, err := img.Inspect(ctx)
		if err != nil {
			return err
		}
		switch {
		case isOperatorBundle(info.Labels):
			platforms = Platforms{{OS: AnyArchitecture, Architecture: AnyArchitecture}}
		case instance == nil:
			platforms = PlatformFromConfig(info.Os, info.Architecture)
		}
		return nil
	})
	return platforms, dgst, err
}

// Digest resolves name to the digest of its manifest or index with one
// manifest HEAD, to the endpoints a pull would try in turn (the mirrors
// for this kind of reference, then the source): containers/image's
// GetDigest asks the source alone.
func (r *Remote) Digest(ctx context.Context, name string, auth Auth) (digest.Digest, error) {
	var dgst digest.Digest
	err := r.withAuth(ctx, name, auth, func(ctx context.Context, t target) error {
		var errs []error
		for _, src := range t.sources {
			ref, err := docker.NewReference(src.Reference)
			if err != nil {
				return &ReferenceError{Err: err}
			}
			sys := *t.sys
			if reference.Domain(src.Reference) != reference.Domain(t.named) {
				// As a pull: the image's credentials are not sent to a
				// mirror on another host.
				sys.DockerAuthConfig = nil
			}
			if src.Endpoint.Insecure {
				sys.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
			}
			if dgst, err = docker.GetDigest(ctx, &sys, ref); err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", src.Reference, err))
			if ctx.Err() != nil {
				break
			}
		}
		if len(errs) == 1 {
			return errors.Unwrap(errs[0])
		}
		return errors.Join(errs...)
	})
	return dgst, err
}

// target is one try of a call: the image, the endpoints a pull tries for
// it in order, and the settings to reach them with.
type target struct {
	named   reference.Named
	ref     types.ImageReference
	sources []sysregistriesv2.PullSource
	sys     *types.SystemContext
}

// withAuth runs do with each credential in auth until one succeeds, or
// anonymously when auth is empty, as a kubelet pulls.
func (r *Remote) withAuth(ctx context.Context, name string, auth Auth, do func(context.Context, target) error) error {
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
	var settings *registries.Settings
	sources := []sysregistriesv2.PullSource{{Endpoint: sysregistriesv2.Endpoint{Location: reference.Domain(named)}, Reference: named}}
	if r.opts.Registries != nil {
		if settings, err = r.opts.Registries.Current(ctx); err != nil {
			return err
		}
		if sources, err = pullSources(settings, named); err != nil {
			return err
		}
	}
	tries := auth
	if len(tries) == 0 {
		tries = Auth{{}}
	}
	var errs []error
	for _, cred := range tries {
		sys := r.systemContext(reference.Domain(named), cred, settings)
		err := do(ctx, target{named: named, ref: iref, sources: sources, sys: sys})
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

// pullSources returns the endpoints a node tries for named, in order, and
// prepares their certificate directories; a blocked registry with no
// mirror for this reference is a *BlockedError.
func pullSources(settings *registries.Settings, named reference.Named) ([]sysregistriesv2.PullSource, error) {
	reg, err := settings.Registry(named.Name())
	if err != nil {
		return nil, fmt.Errorf("the registry configuration: %w", err)
	}
	sources := []sysregistriesv2.PullSource{{Endpoint: sysregistriesv2.Endpoint{Location: reference.Domain(named)}, Reference: named}}
	if reg != nil {
		if sources, err = reg.PullSourcesFromReference(named); err != nil {
			return nil, &ReferenceError{Err: err}
		}
		if reg.Blocked && len(sources) == 1 {
			return nil, &BlockedError{Image: named.String(), Registry: reg.Prefix}
		}
	}
	hosts := make([]string, 0, len(sources))
	for _, s := range sources {
		hosts = append(hosts, reference.Domain(s.Reference))
	}
	if err := settings.PrepareHosts(hosts...); err != nil {
		return nil, err
	}
	return sources, nil
}

func (r *Remote) systemContext(host string, cred Credential, settings *registries.Settings) *types.SystemContext {
	access := registry.Access{
		// Explicit credentials, possibly empty: never the controller's own
		// auth files.
		Credential: &types.DockerAuthConfig{
			Username: cred.Username, Password: cred.Password, IdentityToken: cred.IdentityToken,
		},
		InsecureRegistries: r.opts.InsecureRegistries,
		RegistriesConfPath: r.opts.RegistriesConfPath,
		CertDir:            r.opts.CertDir,
		UserAgent:          r.opts.UserAgent,
	}
	if settings == nil {
		return access.SystemContext(host)
	}
	// The listed insecure registries are in the configuration, where they
	// apply to the registry and not to its mirrors; only "every registry"
	// is said per call.
	access.InsecureRegistries = nil
	if slices.Contains(r.opts.InsecureRegistries, registry.AllRegistries) {
		access.InsecureRegistries = []string{registry.AllRegistries}
	}
	access.VerifyLoopback = true
	access.RegistriesConfPath = ""
	sys := access.SystemContext(host)
	settings.SystemContext(sys)
	return sys
}
