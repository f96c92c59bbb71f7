package image

import (
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker/reference"

	"github.com/archway-build/archway/pkg/build/dockerfile"
)

// pinKey is how pinBases finds a base's digest: its reference, and the
// platform of its FROM's --platform flag, if any.
func pinKey(ref, platform string) string {
	if platform == "" {
		return ref
	}
	return ref + " --platform=" + platform
}

// pinBases returns df with the image of every FROM instruction that pulls
// a base image in digests (by pinKey of its reference with ARGs expanded,
// as im tells it, and its --platform) replaced by that image's repository
// and digest, keeping the instruction's flags and stage name: the build
// then pulls the very manifest its result key names, whatever the tag
// names meanwhile.
func pinBases(df *dockerfile.File, im dockerfile.Images, digests map[string]string) ([]byte, error) {
	pins := map[int]string{}
	for _, b := range slices.Concat(im.Bases(), im.PlatformBases()) {
		dgst, ok := digests[pinKey(b.Ref, b.Platform)]
		if !ok {
			continue
		}
		named, err := reference.ParseNormalizedNamed(b.Ref)
		if err != nil {
			return nil, fmt.Errorf("base image %q: %w", b.Ref, err)
		}
		pinned, err := reference.WithDigest(reference.TrimNamed(named), digest.Digest(dgst))
		if err != nil {
			return nil, fmt.Errorf("base image %q: %w", b.Ref, err)
		}
		pins[b.Stage] = pinned.String()
	}
	return df.RewriteFroms(pins)
}
