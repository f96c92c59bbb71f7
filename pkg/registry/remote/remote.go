// Package remote connects go-containerregistry's registry client by the
// rules of package registry: the credentials containers/image finds for a
// repository from an Access, and the Access's TLS rules. It is its own
// package so that the programs that reach registries through
// containers/image alone do not link go-containerregistry.
package remote

import (
	"context"
	"fmt"
	"net/http"

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

// Endpoint is how go-containerregistry reaches a repository by access's
// rules.
type Endpoint struct {
	Repository name.Repository
	// Auth holds the credentials containers/image finds for the
	// repository from access; Anonymous is true when it found none.
	Auth      authn.Authenticator
	Anonymous bool
	// Transport follows access's TLS rules and sends its user agent.
	Transport http.RoundTripper
}

// Resolve finds the endpoint of repository: its name, credentials and
// transport.
func Resolve(access registry.Access, repository string) (Endpoint, error) {
	repo, err := name.NewRepository(repository, NameOptions(access, repository)...)
	if err != nil {
		return Endpoint{}, fmt.Errorf("repository %q: %w", repository, err)
	}
	named, err := reference.ParseNormalizedNamed(repository)
	if err != nil {
		return Endpoint{}, err
	}
	host := reference.Domain(named)
	creds, err := config.GetCredentialsForRef(access.SystemContext(host), named)
	if err != nil {
		return Endpoint{}, fmt.Errorf("reading credentials for %s: %w", repository, err)
	}
	e := Endpoint{Repository: repo, Auth: authn.Anonymous, Anonymous: true}
	if creds.Username != "" || creds.Password != "" || creds.IdentityToken != "" {
		e.Auth = authn.FromConfig(authn.AuthConfig{Username: creds.Username, Password: creds.Password, IdentityToken: creds.IdentityToken})
		e.Anonymous = false
	}
	rt, err := access.Transport(host)
	if err != nil {
		return Endpoint{}, err
	}
	e.Transport = transport.NewUserAgent(rt, access.SystemContext(host).DockerRegistryUserAgent)
	return e, nil
}

// Connect returns repository and the options to reach it: the credentials
// containers/image finds for it from access, and access's TLS rules.
func Connect(ctx context.Context, access registry.Access, repository string) (name.Repository, []remote.Option, error) {
	e, err := Resolve(access, repository)
	if err != nil {
		return name.Repository{}, nil, err
	}
	return e.Repository, []remote.Option{remote.WithContext(ctx), remote.WithAuth(e.Auth), remote.WithTransport(e.Transport)}, nil
}
