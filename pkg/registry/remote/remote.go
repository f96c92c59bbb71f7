// Package remote connects go-containerregistry's registry client by the
// rules of package registry: the credentials containers/image finds for a
// repository from an Access, and the Access's TLS rules. It is its own
// package so that the programs that reach registries through
// containers/image alone do not link go-containerregistry.
package remote

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/docker/config"

	"github.com/archway-build/archway/pkg/registry"
)

// NameOptions are go-containerregistry's options for references to ref's
// registry: name.Insecure when access reaches it without TLS checks.
func NameOptions(access registry.Access, ref string) []name.Option {
	if access.IsInsecure(registry.Host(ref)) {
		return []name.Option{name.Insecure}
	}
	return nil
}

// Connect returns repository and the options to reach it: the credentials
// containers/image finds for it from access, and access's TLS rules.
func Connect(ctx context.Context, access registry.Access, repository string) (name.Repository, []remote.Option, error) {
	repo, err := name.NewRepository(repository, NameOptions(access, repository)...)
	if err != nil {
		return name.Repository{}, nil, fmt.Errorf("repository %q: %w", repository, err)
	}
	named, err := reference.ParseNormalizedNamed(repository)
	if err != nil {
		return name.Repository{}, nil, err
	}
	host := reference.Domain(named)
	creds, err := config.GetCredentialsForRef(access.SystemContext(host), named)
	if err != nil {
		return name.Repository{}, nil, fmt.Errorf("reading credentials for %s: %w", repository, err)
	}
	auth := authn.Anonymous
	if creds.Username != "" || creds.Password != "" || creds.IdentityToken != "" {
		auth = authn.FromConfig(authn.AuthConfig{Username: creds.Username, Password: creds.Password, IdentityToken: creds.IdentityToken})
	}
	rt, err := access.Transport(host)
	if err != nil {
		return name.Repository{}, nil, err
	}
	rt = transport.NewUserAgent(rt, access.SystemContext(host).DockerRegistryUserAgent)
	return repo, []remote.Option{remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(rt)}, nil
}
