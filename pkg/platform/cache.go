package platform

import (
	"fmt"

	"github.com/distribution/reference"
)

// maxRepositoryLength is the longest repository name (registry host
// included) the distribution spec's references allow.
const maxRepositoryLength = 255

// CacheRepository returns the registry repository of one platform's layer
// cache: repository followed by "-" and the platform's canonical form as a
// name (NameSuffix), so that platforms never share a cache and every
// spelling of one platform finds the same one:
//
//	registry.example.com/team/app-cache, linux/arm64    -> registry.example.com/team/app-cache-linux-arm64
//	registry.example.com/team/app-cache, linux/arm64/v8 -> registry.example.com/team/app-cache-linux-arm64
//	registry.example.com/team/app-cache, linux/arm/v7   -> registry.example.com/team/app-cache-linux-arm-v7
//
// A platform gets a repository of its own, not a tag, because buildah tags
// each cached step with its cache key. repository must name a repository
// without tag or digest; the result is written in full.
func CacheRepository(repository, platform string) (string, error) {
	named, err := reference.ParseNormalizedNamed(repository)
	if err != nil {
		return "", fmt.Errorf("cache repository %q is not a repository name: %w", repository, err)
	}
	if !reference.IsNameOnly(named) {
		return "", fmt.Errorf("cache repository %q has a tag or digest: name the repository only (e.g. %s)", repository, named.Name())
	}
	p, err := Parse(platform)
	if err != nil {
		return "", fmt.Errorf("cache repository for %s: %w", repository, err)
	}
	name := named.Name() + "-" + p.NameSuffix()
	if len(name) > maxRepositoryLength {
		return "", fmt.Errorf("cache repository %q is too long: with the platform suffix it has %d characters, a registry takes at most %d",
			repository, len(name), maxRepositoryLength)
	}
	return name, nil
}

// OutputCacheRepository returns the cache repository a build pushing to
// output uses by default: output's repository followed by "-cache", next to
// the image and writable with the credentials that push it
// (registry.example.com/team/app:v1 -> registry.example.com/team/app-cache).
func OutputCacheRepository(output string) (string, error) {
	tagged, err := ParseOutput(output)
	if err != nil {
		return "", err
	}
	return tagged.Name() + "-cache", nil
}
