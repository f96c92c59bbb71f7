package image

import (
	"fmt"

	"go.podman.io/image/v5/docker/reference"

	"github.com/archway-build/archway/pkg/registry"
)

// Cache is a layer cache in a registry for one platform's builds. Before a
// step runs, buildah looks for its image in the store, then in Repository,
// tagged with the step's cache key; a step that ran is pushed there. The
// key is a digest of the step's parent (the base image's layer digests and
// history, and every step before), the instruction with the values of the
// build args a RUN sees, and for COPY and ADD the digest of the content
// copied. So a changed file, build arg or base image misses the cache from
// the step it changes on, and the steps before are reused.
type Cache struct {
	// Repository is the cache's repository, without tag or digest, one per
	// platform (platform.CacheRepository). Required.
	Repository string
	// Auth holds credentials to pull from and push to Repository (a build
	// pod's push secret); the zero AuthFile: containers/image's default
	// places.
	Auth registry.AuthFile
}

// reference parses c's repository as buildah takes it.
func (c *Cache) reference() (reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(c.Repository)
	if err != nil {
		return nil, fmt.Errorf("layer cache repository %q: %w", c.Repository, err)
	}
	if !reference.IsNameOnly(named) {
		return nil, fmt.Errorf("layer cache repository %q has a tag or digest: name the repository only", c.Repository)
	}
	return named, nil
}

// buildAuth returns the credentials file of a build that pulls base images
// with pull and uses cache: buildah reaches the cache with the build's one
// set of credentials, so when the cache's credentials are another file, it
// is a copy of pull with the cache's credential added for the cache
// repository alone (registry.WithRepositoryAuth).
func (b *Builder) buildAuth(pull registry.AuthFile, cache *Cache, repo reference.Named) (registry.AuthFile, error) {
	if cache == nil {
		return pull, nil
	}
	auth, err := registry.WithRepositoryAuth(pull, repo, cache.Auth, b.confDir)
	if err != nil {
		return registry.AuthFile{}, fmt.Errorf("layer cache: %w", err)
	}
	return auth, nil
}
