package image

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/archway-build/archway/pkg/platform"
)

// Platforms is the set of platforms of one image: OS and architecture as an
// index entry or an image config names them, without variants (nodes are
// selected by kubernetes.io/arch, which has no variant).
type Platforms []platform.Platform

// Architectures returns the architectures the image has for os (linux
// when empty). A windows/amd64 entry does not make a linux image amd64.
func (ps Platforms) Architectures(os string) sets.Set[string] {
	if os == "" {
		os = "linux"
	}
	out := sets.New[string]()
	for _, p := range ps {
		if p.OS == os || p.OS == AnyArchitecture {
			out.Insert(p.Architecture)
		}
	}
	return out
}

// Reference names the image to inspect.
type Reference struct {
	// Name is the image as a pod spec names it: "busybox",
	// "host:port/repo:tag", "repo@sha256:...".
	Name string
	// Refresh asks a cache to resolve a tag to its digest again instead of
	// trusting a recent resolution: what a kubelet does for pods with
	// imagePullPolicy Always.
	Refresh bool
}

// Credential is one set of registry credentials from a docker config.
type Credential struct {
	Username      string
	Password      string
	IdentityToken string
}

// Auth is the credentials to try for one image, in the order a kubelet
// would try them. Empty means anonymous access.
type Auth []Credential

// Key identifies the credentials in cache keys without revealing them: a
// SHA-256 of the ordered list, "" for anonymous access.
func (a Auth) Key() string {
	if len(a) == 0 {
		return ""
	}
	h := sha256.New()
	for _, c := range a {
		for _, field := range []string{c.Username, c.Password, c.IdentityToken} {
			// Length-prefixed, so that no two lists hash the same input.
			_, _ = fmt.Fprintf(h, "%d:%s", len(field), field) // a hash never fails to write
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Inspector tells which platforms an image exists for and the digest of the
// manifest or index the reference resolved to.
type Inspector interface {
	Architectures(ctx context.Context, ref Reference, auth Auth) (Platforms, digest.Digest, error)
}

// Resolver resolves a reference to the digest of its manifest or index
// cheaply (one manifest HEAD).
type Resolver interface {
	Digest(ctx context.Context, name string, auth Auth) (digest.Digest, error)
}

// Registry is what Cache decorates: full inspection and cheap resolution.
type Registry interface {
	Inspector
	Resolver
}

// sortPlatforms sorts and deduplicates ps in place.
func sortPlatforms(ps Platforms) Platforms {
	slices.SortFunc(ps, func(a, b platform.Platform) int {
		return cmp.Or(cmp.Compare(a.OS, b.OS), cmp.Compare(a.Architecture, b.Architecture), cmp.Compare(a.Variant, b.Variant))
	})
	return slices.Compact(ps)
}
